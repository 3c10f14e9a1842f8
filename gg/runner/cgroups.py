"""Per-flight cgroups: every process the launcher starts lives in a cgroup of its own.

A process group holds a flight's process and what it forks, but not what leaves it: a
``setsid`` child, a double fork into a new session, a nested PID namespace. A cgroup holds
them all (a process cannot leave its cgroup without write access to another), so stopping a
flight kills its whole tree: on its timeout, its cancel, its runner's retirement, its lease
running out here, and when its own process ends (nothing of a flight outlives it).

Where: the launcher (:mod:`gg.runner.launcher`) makes ``gg/<runner pid>/<launcher pid>/<n>``
under its own cgroup in the first hierarchy that works of

1. cgroup v2 (the unified mount, ``/sys/fs/cgroup`` or ``/sys/fs/cgroup/unified`` on a hybrid
   host): killed with ``cgroup.kill`` (Linux 5.14), else frozen with ``cgroup.freeze``,
   SIGKILLed pid by pid and thawed;
2. the v1 ``freezer`` hierarchy: frozen (``freezer.state``), SIGKILLed pid by pid, thawed;

and puts the process there before it runs a single instruction of the flight's (the
launcher, single-threaded, joins the cgroup, starts the process, and goes back). A kill
repeats until ``cgroup.procs`` is empty, then removes the directory. Memory and CPU limits
belong in the same directories (another controller's files beside these).

When no cgroup can be made (a runner without root and without a delegated subtree, no
cgroup file system), :func:`find` says why, the capability report's ``flight_cgroups`` is
None with ``flight_cgroups_error``, and a flight is stopped by its process group, as before:
what left the group escapes (docs/isolation.md, "The launcher").

The standard library only: the launcher loads this file by path (it runs without gg on
``sys.path``).
"""

from __future__ import annotations

import os
import signal
import time

V2, FREEZER = "cgroup2", "freezer"
KILL_WITHIN = 5.0  # seconds a kill keeps at it before it leaves a cgroup it cannot empty


class Hierarchy:
    """One cgroup hierarchy gg can put flights in: its ``kind`` and this process's own
    directory in it (new cgroups go under it, and the launcher goes back to it)."""

    def __init__(self, kind: str, own: str) -> None:
        self.kind = kind
        self.own = own

    def __repr__(self) -> str:
        return f"Hierarchy({self.kind!r}, {self.own!r})"


def _read(path: str) -> str:
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return ""


def _unescape(text: str) -> str:
    return text.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n") \
        .replace("\\134", "\\")


def hierarchies(mountinfo: str | None = None, own_cgroups: str | None = None) -> list[Hierarchy]:
    """The hierarchies to try, in order: v2, then the v1 freezer."""
    mountinfo = _read("/proc/self/mountinfo") if mountinfo is None else mountinfo
    own_cgroups = _read("/proc/self/cgroup") if own_cgroups is None else own_cgroups
    paths: dict[str, str] = {}
    for line in own_cgroups.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            paths[parts[1]] = parts[2]
    found: dict[str, Hierarchy] = {}
    for line in mountinfo.splitlines():
        before, sep, after = line.partition(" - ")
        if not sep:
            continue
        fields = before.split()
        root, mount_point = _unescape(fields[3]), _unescape(fields[4])
        fstype, _, options = (after.split() + ["", "", ""])[:3]
        if fstype == "cgroup2" and V2 not in found and "" in paths:
            found[V2] = Hierarchy(V2, _own(mount_point, root, paths[""]))
        elif fstype == "cgroup" and FREEZER not in found and FREEZER in options.split(","):
            key = next((k for k in paths if FREEZER in k.split(",")), None)
            if key is not None:
                found[FREEZER] = Hierarchy(FREEZER, _own(mount_point, root, paths[key]))
    return [found[k] for k in (V2, FREEZER) if k in found]


def _own(mount_point: str, root: str, path: str) -> str:
    """This process's directory: its cgroup path, seen from where the mount's root is."""
    if root != "/" and (path == root or path.startswith(root.rstrip("/") + "/")):
        path = path[len(root.rstrip("/")):] or "/"
    return os.path.join(mount_point, path.lstrip("/")).rstrip("/")


def find(name: str) -> tuple[Hierarchy | None, str | None, str | None]:
    """(hierarchy, the directory ``gg/<name>`` made in it, None), or (None, None, why not)."""
    why = "no cgroup hierarchy is mounted (v2, or the v1 freezer)"
    for hierarchy in hierarchies():
        base = os.path.join(hierarchy.own, "gg", name)
        try:
            os.makedirs(base, exist_ok=True)
            probe = os.path.join(base, "probe")
            os.mkdir(probe)
            os.rmdir(probe)
            return hierarchy, base, None
        except OSError as exc:
            why = f"cannot make a cgroup under {hierarchy.own}: {exc.strerror}"
    return None, None, why


def usable() -> tuple[str | None, str | None]:
    """(the kind of cgroup flights get here, None), or (None, why none): the capability
    report's ``flight_cgroups`` and ``flight_cgroups_error``."""
    hierarchy, base, why = find(f"probe-{os.getpid()}")
    if hierarchy is None or base is None:  # found, it names both
        return None, why
    remove(base)
    return hierarchy.kind, None


def make(base: str, name: str) -> str:
    """A new cgroup ``name`` under ``base``; OSError when it cannot be made."""
    path = os.path.join(base, name)
    os.mkdir(path)
    return path


def join(path: str, pid: int = 0) -> None:
    """Move ``pid`` (0: the caller) into the cgroup ``path``."""
    with open(os.path.join(path, "cgroup.procs"), "w") as fh:
        fh.write(str(pid or os.getpid()))


def pids(path: str) -> list[int]:
    """Every process in ``path`` and the cgroups under it."""
    found: list[int] = []
    for folder, _dirs, _files in os.walk(path):
        found.extend(int(p) for p in _read(os.path.join(folder, "cgroup.procs")).split())
    return found


def kill(hierarchy: Hierarchy, path: str, within: float = KILL_WITHIN) -> bool:
    """SIGKILL every process in ``path`` (and below), then remove it; True when it is gone.

    Frozen first (no process forks while its siblings are killed), or killed at once by
    ``cgroup.kill``; a process in the middle of a system call may take a moment to go, so
    this looks again until the cgroup is empty or ``within`` seconds passed."""
    if not os.path.isdir(path):
        return True
    deadline = time.monotonic() + within
    while True:
        left = pids(path)
        if not left:
            break
        if hierarchy.kind == V2 and os.path.exists(os.path.join(path, "cgroup.kill")):
            _write(os.path.join(path, "cgroup.kill"), "1")
        else:
            _freeze(hierarchy, path, True)
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            _freeze(hierarchy, path, False)  # a frozen process dies only once it thaws
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.005)
    return remove(path)


def remove(path: str) -> bool:
    """Remove the empty cgroup ``path`` and the cgroups under it; True when it is gone."""
    for folder, _dirs, _files in os.walk(path, topdown=False):
        try:
            os.rmdir(folder)
        except FileNotFoundError:
            pass
        except OSError:
            return False
    return True


def _freeze(hierarchy: Hierarchy, path: str, frozen: bool) -> None:
    if hierarchy.kind == V2:
        _write(os.path.join(path, "cgroup.freeze"), "1" if frozen else "0")
    else:
        _write(os.path.join(path, "freezer.state"), "FROZEN" if frozen else "THAWED")


def _write(path: str, text: str) -> None:
    try:
        with open(path, "w") as fh:
            fh.write(text)
    except OSError:
        pass
