"""Each process the launcher starts lives in a cgroup of its own, and its whole tree dies with
it: real processes, real cgroups (root, as CI runs), no server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from gg.runner import cgroups
from gg.runner.launching import LAUNCHER, WATCHDOG

from support import gone, wait_until

pytestmark = pytest.mark.skipif(cgroups.usable()[0] is None,
                                reason=f"no cgroup can be made here: {cgroups.usable()[1]}")

# A child in a session of its own (out of the process group), its pid on the first line.
ESCAPE = "setsid sh -c 'echo $$; exec sleep 600' & wait"


def _escaped(proc) -> int:
    return int(proc.stdout.readline())


def _kill_left(pid: int) -> None:
    if not gone(pid):
        os.kill(pid, signal.SIGKILL)


def test_the_capability_report_names_the_hierarchy_flights_are_put_in():
    kind, why = cgroups.usable()
    assert kind in (cgroups.V2, cgroups.FREEZER) and why is None


def test_a_launched_process_is_in_a_cgroup_of_its_own_and_its_setsid_child_too():
    proc = LAUNCHER.start(["sh", "-c", ESCAPE], env=None, cwd="/", stdout=subprocess.PIPE)
    child = _escaped(proc)
    try:
        mine = open("/proc/self/cgroup").read()
        theirs = open(f"/proc/{proc.pid}/cgroup").read()
        assert theirs != mine
        assert open(f"/proc/{child}/cgroup").read() == theirs
        assert os.getsid(child) == child  # it left the flight's session
    finally:
        proc.kill_tree()
        proc.wait(timeout=30)
        _kill_left(child)


def test_when_a_process_ends_what_left_its_group_is_killed_with_it(tmp_path):
    pidfile = tmp_path / "escaped"
    proc = LAUNCHER.start(  # it ends once its escaped child has started
        ["sh", "-c", f"setsid sh -c 'echo $$ > {pidfile}; exec sleep 600' & "
                     f"while [ ! -s {pidfile} ]; do sleep 0.01; done"],
        env=None, cwd="/")
    try:
        assert proc.wait(timeout=30) == 0
        child = int(pidfile.read_text())
        assert gone(child)  # dead before the runner heard the process ended
    finally:
        if pidfile.exists() and pidfile.read_text().strip():
            _kill_left(int(pidfile.read_text()))


def test_kill_tree_kills_a_setsid_child_deaf_to_sigterm():
    proc = LAUNCHER.start(["sh", "-c", "trap '' TERM; " + ESCAPE.replace("sh -c '", "sh -c 'trap \"\" TERM; ")],
                          env=None, cwd="/", stdout=subprocess.PIPE)
    child = _escaped(proc)
    try:
        proc.kill_tree()
        assert proc.wait(timeout=30) == -signal.SIGKILL
        wait_until(lambda: gone(child), timeout=10, what="the escaped child to be killed")
    finally:
        _kill_left(child)


def test_the_watchdog_kills_the_tree_at_its_deadline_by_itself_and_a_later_one_moves_it():
    proc = LAUNCHER.start(["sh", "-c", ESCAPE], env=None, cwd="/", stdout=subprocess.PIPE)
    child = _escaped(proc)
    try:
        proc.watch(time.monotonic() + 0.3)
        proc.watch(time.monotonic() + 600)  # a renewal moved it
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=1.0)
        proc.watch(time.monotonic() + 0.2)
        assert proc.wait(timeout=30) == -signal.SIGKILL
        assert proc.note == WATCHDOG
        wait_until(lambda: gone(child), timeout=10, what="the escaped child to be killed")
    finally:
        _kill_left(child)


def test_a_nested_pid_namespace_dies_with_its_flight(tmp_path):
    if subprocess.run(["unshare", "--pid", "--fork", "true"], capture_output=True).returncode:
        pytest.skip("no pid namespace can be made here")
    pidfile = tmp_path / "inner"
    proc = LAUNCHER.start(
        ["sh", "-c", f"unshare --pid --fork sh -c 'sleep 600' & echo $! > {pidfile}; wait"],
        env=None, cwd="/")
    outer = int(wait_until(lambda: pidfile.exists() and pidfile.read_text().strip(),
                           what="the namespace to start"))
    try:
        proc.kill_tree()
        assert proc.wait(timeout=30) == -signal.SIGKILL
        wait_until(lambda: gone(outer), timeout=10, what="the namespace's processes to be gone")
    finally:
        _kill_left(outer)


def test_no_cgroup_is_left_behind_once_its_process_ended():
    proc = LAUNCHER.start(["true"], env=None, cwd="/")
    assert proc.wait(timeout=30) == 0
    base = [h for h in cgroups.hierarchies()
            if os.path.isdir(os.path.join(h.own, "gg", str(os.getpid())))]
    for hierarchy in base:
        root = os.path.join(hierarchy.own, "gg", str(os.getpid()))
        wait_until(lambda: not any(d.isdigit() for launcher in os.listdir(root)
                                   if os.path.isdir(os.path.join(root, launcher))
                                   for d in os.listdir(os.path.join(root, launcher))),
                   timeout=10, what="the process's cgroup to be removed")
    assert sys.platform.startswith("linux")
