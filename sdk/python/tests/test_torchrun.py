"""embody.torchrun: torch's torchrun, its --redirects/--tee values read right on every Python."""
import os
import subprocess
import sys
import tempfile
import unittest

from support import SDK_DIR, SdkTestCase

try:
    import torch.distributed.run  # noqa: F401
    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False


@unittest.skipUnless(HAVE_TORCH, "torch is not installed (Debian: apt-get install python3-torch)")
class TorchrunTest(SdkTestCase):
    def test_std_values_parse_after_the_repair(self) -> None:
        from torch.distributed.elastic.multiprocessing.api import Std
        import embody.torchrun
        embody.torchrun._repair_std_values()
        self.assertEqual(Std.from_str("0"), Std.NONE)
        self.assertEqual(Std.from_str("3"), Std.ALL)
        self.assertEqual(Std.from_str("0:1,1:2"), {0: Std.OUT, 1: Std.ERR})
        with self.assertRaises(ValueError):
            Std.from_str("7")

    def test_starts_workers_with_torchs_environment(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            script = os.path.join(tmp, "w.py")
            with open(script, "w") as f:
                f.write("import os\n"
                        "with open(os.environ['RANK'] + '.out', 'w') as out:\n"
                        "    out.write(os.environ['LOCAL_RANK'] + ' ' + os.environ['WORLD_SIZE'])\n")
            env = dict(os.environ, PYTHONPATH=SDK_DIR)
            done = subprocess.run(
                [sys.executable, "-m", "embody.torchrun", "--nproc_per_node", "2",
                 "--max_restarts", "0", "--master_port", "0", script],
                capture_output=True, text=True, timeout=120, env=env, cwd=tmp)
            self.assertEqual(done.returncode, 0, done.stderr)
            for rank in (0, 1):
                with open(os.path.join(tmp, f"{rank}.out")) as f:
                    self.assertEqual(f.read(), f"{rank} 2")


class FirstNodeWaitTest(SdkTestCase):
    """The other nodes' torchrun waits for the first node's store to listen (no torch needed)."""

    def environ(self, **env: str) -> None:
        keys = ("PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT")
        saved = {k: os.environ.get(k) for k in keys}

        def restore() -> None:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        self.addCleanup(restore)
        for k in keys:
            os.environ.pop(k, None)
        os.environ.update(env)

    def test_the_first_node_and_a_hand_run_torchrun_do_not_wait(self) -> None:
        import embody.torchrun
        self.environ(PET_NODE_RANK="0", PET_MASTER_ADDR="127.0.0.1", PET_MASTER_PORT="1")
        self.assertIsNone(embody.torchrun._await_first_node())
        self.environ()
        self.assertIsNone(embody.torchrun._await_first_node())
        self.environ(PET_NODE_RANK="1", PET_MASTER_ADDR="127.0.0.1", PET_MASTER_PORT="x")
        self.assertIsNone(embody.torchrun._await_first_node())

    def test_another_node_waits_until_the_endpoint_listens(self) -> None:
        import socket
        import time
        import embody.torchrun
        server = socket.socket()
        self.addCleanup(server.close)
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", 0))  # bound, not listening: connections are refused
        port = server.getsockname()[1]
        self.environ(PET_NODE_RANK="1", PET_MASTER_ADDR="127.0.0.1", PET_MASTER_PORT=str(port))
        waiting = embody.torchrun._await_first_node()
        self.assertIsNotNone(waiting)
        waiting.join(0.5)
        self.assertTrue(waiting.is_alive(), "it stopped waiting before anything listened")
        server.listen(4)
        listening = time.monotonic()
        waiting.join(10)
        self.assertFalse(waiting.is_alive())
        self.assertLess(time.monotonic() - listening, 1.0)  # well before torch's 1 s retry


if __name__ == "__main__":
    unittest.main()
