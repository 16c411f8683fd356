"""Process identity checks against real processes (runtime/core/process.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from runtime.core.process import is_gone, read_stat, session_members, wait_gone

# The main thread ends with pthread_exit while a second thread lives on: /proc then shows
# the leader's stat as `Z` although the process still runs and still holds its files.
_HEADLESS = textwrap.dedent(
    """
    import ctypes, os, sys, threading, time

    def worker():
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with open(f"/proc/{os.getpid()}/stat") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break
        print("leader gone", flush=True)
        sys.stdin.read()

    threading.Thread(target=worker).start()
    ctypes.CDLL(None).pthread_exit(None)
    """
)


def test_a_process_whose_leader_thread_ended_is_not_gone_until_its_last_thread_is() -> None:
    with subprocess.Popen(
        [sys.executable, "-c", _HEADLESS],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        start_new_session=True,
        text=True,
    ) as child:
        assert child.stdout is not None and child.stdin is not None
        try:
            assert child.stdout.readline() == "leader gone\n"
            stat = read_stat(child.pid)
            assert stat is not None and stat.state == "Z"
            assert not is_gone(child.pid)
            assert child.pid in session_members(child.pid)
            assert not wait_gone([child.pid], timeout=0.05)
            child.stdin.close()
            assert wait_gone([child.pid], timeout=30)
            assert child.pid not in session_members(child.pid)
        finally:
            child.kill()
