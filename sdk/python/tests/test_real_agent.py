"""The SDK against the agent's own job-local API and checkpoint uploader (agent::LocalApi and
agent::CheckpointUploader, started alone by embody-sdk-local-api-fixture): a script's reports
queued as the agent queues the engine's, its checkpoint uploaded into a store with the metrics of
its step, and the real agent's refusals raised with the real agent's words."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
import unittest
from typing import Any

from support import SdkTestCase, binary, run_python

import embody

FIXTURE = binary("EMBODY_SDK_LOCAL_API_FIXTURE", "embody-sdk-local-api-fixture")


@unittest.skipIf(FIXTURE is None, "embody-sdk-local-api-fixture is not built "
                                  "(cmake --build build --target embody-sdk-local-api-fixture)")
class RealAgentTest(SdkTestCase):
    JOB = 41
    TOKEN = "job-41-token"

    def start(self, max_events: int = 10_000) -> None:
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        root = os.path.join(self.tmp.name, "data", "checkpoints")
        self.checkpoint_dir = os.path.join(root, f"job-{self.JOB}")
        os.makedirs(self.checkpoint_dir)
        store = os.path.join(self.tmp.name, "store")
        self.agent = subprocess.Popen(
            [FIXTURE, str(self.JOB), self.TOKEN, root, store, str(max_events)],  # type: ignore
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(self.agent.kill)
        port = json.loads(self.agent.stdout.readline())["port"]  # type: ignore[union-attr]
        self.env = {"EMBODY_AGENT_URL": f"http://127.0.0.1:{port}",
                    "EMBODY_JOB_ID": str(self.JOB), "EMBODY_JOB_TOKEN": self.TOKEN,
                    "EMBODY_CHECKPOINT_DIR": self.checkpoint_dir}

    def finish(self) -> dict[str, Any]:
        """Stops the agent after its uploads; what it queued and stored."""
        out, err = self.agent.communicate("", timeout=60)
        self.assertEqual(self.agent.returncode, 0, err)
        return json.loads(out.strip().splitlines()[-1])

    def test_a_training_script_reports_and_its_checkpoint_is_uploaded(self) -> None:
        self.start()
        done = run_python(
            "import os, embody\n"
            "for step in range(10):\n"
            "    embody.report(step=step, loss=1.0 / (step + 1), lr=3e-4)\n"
            "src = os.path.join(os.environ['HOME'], 'model.bin')\n"
            "open(src, 'wb').write(bytes(range(256)) * 40)\n"
            "print(embody.checkpoint(src, step=9))\n",
            {**self.env, "HOME": self.tmp.name})
        self.assertEqual(done.returncode, 0, done.stderr)
        kept = os.path.join(self.checkpoint_dir, "step-9.ckpt")
        self.assertEqual(done.stdout.strip(), kept)
        result = self.finish()
        steps = [e for e in result["events"] if e["type"] == "step"]
        self.assertEqual([e["step"] for e in steps], list(range(10)))
        self.assertEqual(steps[3], {"type": "step", "step": 3, "loss": 0.25, "lr": 3e-4})
        self.assertEqual(result["events"][-1], {"type": "checkpoint", "step": 9, "path": kept,
                                                "bytes": 10240})
        self.assertEqual((result["uploaded"], result["failed"]), (1, 0))
        content = bytes(range(256)) * 40
        # Filed with the numbers of the step event of step 9: it arrived first.
        self.assertEqual(result["stored"], [{"step": 9, "bytes": 10240,
                                             "sha256": hashlib.sha256(content).hexdigest(),
                                             "metrics": {"loss": 0.1, "lr": 3e-4}}])

    def test_the_real_agents_refusal_is_raised_with_its_message(self) -> None:
        self.start()
        self.setenv(self.env)
        embody.report(step=1, loss=0.5)
        embody.report(step=2, clip_fraction=1.5)
        with self.assertRaises(embody.EventRefusedError) as caught:
            embody.flush()
        self.assertEqual(caught.exception.message,
                         "events[1]: clip_fraction must be a number in [0, 1] or null, got "
                         "number (bad_field)")
        self.assertEqual(caught.exception.field, "events[1].clip_fraction")
        result = self.finish()
        self.assertEqual([e["step"] for e in result["events"]], [1])

    def test_a_wrong_token(self) -> None:
        self.start()
        self.setenv({**self.env, "EMBODY_JOB_TOKEN": "guess"})
        embody.report(step=1, loss=0.5)
        with self.assertRaises(embody.NotInJobError) as caught:
            embody.flush()
        self.assertEqual(caught.exception.message, "missing or wrong job token")
        self.assertEqual(self.finish()["events"], [])

    def test_a_full_queue_answers_429_and_checkpoint_gives_up_at_its_timeout(self) -> None:
        # Checkpoint events are never dropped for room: two fill a queue of two.
        self.start(max_events=2)
        self.setenv(self.env)
        source = os.path.join(self.tmp.name, "w")
        with open(source, "wb") as f:
            f.write(b"w")
        embody.checkpoint(source, step=1)
        embody.checkpoint(source, step=2)
        with self.assertRaises(embody.AgentBusyError) as caught:
            embody.checkpoint(source, step=3, timeout_s=1)  # the agent says Retry-After: 5
        self.assertIn("the agent's event queue is full", caught.exception.message)
        self.assertEqual(caught.exception.status, 429)
        result = self.finish()
        self.assertEqual([e["step"] for e in result["events"]], [1, 2])

    def test_a_path_outside_the_checkpoint_directory_is_not_uploaded(self) -> None:
        # What the SDK never sends, checked: the agent accepts the event but will not upload.
        self.start()
        outside = os.path.join(self.tmp.name, "step-1.ckpt")
        with open(outside, "wb") as f:
            f.write(b"x")
        from embody._api import LocalApiClient, encode_event, events_body
        from embody._env import job_env
        self.setenv(self.env)
        LocalApiClient(job_env()).post_until(  # type: ignore[arg-type]
            events_body([encode_event({"type": "checkpoint", "step": 1, "path": outside,
                                       "bytes": 1})]), deadline=float("inf"))
        result = self.finish()
        self.assertEqual((result["uploaded"], result["failed"]), (0, 1))
