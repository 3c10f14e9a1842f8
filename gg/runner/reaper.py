"""The keeper of an ``isolation: none`` flight: its process group dies with the runner.

A flight with isolation none has no sandbox that dies with the runner (bubblewrap's
``--die-with-parent`` and PID namespace do that for sandboxed flights), so the runner starts
this small program as the flight's direct child instead, at the head of the flight's own
session and process group::

    runner ──> reaper (session and group leader) ──> the flight's command ──> its children

- The reaper asks the kernel for a parent-death signal (``PR_SET_PDEATHSIG``). When the
  runner dies, even by SIGKILL, the reaper kills its whole process group with SIGKILL: the
  command and every child it left in the group. The command itself carries a parent-death
  SIGKILL tied to the reaper, so it cannot outlive a reaper that was killed first.
- A graceful stop is the runner's SIGTERM to the group, then SIGKILL after its grace
  (:data:`gg.runner.flight.STOP_GRACE`). The reaper lets the command answer SIGTERM and
  waits for it; the group's SIGKILL ends them all.
- The reaper ends as its command ended: the same exit status, or the same signal.

What escapes: a process that leaves the group (``setsid``, a double fork into a new
session) is not killed by the reaper; only a sandbox's PID namespace contains those.

The parent-death signal fires when the *thread* that forked the reaper ends, so the runner
starts flights from one thread that lives as long as the runner process
(:class:`gg.runner.flight.Spawner`). This file uses the standard library only: the runner
runs it by path (``python -I -S reaper.py RUNNER_PID -- COMMAND...``), without gg on
``sys.path``.
"""

from __future__ import annotations

import ctypes
import os
import sys

# The signal module's C half: the same functions and numbers, without the enum classes the
# module builds on import (half of this program's start-up, paid by every flight).
import _signal as signal

PR_SET_PDEATHSIG = 1
PARENT_GONE = signal.SIGHUP  # what the kernel sends the reaper when the runner dies


def _pdeathsig(libc, sig: int) -> bool:
    return libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0


def _kill_group(*_args) -> None:
    os.killpg(0, signal.SIGKILL)  # the reaper is in the group: this is its own end too


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        print("usage: reaper.py RUNNER_PID -- COMMAND...", file=sys.stderr)
        return 127
    runner_pid, command = int(argv[1]), argv[3:]
    libc = ctypes.CDLL(None, use_errno=True)
    signal.signal(PARENT_GONE, _kill_group)
    signal.signal(signal.SIGTERM, lambda *_: None)  # the group got it too: wait for the command
    if not _pdeathsig(libc, PARENT_GONE):
        print("the parent-death signal cannot be set here", file=sys.stderr)
        return 127
    if os.getppid() != runner_pid:  # the runner died before the signal was armed
        _kill_group()
    reaper = os.getpid()
    pid = os.fork()
    if pid == 0:
        _pdeathsig(libc, signal.SIGKILL)
        if os.getppid() != reaper:
            os._exit(137)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(PARENT_GONE, signal.SIG_DFL)
        try:
            os.execvp(command[0], command)
        except OSError as exc:
            print(f"{command[0]}: {exc.strerror}", file=sys.stderr)
        os._exit(127)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):  # end by the same signal, so the runner reads the same status
        sig = os.WTERMSIG(status)
        try:
            signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError):
            pass  # SIGKILL and SIGSTOP cannot be caught anyway
        os.kill(os.getpid(), sig)
        return 128 + sig
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
