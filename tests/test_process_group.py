"""The bounded runner of the vLLM end-to-end tests (tests/process_group.py): a command
past its time is ended with everything it started, and so is what a command that
finished left running."""

from __future__ import annotations

import sys
import time

from process_group import group_alive, process_status, run_in_group

# starts a child that would sleep for ten minutes, says its pid, then runs ARGV[1]
PARENT = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print("child", child.pid, flush=True)
if sys.argv[1] == "hang":
    time.sleep(600)
sys.exit(int(sys.argv[1]))
"""


def _child_pid(output: str) -> int:
    return int(output.split("child ", 1)[1].split()[0])


def _gone(pid: int) -> bool:
    status = process_status(pid)
    return status is None or status[0] == "Z"


def test_a_command_past_its_time_is_ended_with_its_children() -> None:
    t0 = time.monotonic()
    rc, output = run_in_group([sys.executable, "-c", PARENT, "hang"], timeout=3, term_grace=2)
    assert rc is None and time.monotonic() - t0 < 30
    assert _gone(_child_pid(output))


def test_what_a_finished_command_left_running_is_ended() -> None:
    rc, output = run_in_group([sys.executable, "-c", PARENT, "3"], timeout=60, term_grace=2)
    assert rc == 3                                  # its own status, its output kept
    child = _child_pid(output)
    assert _gone(child)
    assert not group_alive(child)
