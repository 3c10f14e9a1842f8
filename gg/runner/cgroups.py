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
repeats until ``cgroup.procs`` is empty, then removes the directory.

Resource limits (``gg fly --cpus --memory --pids``, gg.domain.limits) and the usage every
flight reports (peak memory, CPU seconds) take the ``memory``, ``cpu``, ``cpuacct`` and
``pids`` controllers, each where the host has it (:func:`limit_hierarchies`): in the v2
hierarchy when its ``cgroup.controllers`` lists it (enabled down the launcher's subtree with
``cgroup.subtree_control``), else in its own v1 hierarchy (a hybrid host: v2 mounted at
``/sys/fs/cgroup/unified`` with no controllers, ``memory``, ``cpu``... mounted as v1). A
flight then also lives in ``gg/<runner pid>/<launcher pid>/<n>`` of each v1 hierarchy used;
those directories are emptied and removed with the rest when it ends. A limit's controller
the host does not have is reported by :func:`limits_usable` (the capability report's
``flight_limits``), and a start that asks for it is refused.

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
    """A cgroup file's text ("" where it cannot be read): one open and read, without a
    buffered text file around them (each flight's usage reads three)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        chunks = []
        while chunk := os.read(fd, 65_536):
            chunks.append(chunk)
        return b"".join(chunks).decode()
    except OSError:
        return ""
    finally:
        os.close(fd)


def _unescape(text: str) -> str:
    return text.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n") \
        .replace("\\134", "\\")


def _own_paths(own_cgroups: str) -> dict[str, str]:
    """``/proc/self/cgroup`` read: controller list ("" for v2) -> this process's cgroup."""
    paths: dict[str, str] = {}
    for line in own_cgroups.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            paths[parts[1]] = parts[2]
    return paths


def _cgroup_mounts(mountinfo: str):
    """Each mount of ``/proc/self/mountinfo`` as (fstype, options, mount point, root)."""
    for line in mountinfo.splitlines():
        before, sep, after = line.partition(" - ")
        if not sep:
            continue
        fields = before.split()
        root, mount_point = _unescape(fields[3]), _unescape(fields[4])
        fstype, _, options = (after.split() + ["", "", ""])[:3]
        yield fstype, options, mount_point, root


def hierarchies(mountinfo: str | None = None, own_cgroups: str | None = None) -> list[Hierarchy]:
    """The hierarchies to try, in order: v2, then the v1 freezer."""
    mountinfo = _read("/proc/self/mountinfo") if mountinfo is None else mountinfo
    own_cgroups = _read("/proc/self/cgroup") if own_cgroups is None else own_cgroups
    paths = _own_paths(own_cgroups)
    found: dict[str, Hierarchy] = {}
    for fstype, options, mount_point, root in _cgroup_mounts(mountinfo):
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
    fd = os.open(os.path.join(path, "cgroup.procs"), os.O_WRONLY | os.O_CLOEXEC)
    try:  # a plain write: the launcher joins and leaves a cgroup twice a flight
        os.write(fd, str(pid or os.getpid()).encode())
    finally:
        os.close(fd)


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


# -- resource limits and usage ------------------------------------------------------------

LIMIT_CONTROLLERS = ("memory", "cpu", "cpuacct", "pids")
CPU_PERIOD = 100_000  # microseconds: a quota of cpus * this per period


def limit_hierarchies(mountinfo: str | None = None,
                      own_cgroups: str | None = None) -> dict[str, Hierarchy]:
    """controller -> where this process may use it: the v2 hierarchy (kind ``cgroup2``) when
    its own cgroup lists the controller, else the v1 hierarchy it is mounted in (kind
    ``v1``). A controller in neither is left out."""
    mountinfo = _read("/proc/self/mountinfo") if mountinfo is None else mountinfo
    own_cgroups = _read("/proc/self/cgroup") if own_cgroups is None else own_cgroups
    paths = _own_paths(own_cgroups)
    found: dict[str, Hierarchy] = {}
    v1: dict[str, Hierarchy] = {}
    for fstype, options, mount_point, root in _cgroup_mounts(mountinfo):
        if fstype == "cgroup2" and "" in paths:
            own = _own(mount_point, root, paths[""])
            for name in _read(os.path.join(own, "cgroup.controllers")).split():
                if name in LIMIT_CONTROLLERS and name not in found:
                    found[name] = Hierarchy(V2, own)
        elif fstype == "cgroup":
            names = [o for o in options.split(",") if o in LIMIT_CONTROLLERS]
            key = next((k for k in paths if names and set(names) <= set(k.split(","))), None)
            if key is not None:
                hierarchy = Hierarchy("v1", _own(mount_point, root, paths[key]))
                for name in names:
                    v1.setdefault(name, hierarchy)
    if "cpu" in found:  # v2 counts cpu time in cpu.stat of every cgroup: no cpuacct there
        found.setdefault("cpuacct", found["cpu"])
    for name, hierarchy in v1.items():
        found.setdefault(name, hierarchy)
    return found


def enable(hierarchy: Hierarchy, base: str, controllers: list[str]) -> list[str]:
    """Enable v2 ``controllers`` for the cgroups made under ``base`` (each level from this
    process's own cgroup down); the ones that could be enabled."""
    levels, path = [], base
    while path.startswith(hierarchy.own) and path != hierarchy.own:
        levels.append(path)
        path = os.path.dirname(path)
    levels.append(hierarchy.own)
    done = []
    for name in controllers:
        try:
            for level in reversed(levels):
                with open(os.path.join(level, "cgroup.subtree_control"), "w") as fh:
                    fh.write(f"+{name}")
        except OSError:
            continue
        done.append(name)
    return done


def limit_bases(name: str, main: Hierarchy | None = None,
                main_base: str | None = None) -> dict[str, tuple[Hierarchy, str]]:
    """controller -> (hierarchy, the directory ``gg/<name>`` made in it): where a flight's
    limits go. A v2 controller uses ``main_base`` (the flights' own cgroups, in ``main``)
    when the controller can be enabled there; a v1 one gets a directory of its own."""
    out: dict[str, tuple[Hierarchy, str]] = {}
    v2_wanted: list[str] = []
    made: dict[str, str] = {}
    v2_main = main is not None and main.kind == V2 and main_base is not None
    for controller, hierarchy in limit_hierarchies().items():
        if controller == "cpuacct" and v2_main:
            continue  # counted in the v2 cgroup's cpu.stat (below)
        if hierarchy.kind == V2:
            if main is not None and main.kind == V2 and main_base is not None \
                    and main.own == hierarchy.own:
                v2_wanted.append(controller)
            continue
        base = made.get(hierarchy.own)
        if base is None:
            try:
                base = os.path.join(hierarchy.own, "gg", name)
                os.makedirs(base, exist_ok=True)
            except OSError:
                continue
            made[hierarchy.own] = base
        out[controller] = (hierarchy, base)
    if v2_wanted and main is not None and main_base is not None:
        wanted = [c for c in v2_wanted if c != "cpuacct"]
        for controller in enable(main, main_base, wanted):
            out[controller] = (main, main_base)
    if v2_main and main is not None and main_base is not None:
        out["cpuacct"] = (main, main_base)  # cpu.stat counts usage in every v2 cgroup
    return out


def limits_usable() -> dict[str, str]:
    """controller -> ``v1`` or ``v2`` for each limit controller a flight can get here (the
    capability report's ``flight_limits``)."""
    name = f"probe-{os.getpid()}"
    main, main_base, _ = find(name)
    bases = limit_bases(name, main, main_base)
    usable: dict[str, str] = {}
    for controller, (hierarchy, base) in bases.items():
        probe = os.path.join(base, "probe")
        try:
            if hierarchy.kind != V2:
                os.mkdir(probe)
                os.rmdir(probe)
            usable[controller] = "v2" if hierarchy.kind == V2 else "v1"
        except OSError:
            pass
    for _controller, (_hierarchy, base) in bases.items():
        remove(base)
    if main_base is not None:
        remove(main_base)
    return usable


def set_limits(limit_dirs: dict[str, str], kinds: dict[str, str], limits: dict) -> None:
    """Write ``limits`` (cpus, memory in bytes, pids) into a flight's cgroups: ``limit_dirs``
    controller -> its directory, ``kinds`` controller -> ``v1``/``v2``. OSError when one
    cannot be written."""
    memory, cpus, pids = limits.get("memory"), limits.get("cpus"), limits.get("pids")
    if memory is not None:
        path = limit_dirs["memory"]
        if kinds["memory"] == "v2":
            _write_strict(os.path.join(path, "memory.max"), str(int(memory)))
            _write(os.path.join(path, "memory.swap.max"), "0")
        else:
            _write_strict(os.path.join(path, "memory.limit_in_bytes"), str(int(memory)))
            _write(os.path.join(path, "memory.memsw.limit_in_bytes"), str(int(memory)))
    if pids is not None:
        _write_strict(os.path.join(limit_dirs["pids"], "pids.max"), str(int(pids)))
    if cpus is not None:
        path = limit_dirs["cpu"]
        quota = max(1000, int(float(cpus) * CPU_PERIOD))
        if kinds["cpu"] == "v2":
            _write_strict(os.path.join(path, "cpu.max"), f"{quota} {CPU_PERIOD}")
        else:
            _write_strict(os.path.join(path, "cpu.cfs_period_us"), str(CPU_PERIOD))
            _write_strict(os.path.join(path, "cpu.cfs_quota_us"), str(quota))


def usage(limit_dirs: dict[str, str], kinds: dict[str, str]) -> dict:
    """What a flight's cgroups counted: ``peak_memory`` (bytes), ``cpu_seconds`` and
    ``oom_kills`` (processes the kernel killed over its memory limit), each when known."""
    out: dict = {}
    memory = limit_dirs.get("memory")
    if memory is not None:
        if kinds["memory"] == "v2":
            peak = _read(os.path.join(memory, "memory.peak")).strip()
            events = _read(os.path.join(memory, "memory.events"))
        else:
            peak = _read(os.path.join(memory, "memory.max_usage_in_bytes")).strip()
            events = _read(os.path.join(memory, "memory.oom_control"))
        if peak.isdigit():
            out["peak_memory"] = int(peak)
        for line in events.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                out["oom_kills"] = int(value)
        if "oom_kills" not in out and kinds["memory"] == "v1":
            failed = _read(os.path.join(memory, "memory.failcnt")).strip()
            under = "under_oom 1" in events
            if under and failed.isdigit() and int(failed) > 0:
                out["oom_kills"] = 1  # an older kernel: no count, but it is out of memory
    acct = limit_dirs.get("cpuacct")
    if acct is not None:
        if kinds["cpuacct"] == "v2":
            for line in _read(os.path.join(acct, "cpu.stat")).splitlines():
                key, _, value = line.partition(" ")
                if key == "usage_usec" and value.strip().isdigit():
                    out["cpu_seconds"] = int(value) / 1e6
        else:
            used = _read(os.path.join(acct, "cpuacct.usage")).strip()
            if used.isdigit():
                out["cpu_seconds"] = int(used) / 1e9
    return out


def _write_strict(path: str, text: str) -> None:
    with open(path, "w") as fh:
        fh.write(text)
