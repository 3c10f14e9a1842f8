"""gg.launch.stop_processes: every process is told at once; one that ignores the signal is
killed once the shared deadline passes, and one already ended is left alone."""

from __future__ import annotations

import signal
import subprocess
import sys

from gg.launch import stop_process, stop_processes

# Says "ready" once its SIGTERM handling is in place, then sleeps.
OBEYS = "import time; print('ready', flush=True); time.sleep(60)"
IGNORES = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
           "print('ready', flush=True); time.sleep(60)")


def _started(code: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    return proc


def test_each_is_told_at_once_and_the_one_ignoring_it_is_killed_at_the_deadline():
    obeys, ignores, also_obeys = _started(OBEYS), _started(IGNORES), _started(OBEYS)
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    stop_processes([obeys, ignores, ended, also_obeys], signal.SIGTERM, timeout=1)
    assert obeys.returncode == also_obeys.returncode == -signal.SIGTERM
    assert ignores.returncode == -signal.SIGKILL
    assert ended.returncode == 0
    for proc in (obeys, ignores, also_obeys):
        assert proc.stdout is not None
        proc.stdout.close()


def test_stop_process_answers_the_exit_status_and_none_for_no_process():
    proc = _started(OBEYS)
    assert stop_process(proc, signal.SIGTERM) == -signal.SIGTERM
    assert proc.stdout is not None
    proc.stdout.close()
    assert stop_process(None) is None
