"""should_stop(): SIGTERM becomes a flag the loop reads, as embody-engine's handler does."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import warnings

from support import SDK_DIR, SdkTestCase

import embody


class ShouldStopTest(SdkTestCase):
    def test_sigterm_sets_the_flag_instead_of_ending_the_process(self) -> None:
        self.assertFalse(embody.should_stop())  # installs the handler
        os.kill(os.getpid(), signal.SIGTERM)
        deadline = time.monotonic() + 5
        while not embody.should_stop() and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertTrue(embody.should_stop())

    def test_request_stop(self) -> None:
        self.assertFalse(embody.should_stop())
        embody.request_stop()
        self.assertTrue(embody.should_stop())

    def test_install_returns_the_handler_it_replaced(self) -> None:
        previous = embody.install_sigterm_handler()
        self.assertEqual(previous, signal.SIG_DFL)
        self.assertIsNot(signal.getsignal(signal.SIGTERM), signal.SIG_DFL)

    def test_from_another_thread_it_warns_and_reads_the_flag(self) -> None:
        seen: list[object] = []

        def ask() -> None:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                seen.append(embody.should_stop())
                seen.append([w.category for w in caught])
            try:
                embody.install_sigterm_handler()
            except RuntimeError as e:
                seen.append(str(e))

        t = threading.Thread(target=ask)
        t.start()
        t.join()
        self.assertEqual(seen[0], False)
        self.assertEqual(seen[1], [RuntimeWarning])
        self.assertIn("main thread", seen[2])
        self.assertEqual(signal.getsignal(signal.SIGTERM), signal.SIG_DFL)


class LoopTest(SdkTestCase):
    """A training loop in a process of its own, stopped as the agent stops a job."""

    LOOP = (
        "import sys, time, embody\n"
        "step = 0\n"
        "embody.should_stop()\n"
        "print('ready', flush=True)\n"
        "while not embody.should_stop():\n"
        "    step += 1\n"
        "    time.sleep(0.001)\n"
        "print('stopped after', step, flush=True)\n"
        "sys.exit(embody.STOPPED_EXIT_CODE)\n")

    def start(self, code: str) -> subprocess.Popen[str]:
        env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": SDK_DIR,
               "PYTHONDONTWRITEBYTECODE": "1"}
        p = subprocess.Popen([sys.executable, "-c", code], env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.addCleanup(p.kill)
        self.assertEqual(p.stdout.readline().strip(), "ready")  # type: ignore[union-attr]
        return p

    def test_the_loop_finishes_its_step_and_exits_as_the_engine_does(self) -> None:
        p = self.start(self.LOOP)
        time.sleep(0.1)
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=10)
        self.assertEqual(p.returncode, 128 + signal.SIGTERM)
        self.assertEqual(embody.STOPPED_EXIT_CODE, 143)
        self.assertRegex(out, r"stopped after \d+")
        self.assertIn("embody: SIGTERM received; stopping at the next should_stop() check", err)

    def test_a_script_that_never_asks_keeps_the_default_action(self) -> None:
        # Installing the handler on import would leave such a script running until SIGKILL,
        # a whole grace period doing nothing with it.
        p = self.start("import time, embody\nprint('ready', flush=True)\ntime.sleep(30)\n")
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=10)
        self.assertEqual(p.returncode, -signal.SIGTERM)
