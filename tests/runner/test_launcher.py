"""The runner's launcher, which forks every flight's process: real processes, real signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import pytest

from gg.runner.launching import LAUNCHER, LAUNCHER_DIED, SPAWNER, Launcher

from support import gone, wait_until

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the parent-death signal is Linux's")


def _run(argv: list[str], env: dict | None = None) -> tuple[int, bytes]:
    proc = LAUNCHER.start(argv, env=env, cwd="/", stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT)
    out = proc.stdout.read()
    return proc.wait(timeout=30), out


def _kill_left(pids: list[int]) -> None:
    for pid in pids:  # left behind only if a promise is broken: do not leak them
        if not gone(pid):
            os.kill(pid, signal.SIGKILL)


def test_a_launched_process_ends_as_its_command_ended():
    assert _run(["sh", "-c", "echo out; echo err >&2; exit 3"]) == (3, b"out\nerr\n")
    assert _run(["sh", "-c", "kill -TERM $$"])[0] == -signal.SIGTERM
    assert _run(["sh", "-c", "kill -KILL $$"])[0] == -signal.SIGKILL
    assert _run(["no-such-command-here"]) == (127, b"no-such-command-here: No such file or "
                                                     b"directory\n")


def test_a_launched_process_leads_its_own_session_in_its_cwd_with_its_env(tmp_path):
    proc = LAUNCHER.start(["sh", "-c", "echo $$ $WHO; pwd; exec sleep 600"],
                          env={"PATH": os.environ["PATH"], "WHO": "me"}, cwd=tmp_path,
                          stdout=subprocess.PIPE)
    try:
        pid, who = proc.stdout.readline().split()
        assert (int(pid), who) == (proc.pid, b"me")
        assert proc.stdout.readline().decode().strip() == str(tmp_path)
        assert os.getsid(proc.pid) == proc.pid and os.getpgid(proc.pid) == proc.pid
        assert proc.poll() is None
    finally:
        proc.kill()
    assert proc.wait(timeout=30) == -signal.SIGKILL


def test_the_signals_python_changes_are_restored_before_exec():
    """Python ignores SIGPIPE and SIGXFSZ; a flight must not inherit that (``yes | head``
    must end). (glibc's spawn leaves its own two internal real-time signals, 32 and 33,
    ignored; the C library a program starts with sets them as it needs them.)"""
    code, out = _run(["sh", "-c", "grep SigIgn /proc/self/status; yes | head -1"])
    assert code == 0
    label, ignored, said = out.split()
    assert (label, said) == (b"SigIgn:", b"y")
    assert int(ignored, 16) & 0x7FFFFFFF == 0  # none of the standard signals, 1 to 31 (bits 0-30)


def test_a_launched_process_holds_its_three_descriptors_and_never_the_launchers_socket():
    """The launcher's socket starts processes outside any sandbox: a flight that held it
    could ask for one. The child closes every descriptor past stderr before exec."""
    code, out = _run(["sh", "-c", "exec ls -l /proc/self/fd"])
    assert code == 0, out
    held = {line.split()[-3] for line in out.decode().splitlines() if "->" in line}
    assert held <= {"0", "1", "2", "3"}, out  # 3: the listing's own look at /proc/self/fd
    assert b"socket:" not in out, out  # stdout and stderr here are a pipe, stdin /dev/null


def test_a_large_environment_arrives_whole():
    env = {"PATH": os.environ["PATH"], **{f"BIG{i}": str(i) * 100_000 for i in range(4)}}
    assert _run(["sh", "-c", "echo ${#BIG0} ${#BIG3}"], env) == (0, b"100000 100000\n")


def test_sigterm_to_the_group_reaches_the_command_and_the_handle_waits_for_it(tmp_path):
    done = tmp_path / "done"
    proc = LAUNCHER.start(["sh", "-c", f"trap 'echo bye > {done}; exit 7' TERM; "
                                       "echo up; while :; do sleep 0.05; done"],
                          env=None, cwd=tmp_path, stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"up\n"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 7  # the command's own answer
        assert done.read_text() == "bye\n"
        proc.send_signal(signal.SIGKILL)  # reaped: never sent to a pid that may be reused
    finally:
        if proc.poll() is None:
            proc.kill()


def test_flights_are_forked_by_one_launcher_without_a_python_of_their_own():
    """A flight's process is the launcher's child, exec'd straight into its command: no
    Python starts per flight, and every flight of the runner shares the one launcher."""
    procs = [LAUNCHER.start(["sleep", "600"], env=None, cwd="/") for _ in range(3)]
    try:
        launcher = LAUNCHER.pid()
        for proc in procs:
            assert psutil.Process(proc.pid).ppid() == launcher
            wait_until(lambda: psutil.Process(proc.pid).cmdline() == ["sleep", "600"],
                       what="the forked child to exec its command")
        assert psutil.Process(launcher).ppid() == os.getpid()
    finally:
        for proc in procs:
            proc.kill()
    assert [proc.wait(timeout=30) for proc in procs] == [-signal.SIGKILL] * 3


def test_many_concurrent_starts_each_get_their_own_exit_status():
    def one(n: int) -> int:
        return LAUNCHER.start(["sh", "-c", f"exit {n}"], env=None, cwd="/").wait(timeout=60)

    with ThreadPoolExecutor(16) as pool:
        assert list(pool.map(one, range(100))) == list(range(100))


def test_a_flight_outlives_the_thread_that_started_it_and_its_launcher():
    """The parent-death signals follow the thread that forked: the launcher is started from
    the spawner's thread, which lives as long as the runner, not from the flight's own."""
    launcher = Launcher(SPAWNER)  # a fresh one, started by the asking thread's first call
    box: dict = {}
    read, write = os.pipe()

    def start_and_leave():
        box["proc"] = launcher.start(["cat"], env=None, cwd="/", stdin=read,
                                     stdout=subprocess.PIPE)

    asking = threading.Thread(target=start_and_leave)
    asking.start()
    asking.join(timeout=30)
    os.close(read)
    proc = box["proc"]
    try:
        wait_until(lambda: not Path(f"/proc/self/task/{asking.native_id}").exists(),
                   what="the asking thread to be gone")
        os.write(write, b"ping\n")
        assert proc.stdout.readline() == b"ping\n"  # still there, and its launcher too
        os.close(write)
        assert proc.wait(timeout=30) == 0  # a parent-death signal would have made it -9
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_killed_launcher_takes_its_children_and_the_next_start_gets_a_new_one(tmp_path):
    launcher = Launcher(SPAWNER)
    pids = tmp_path / "pids"
    proc = launcher.start(["sh", "-c", f"sleep 600 & echo $! > {pids}.tmp; "
                                       f"mv {pids}.tmp {pids}; wait"], env=None, cwd=tmp_path)
    first = launcher.pid()
    wait_until(pids.exists, what="the command to start")
    found = [proc.pid, int(pids.read_text())]
    try:
        os.kill(first, signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
        assert proc.note == LAUNCHER_DIED
        wait_until(lambda: all(gone(pid) for pid in found), timeout=10,
                   what="the command and its child to be gone")
    finally:
        _kill_left(found)
    again = launcher.start(["sh", "-c", "exit 4"], env=None, cwd="/")
    assert again.wait(timeout=30) == 4
    assert launcher.pid() not in (None, first)


def test_the_launcher_kills_every_group_when_its_runner_is_killed(tmp_path):
    """A stand-in for the runner process (the same runner-side code, in a process of its
    own): SIGKILLed, every process group its launcher started is gone, children included."""
    pids = tmp_path / "pids"
    parent = subprocess.Popen([sys.executable, "-c", (
        "import signal, sys\n"
        "from gg.runner.launching import LAUNCHER\n"
        "for n in range(3):\n"
        f"    LAUNCHER.start(['sh', '-c', 'sleep 600 & echo $! $$ > {pids}' + str(n) + '.tmp; "
        f"mv {pids}' + str(n) + '.tmp {pids}' + str(n) + '; wait'], env=None, cwd='/')\n"
        "print(LAUNCHER.pid(), flush=True)\n"
        "signal.pause()\n")], stdout=subprocess.PIPE)
    found: list[int] = []
    try:
        launcher = int(parent.stdout.readline())
        files = [Path(f"{pids}{n}") for n in range(3)]
        wait_until(lambda: all(f.exists() for f in files), what="the commands to start")
        found = [launcher] + [int(p) for f in files for p in f.read_text().split()]
        assert len(found) == 7 and not any(gone(pid) for pid in found)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        wait_until(lambda: all(gone(pid) for pid in found), timeout=10,
                   what="the launcher, the commands and their children to be gone")
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        _kill_left(found)


def test_sigterm_to_the_launcher_leaves_it_and_its_flights_running():
    """A service manager's stop signals every process: the flights get their grace from
    the runner, so the launcher does not end them early by dying of SIGTERM itself."""
    proc = LAUNCHER.start(["sleep", "600"], env=None, cwd="/")
    try:
        launcher = LAUNCHER.pid()
        os.kill(launcher, signal.SIGTERM)
        os.kill(launcher, signal.SIGINT)
        again = LAUNCHER.start(["sh", "-c", "exit 5"], env=None, cwd="/")
        assert again.wait(timeout=30) == 5
        assert LAUNCHER.pid() == launcher and proc.poll() is None
    finally:
        proc.kill()
    assert proc.wait(timeout=30) == -signal.SIGKILL


def test_a_stop_sent_the_moment_a_process_is_started_is_never_lost():
    """The launcher answers a start as soon as it has forked, before the child has made its
    own process group or put its signal handlers back: a SIGTERM or SIGKILL sent in that
    moment (a flight cancelled at once) still ends the process, as the signal it was."""
    def started_and_stopped_at_once(n: int):
        sig = signal.SIGKILL if n % 2 else signal.SIGTERM
        proc = LAUNCHER.start(["sleep", "600"], env=None, cwd="/")
        proc.send_signal(sig)
        try:
            return proc.wait(timeout=30) == -sig
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)  # the stop was lost: do not leave it behind
            proc.wait(timeout=30)
            return False

    with ThreadPoolExecutor(16) as pool:
        ended = list(pool.map(started_and_stopped_at_once, range(2000)))
    assert ended.count(False) == 0


def test_a_command_is_found_on_the_flights_own_path_and_a_missing_one_says_so(tmp_path):
    """The launcher looks a command up on the PATH the flight is given, not its own (as
    execvpe does); one that cannot start says why on the flight's stderr and exits 127."""
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "gg-only-here").write_text("#!/bin/sh\necho found in \"$PWD\"\n")
    (tools / "gg-only-here").chmod(0o755)
    (tools / "gg-not-runnable").write_text("no\n")
    env = {"PATH": f"/usr/bin:/bin:{tools}"}
    proc = LAUNCHER.start(["gg-only-here"], env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT)
    assert proc.stdout.read() == f"found in {tmp_path}\n".encode()
    assert proc.wait(timeout=30) == 0
    assert _run(["gg-only-here"]) == (127, b"gg-only-here: No such file or directory\n")
    assert _run([str(tools / "gg-not-runnable")]) == (
        127, f"{tools / 'gg-not-runnable'}: Permission denied\n".encode())
    proc = LAUNCHER.start(["true"], env=env, cwd=tmp_path / "gone", stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT)
    assert proc.stdout.read() == b"true: No such file or directory\n"
    assert proc.wait(timeout=30) == 127


def test_what_is_handed_is_read_on_fd_3_and_never_in_the_environment_or_argv():
    """A sandbox's command environment goes to bwrap on fd 3 (its --args), not in the
    environment bwrap itself runs with, nor on any command line."""
    handed = b"SECRET=handed-value\0" * 5000  # past a pipe's 64 KiB: it must not block
    script = 'wc -c <&3; echo "[$SECRET]"; tr "\\0" "\\n" < /proc/$$/cmdline'
    proc = LAUNCHER.start(["sh", "-c", script],
                          env={"PATH": os.environ["PATH"]}, cwd="/", stdout=subprocess.PIPE,
                          handed=handed)
    out = proc.stdout.read().decode()
    assert proc.wait(timeout=30) == 0
    lines = out.split()
    assert lines[0] == str(len(handed)) and lines[1] == "[]"
    assert "handed-value" not in out


def test_a_start_without_anything_handed_has_no_fd_3():
    code, out = _run(["sh", "-c", "test -e /proc/self/fd/3 && echo open || echo closed"])
    assert code == 0 and out.strip() == b"closed"


def test_a_child_past_its_kill_deadline_gets_its_cleanup_run_by_the_launcher(tmp_path):
    """The watchdog kills the child's tree, and then runs its cleanup (a container's
    ``ENGINE rm --force NAME``: the container is outside that tree), whatever the runner is
    doing; here the cleanup leaves a marker. A child that ends on its own gets none."""
    env = {"PATH": os.environ["PATH"]}
    marker, quiet = tmp_path / "cleaned", tmp_path / "not-cleaned"
    proc = LAUNCHER.start(["sleep", "600"], env=env, cwd=tmp_path,
                          cleanup=["sh", "-c", f"echo $PATH > {marker}"])
    ended = LAUNCHER.start(["true"], env=env, cwd=tmp_path,
                           cleanup=["sh", "-c", f"echo > {quiet}"])
    try:
        assert ended.wait(timeout=30) == 0
        proc.watch(time.monotonic())  # its deadline: now
        assert proc.wait(timeout=30) == -signal.SIGKILL
        wait_until(marker.exists, timeout=10, what="the launcher to run the cleanup")
        assert marker.read_text() == os.environ["PATH"] + "\n"  # with the child's environment
        ended.watch(time.monotonic())  # reaped already: nothing to kill, nothing to clean
        _run(["true"])  # a round trip after it: the launcher has read the deadline
        assert not quiet.exists()
    finally:
        proc.kill()


def test_the_launcher_runs_its_childrens_cleanups_when_its_runner_is_killed(tmp_path):
    marker = tmp_path / "cleaned"
    parent = subprocess.Popen([sys.executable, "-c", (
        "import signal\n"
        "from gg.runner.launching import LAUNCHER\n"
        f"LAUNCHER.start(['sleep', '600'], env=None, cwd='/', "
        f"cleanup=['sh', '-c', 'echo > {marker}'])\n"
        "print(LAUNCHER.pid(), flush=True)\n"
        "signal.pause()\n")], stdout=subprocess.PIPE)
    try:
        launcher = int(parent.stdout.readline())
        assert not marker.exists()
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        wait_until(lambda: gone(launcher) and marker.exists(), timeout=10,
                   what="the launcher to run the cleanup and exit")
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
