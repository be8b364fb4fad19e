-- Scheduler leadership, fenced (docs/architecture.md, "Failure behaviour"). The advisory lock
-- says which replica leads; this row's epoch says which leadership a write belongs to. A replica
-- that takes the lock advances the epoch; every scheduler transaction first reads the row
-- FOR SHARE and goes on only while the epoch is still its own. So a deposed leader (its lock
-- session died, another replica took over) has its writes refused, and a new leader's advance
-- waits for any transaction of the old one that already holds the row: the two never overlap.
CREATE TABLE scheduler_leader (
  id          smallint PRIMARY KEY CHECK (id = 1),
  epoch       bigint NOT NULL CHECK (epoch >= 0),
  holder      text NOT NULL DEFAULT '',
  acquired_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO scheduler_leader (id, epoch) VALUES (1, 0);
