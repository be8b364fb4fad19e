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


if __name__ == "__main__":
    unittest.main()
