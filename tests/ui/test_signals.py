"""Ctrl-C during a turn (`sigint_cancels`): the first SIGINT cancels the token, the second
interrupts, and the handler never takes a lock — a SIGINT that lands while the main thread
holds the token's lock (as `on_cancel` and its unregister do, many times a round in print
mode) must not hang the process. Run in a subprocess, so a hang is a timeout, not a stuck
test run."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import os, signal
    from qshell.cancel import CancelToken
    from qshell.ui.signals import sigint_cancels

    cancel = CancelToken()
    with sigint_cancels(cancel):
        with cancel._lock:  # the main thread inside on_cancel or an unregister
            os.kill(os.getpid(), signal.SIGINT)  # handled right here, between bytecodes
            inside = cancel.cancelled
        assert cancel.wait(5), "never cancelled"
        try:
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):
                pass
            raise SystemExit("the second SIGINT did not interrupt")
        except KeyboardInterrupt:
            pass
    print("ok", inside)
    """
)


def test_a_sigint_while_the_main_thread_holds_the_tokens_lock_cancels_without_hanging():
    run = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=20)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["ok", "False"]  # cancelled once the lock was free
