-- Launches are acknowledged by the head agent (docs/contracts.md, "Agent <-> server"): `launched`
-- now means the agent acknowledged the launch, and `launch_sends` counts the heartbeat replies that
-- carried it. A launch is repeated until acknowledged; one sent many times and never acknowledged
-- was lost by its node, and the job goes back to the queue as after a node loss.
-- (0009 is the dataset uploads.)
ALTER TABLE job_allocations ADD COLUMN launch_sends integer NOT NULL DEFAULT 0;
