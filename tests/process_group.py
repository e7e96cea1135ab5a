"""Run a command as its own process group, bounded: the group (the command and whatever
it starts, e.g. vLLM's server and engine processes) is ended whatever happens, and its
output goes to a file, not a pipe, so nothing it leaves behind can hold the caller."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence


def run_in_group(argv: Sequence[str], timeout: float, *, term_grace: float = 30) -> tuple[int | None, str]:
    """``(exit status, output)`` of ``argv``; the status is None where it outlived
    ``timeout`` seconds.  Its process group is ended afterwards in every case (`kill_group`)."""
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(list(argv), stdout=log, stderr=log, start_new_session=True)
        try:
            rc: int | None = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            rc = None
        finally:
            kill_group(proc, term_grace=term_grace)
        log.seek(0)
        return rc, log.read().decode(errors="replace")


def kill_group(proc: subprocess.Popen, *, term_grace: float = 30) -> None:
    """End ``proc``'s process group: SIGTERM (vLLM shuts its engine down on it), then
    SIGKILL after ``term_grace`` seconds; reaps ``proc``."""
    for sig, grace in ((signal.SIGTERM, term_grace), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break                           # (the whole group is gone)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and group_alive(proc.pid):
            proc.poll()
            time.sleep(0.1)
        if not group_alive(proc.pid):
            break
    proc.wait()


def group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` still runs (zombies, which only wait to be
    reaped by their parent, do not count)."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            status = process_status(int(entry))
            if status is not None and status[1] == pgid and status[0] != "Z":
                return True
    return False


def process_status(pid: int) -> tuple[str, int] | None:
    """``(state letter, process group)`` of process ``pid`` from ``/proc``; None if there is none."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(b")") + 2:].split()     # (after the command name, which may hold spaces)
    return fields[0].decode(), int(fields[2])
