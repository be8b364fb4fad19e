"""embody.checkpoint(), checkpoint_file() and resume_path()."""

from __future__ import annotations

import os
import stat
import tempfile
import time
import warnings

from support import SdkTestCase

import embody
from fake_agent import FakeAgent, error_body


class CheckpointTest(SdkTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.agent = FakeAgent()
        self.addCleanup(self.agent.stop)
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        # As the agent makes it: <data dir>/checkpoints/job-<id>
        self.dir = os.path.join(self.tmp.name, "data", "checkpoints", "job-7")
        os.makedirs(self.dir)

    def in_job(self, **extra: str) -> None:
        self.setenv({**self.agent.env(), "EMBODY_CHECKPOINT_DIR": self.dir, **extra})

    def user_file(self, content: bytes, name: str = "model.pt") -> str:
        path = os.path.join(self.tmp.name, name)
        with open(path, "wb") as f:
            f.write(content)
        return path

    def test_a_file_elsewhere_is_copied_in_and_reported(self) -> None:
        self.in_job()
        source = self.user_file(b"weights" * 1000)
        kept = embody.checkpoint(source, step=40)
        self.assertEqual(kept, os.path.join(self.dir, "step-40.ckpt"))
        with open(kept, "rb") as f:
            self.assertEqual(f.read(), b"weights" * 1000)
        self.assertEqual(self.agent.accepted, [
            {"type": "checkpoint", "step": 40, "path": kept, "bytes": 7000}])
        self.assertEqual(self.agent.requests[0].authorization, "Bearer token-7")
        # Nothing but the checkpoint in the directory: no temporary file left behind.
        self.assertEqual(os.listdir(self.dir), ["step-40.ckpt"])
        # Readable by the uid of a later attempt on this node, as the engine's are.
        self.assertEqual(stat.S_IMODE(os.stat(kept).st_mode), 0o644)
        # A later write to the caller's file does not touch the checkpoint.
        with open(source, "wb") as f:
            f.write(b"changed")
        with open(kept, "rb") as f:
            self.assertEqual(len(f.read()), 7000)

    def test_the_path_is_the_agents_spelling_of_the_directory(self) -> None:
        # The agent compares the path with its own directory lexically: a link in the way must
        # not be resolved into another spelling.
        link = os.path.join(self.tmp.name, "via-link")
        os.symlink(os.path.join(self.tmp.name, "data"), link)
        spelled = os.path.join(link, "checkpoints", "job-7")
        self.setenv({**self.agent.env(), "EMBODY_CHECKPOINT_DIR": spelled})
        kept = embody.checkpoint(self.user_file(b"x"), step=1)
        self.assertEqual(kept, os.path.join(spelled, "step-1.ckpt"))
        self.assertEqual(self.agent.accepted[0]["path"], kept)

    def test_the_file_already_in_place_is_not_copied(self) -> None:
        self.in_job()
        path = embody.checkpoint_path(3)
        with open(path, "wb") as f:
            f.write(b"abc")
        inode = os.stat(path).st_ino
        self.assertEqual(embody.checkpoint(path, step=3), path)
        self.assertEqual(os.stat(path).st_ino, inode)
        self.assertEqual(self.agent.accepted[0]["bytes"], 3)

    def test_checkpoint_file_writes_in_place_and_renames_when_done(self) -> None:
        self.in_job()
        with embody.checkpoint_file(12) as path:
            self.assertEqual(os.path.dirname(path), self.dir)
            self.assertNotRegex(os.path.basename(path), r"^step-\d+\.ckpt$")
            with open(path, "wb") as f:
                f.write(b"state")
            self.assertEqual(self.agent.accepted, [])  # nothing reported before the block ends
        final = os.path.join(self.dir, "step-12.ckpt")
        self.assertEqual(os.listdir(self.dir), ["step-12.ckpt"])
        self.assertEqual(stat.S_IMODE(os.stat(final).st_mode), 0o644)
        self.assertEqual(self.agent.accepted, [
            {"type": "checkpoint", "step": 12, "path": final, "bytes": 5}])

    def test_checkpoint_file_leaves_nothing_when_the_block_fails(self) -> None:
        self.in_job()
        with self.assertRaises(RuntimeError):
            with embody.checkpoint_file(12) as path:
                with open(path, "wb") as f:
                    f.write(b"half")
                raise RuntimeError("out of memory")
        self.assertEqual(os.listdir(self.dir), [])
        self.assertEqual(self.agent.requests, [])

    def test_checkpoint_file_refuses_a_block_that_wrote_nothing_there(self) -> None:
        self.in_job()
        with self.assertRaisesRegex(embody.EmbodyError, "nothing was written"):
            with embody.checkpoint_file(12) as path:
                with open(path + ".npy", "wb") as f:  # what numpy.save(path, ...) does
                    f.write(b"x")
        self.assertEqual(os.listdir(self.dir), [os.path.basename(path) + ".npy"])
        self.assertEqual(self.agent.requests, [])

    def test_step_events_reach_the_agent_before_the_checkpoint(self) -> None:
        # The agent files a checkpoint with the numbers of the step event of its step, so that
        # event must be there first.
        self.in_job()
        embody.report(step=100, loss=0.25)
        embody.checkpoint(self.user_file(b"x"), step=100, metrics={"loss": 0.25})
        self.assertEqual([e["type"] for e in self.agent.accepted], ["step", "checkpoint"])
        self.assertEqual(self.agent.accepted[1]["metrics"], {"loss": 0.25})

    def test_only_the_newest_are_kept(self) -> None:
        self.in_job()
        source = self.user_file(b"x")
        for step in range(1, 6):
            embody.checkpoint(source, step=step, keep=2)
        self.assertEqual(sorted(os.listdir(self.dir)), ["step-4.ckpt", "step-5.ckpt"])
        other = os.path.join(self.dir, "notes.txt")  # not a checkpoint: never pruned
        with open(other, "w") as f:
            f.write("x")
        embody.checkpoint(source, step=6)
        self.assertEqual(sorted(os.listdir(self.dir)),
                         ["notes.txt", "step-4.ckpt", "step-5.ckpt", "step-6.ckpt"])
        embody.checkpoint(source, step=7, keep=None)
        self.assertEqual(len(os.listdir(self.dir)), 5)

    def test_a_refusal_is_raised_at_once(self) -> None:
        self.in_job()
        self.agent.forced.append((400, None, error_body(
            "invalid_argument", "events[0]: path must be a non-empty string, got number "
            "(bad_field)", "events[0].path")))
        with self.assertRaises(embody.EventRefusedError) as caught:
            embody.checkpoint(self.user_file(b"x"), step=1)
        self.assertEqual(caught.exception.field, "events[0].path")
        self.assertIn("path must be a non-empty string", caught.exception.message)

    def test_a_full_queue_is_waited_out(self) -> None:
        self.in_job()
        self.agent.forced.append((429, 1, error_body("resource_exhausted", "full")))
        start = time.monotonic()
        embody.checkpoint(self.user_file(b"x"), step=1)
        self.assertGreaterEqual(time.monotonic() - start, 0.95)
        self.assertEqual(len(self.agent.accepted), 1)

    def test_a_queue_full_past_the_timeout_raises_busy(self) -> None:
        self.in_job()
        self.agent.forced.append((429, 5, error_body("resource_exhausted",
                                                     "the agent's event queue is full")))
        with self.assertRaises(embody.AgentBusyError) as caught:
            embody.checkpoint(self.user_file(b"x"), step=1, timeout_s=1)
        self.assertIn("the agent's event queue is full", str(caught.exception))

    def test_an_unreachable_agent_raises_after_the_timeout(self) -> None:
        self.in_job()
        self.agent.stop()
        start = time.monotonic()
        with self.assertRaises(embody.AgentUnavailableError):
            embody.checkpoint(self.user_file(b"x"), step=1, timeout_s=1)
        self.assertLess(time.monotonic() - start, 4)

    def test_a_wrong_token_raises_not_in_job(self) -> None:
        self.setenv({**self.agent.env(token="nope"), "EMBODY_CHECKPOINT_DIR": self.dir})
        with self.assertRaises(embody.NotInJobError):
            embody.checkpoint(self.user_file(b"x"), step=1)

    def test_other_ranks_are_refused(self) -> None:
        self.in_job(RANK="2", WORLD_SIZE="4")
        with self.assertRaisesRegex(embody.EmbodyError, "rank 2"):
            embody.checkpoint(self.user_file(b"x"), step=1)
        self.assertEqual(os.listdir(self.dir), [])

    def test_bad_steps(self) -> None:
        self.in_job()
        source = self.user_file(b"x")
        with self.assertRaises(TypeError):
            embody.checkpoint(source, step=True)
        with self.assertRaises(TypeError):
            embody.checkpoint(source, step=1.0)
        with self.assertRaises(ValueError):
            embody.checkpoint(source, step=-1)
        with self.assertRaises(TypeError):
            embody.checkpoint(source, step=1, metrics={"loss": "low"})

    def test_outside_a_job_the_file_is_kept_and_nothing_sent(self) -> None:
        cwd = os.getcwd()
        os.chdir(self.tmp.name)
        self.addCleanup(os.chdir, cwd)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            kept = embody.checkpoint(self.user_file(b"x"), step=5)
        self.assertEqual(kept, os.path.join(self.tmp.name, "checkpoints", "step-5.ckpt"))
        self.assertTrue(os.path.isfile(kept))
        self.assertEqual([w.category for w in caught], [embody.NotInJobWarning])
        self.setenv({"EMBODY_STRICT": "1"})
        with self.assertRaisesRegex(embody.NotInJobError, "the checkpoint is kept at"):
            embody.checkpoint(self.user_file(b"x"), step=6)


class ResumePathTest(SdkTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def touch(self, name: str) -> str:
        path = os.path.join(self.tmp.name, name)
        open(path, "wb").close()
        return path

    def test_a_first_start_has_none(self) -> None:
        self.assertIsNone(embody.resume_path())
        self.setenv({"EMBODY_RESUME_FROM": ""})
        self.assertIsNone(embody.resume_path())

    def test_the_named_file_when_nothing_is_newer(self) -> None:
        named = self.touch("step-30.ckpt")
        self.touch("step-20.ckpt")
        self.setenv({"EMBODY_RESUME_FROM": named})
        self.assertEqual(embody.resume_path(), named)

    def test_a_newer_checkpoint_beside_it_wins_even_when_the_named_one_is_gone(self) -> None:
        # The run wrote step 50 and pruned step 30 before the server heard of either.
        self.touch("step-40.ckpt")
        newest = self.touch("step-50.ckpt")
        self.touch("step-7.ckpt.tmp")
        self.setenv({"EMBODY_RESUME_FROM": os.path.join(self.tmp.name, "step-30.ckpt")})
        self.assertEqual(embody.resume_path(), newest)

    def test_a_name_that_is_not_a_step_asks_for_nothing_newer(self) -> None:
        named = self.touch("model.pt")
        self.touch("step-50.ckpt")
        self.setenv({"EMBODY_RESUME_FROM": named})
        self.assertEqual(embody.resume_path(), named)

    def test_a_directory_it_cannot_list_gives_the_named_file(self) -> None:
        # The agent's download directory is root's, 0711: the job reads the file, lists nothing.
        if os.geteuid() == 0:
            # root lists every directory: a missing one stands in for it.
            named = "/nonexistent-embody-dir/step-3.ckpt"
        else:
            d = os.path.join(self.tmp.name, "downloads")
            os.mkdir(d)
            named = os.path.join(d, "step-3.ckpt")
            open(named, "wb").close()
            os.chmod(d, stat.S_IXUSR)
            self.addCleanup(os.chmod, d, 0o700)
        self.setenv({"EMBODY_RESUME_FROM": named})
        self.assertEqual(embody.resume_path(), named)
