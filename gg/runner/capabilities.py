"""The capability report: what this host can actually enforce, measured rather than assumed.

Every answer comes from doing the thing: bubblewrap counts as usable only when a sandbox of
the shape ``gg.runner.isolation`` builds actually starts; a container engine counts only when
its ``info`` answers. The report travels to the control plane on check-in, which compares it
with the runner's policy (``gg.domain.health``). Keys, all always present::

    bwrap                   str | None   path of the bwrap executable
    bwrap_usable            bool         a sandbox of the shape isolation.py builds starts
    bwrap_error             str | None   why not, in one short line
    confinement             dict | None  what holds inside that sandbox, read from its own
                                         /proc/self/status (None when no sandbox starts):
        layout              "allowlist"  only the workspace, system, gg and PATH dirs are bound
        capabilities        str          "dropped" (no effective capability) or "kept"
        no_new_privs        bool         NoNewPrivs is 1: no setuid program can gain privileges
        user_namespace      bool         the sandbox runs in a user namespace of its own
        pid_namespace       bool         the command sees its own pid namespace
        uid                 int | None   the uid a flight runs as, as the host sees it (a root
                                         runner's: its flight identity; never 0 when confined)
        proc_sys_writable   bool         /proc/sys/kernel/core_pattern is writable inside
    netns                   bool         bwrap can make an empty network namespace
    cgroup_version          str | None   "2", "1", "hybrid" or None (no cgroup fs)
    cgroup_controllers      list[str]    controllers in this process's own cgroup that it may
                                         write to (the delegated subtree), sorted
    flight_limits           dict         controller -> "v1" or "v2": each of memory, cpu, cpuacct,
                                         pids that a flight's cgroups can use here (the
                                         resource limits of gg fly --cpus --memory --pids)
    container_engine        str | None   "podman" or "docker", whichever answers first in that order
    container_engine_error  str | None   why none answers, in one short line
    tools                   list[str]    executables found on PATH among TOOLS, sorted
    gvisor                  dict         path (runsc's or None), usable (a flight of the shape
                                         gg.runner.gvisor builds ran, not as uid 0 on a root
                                         runner), error (why not, one short line, or None)
    isolation_levels        list[str]    subset of none, sandbox, container, gvisor usable here
    egress_controls         list[str]    subset of all, none, allowlist
    egress_allowlist_error  str or None  what this host lacks for an allowlist ("nftables
                                         (nft) and root"), None when it can make one
    runs_as_root            bool         the runner runs as root: its flights drop to their
                                         flight identity, a console to the machine is host root

Nothing time-dependent is in the report, so two probes of an unchanged host compare equal and
the runner can send it only when it changed. A probe takes tens of milliseconds when no engine
is installed; a hung engine costs at most ``engine_timeout`` seconds (engines are asked in
parallel with the bubblewrap probes).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from gg.domain.health import confinement_missing
from gg.runner import cgroups as flight_cgroup
from gg.runner import gvisor as gvisor_level
from gg.runner import isolation, probe_cache
from gg.runner.egress import probe as egress_probe
from gg.runner.flight_identity import Identity, runs_as_root, shared

TOOLS = ("bwrap", "curl", "docker", "gcc", "git", "git-lfs", "make", "node", "npm", "podman",
         "python3", "rsync", "ssh", "tar", "unshare", "uv")
ENGINES = ("podman", "docker")
BWRAP_TIMEOUT = 3.0
# Inside its own pid namespace the command is pid 1 or 2 (bwrap may stay as pid 1).
PID_NAMESPACE_MAX_PID = 2
ENGINE_TIMEOUT = 3.0
GVISOR_TIMEOUT = 15.0  # a gVisor sandbox starts in about a second; more on a loaded host
_ERROR_CHARS = 160
# cgroup v1 mount options mix controller names with flags (xattr, noprefix, name=...).
V1_CONTROLLERS = frozenset({"blkio", "cpu", "cpuacct", "cpuset", "devices", "freezer", "hugetlb",
                            "memory", "misc", "net_cls", "net_prio", "perf_event", "pids", "rdma"})


def _short(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    line = lines[-1] if lines else ""
    return line if len(line) <= _ERROR_CHARS else line[:_ERROR_CHARS - 1] + "…"


def _run(argv: list[str], timeout: float, env: dict[str, str] | None = None,
         stdout: Any = subprocess.DEVNULL) -> tuple[bool, str]:
    """Run briefly; (succeeded, short error). Never hangs past ``timeout``.

    The child gets its own session and its stderr goes to a file, so a grandchild that keeps
    a pipe open (a daemon an engine client forked) cannot stall us, and a timeout kills the
    whole group.
    """
    with tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=stdout,
                                    stderr=err, cwd="/", env=env, start_new_session=True)
        except OSError as exc:
            return False, _short(f"{argv[0]}: {exc.strerror or exc}")
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
            return False, f"{Path(argv[0]).name} {argv[1]} timed out after {timeout:g} s"
        err.seek(0)
        text = err.read().decode("utf-8", "replace")
    if code == 0:
        return True, ""
    return False, _short(text) or f"{Path(argv[0]).name} exited with status {code}"


# Run inside the probe sandbox: its own pid and the lines of /proc/self/status that say what
# confines it (shell builtins only, so nothing but sh has to be bound).
_STATUS_SCRIPT = ('echo "Pid: $$"; while IFS= read -r line; do case "$line" in '
                  'Uid:*|CapEff:*|CapBnd:*|NoNewPrivs:*) echo "$line";; esac; '
                  'done < /proc/self/status; '
                  'if [ -w /proc/sys/kernel/core_pattern ]; then echo "ProcSys: writable"; fi')


def sandbox_probe_argv(bwrap: str, workspace: Path, *, user_namespace: bool,
                       path: str | None = None, drop_to: Identity | None = None) -> list[str]:
    """The sandbox isolation.py builds (same layout, same flags, the same drop to the flight
    identity on a root runner), with ``workspace`` as the workspace; it prints what confines
    it."""
    plan = isolation.layout(workspace, path=path)
    argv = isolation.sandbox_argv(bwrap, plan, workspace=workspace, cut_net=False,
                                  user_namespace=user_namespace, drop_to=drop_to)
    drop = isolation.drop_argv(drop_to) if drop_to is not None else []
    return argv + ["--", *drop, "/bin/sh", "-c", _STATUS_SCRIPT]


def confinement_of(status: str, *, user_namespace: bool) -> dict[str, Any]:
    """What the probe's output says holds inside the sandbox."""
    seen: dict[str, str] = {}
    for line in status.splitlines():
        key, _, value = line.partition(":")
        seen[key.strip()] = value.strip()
    try:
        pid = int(seen.get("Pid", ""))
    except ValueError:
        pid = 0
    try:
        dropped = int(seen.get("CapEff", "x"), 16) == 0
    except ValueError:
        dropped = False
    try:
        uid: int | None = int(seen.get("Uid", "").split()[1])  # real, effective, saved, fs
    except (IndexError, ValueError):
        uid = None
    return {"layout": "allowlist",
            "capabilities": "dropped" if dropped else "kept",
            "no_new_privs": seen.get("NoNewPrivs") == "1",
            "user_namespace": user_namespace,
            "pid_namespace": 0 < pid <= PID_NAMESPACE_MAX_PID,
            "uid": uid,
            "proc_sys_writable": seen.get("ProcSys") == "writable"}


def _sandbox(bwrap: str, path: str | None,
             drop_to: Identity | None) -> tuple[bool, str, dict[str, Any] | None]:
    """(a sandbox starts, why not, what confines it): with a user namespace where the host
    allows one, else with capabilities dropped by bwrap alone. A root runner's is tried only
    as its flights get it: no user namespace, dropped to ``drop_to`` (or, without setpriv,
    kept as root, which the report then says)."""
    if drop_to is not None:
        try:
            isolation.setpriv_path()
        except isolation.IsolationUnavailable:
            drop_to = None
    variants = (False,) if runs_as_root() else (True, False)
    workspace = Path(tempfile.mkdtemp(prefix="gg-probe-"))
    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            tries = {userns: pool.submit(_capture, sandbox_probe_argv(
                bwrap, workspace, user_namespace=userns, path=path, drop_to=drop_to),
                BWRAP_TIMEOUT) for userns in variants}
            answers = {userns: job.result() for userns, job in tries.items()}
    finally:
        shutil.rmtree(workspace, ignore_errors=True)
    for userns in variants:
        ok, out = answers[userns]
        if ok:
            found = confinement_of(out, user_namespace=userns)
            if userns is False or confinement_missing(found) is None:
                return True, "", found
    for userns in variants:  # the user namespace started but did not confine: report it
        ok, out = answers[userns]
        if ok:
            return True, "", confinement_of(out, user_namespace=userns)
    return False, answers[False][1], None


def _capture(argv: list[str], timeout: float) -> tuple[bool, str]:
    """Like ``_run``, but (succeeded, stdout) on success and (False, short error) otherwise."""
    with tempfile.TemporaryFile() as out:
        ok, why = _run(argv, timeout, stdout=out)
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
    return (True, text) if ok else (False, why)


# Run by the gvisor probe: what the flight's uid and effective capabilities are inside.
_GVISOR_SCRIPT = ('while IFS= read -r l; do case "$l" in Uid:*|CapEff:*) echo "$l";; esac; '
                  'done < /proc/self/status')


def _gvisor(path: str | None, drop_to: Identity | None) -> dict[str, Any]:
    """``gvisor``: runsc's path, whether a flight of the shape gg.runner.gvisor builds ran
    (as ``drop_to`` on a root runner: never uid 0), and why not."""
    runsc = shutil.which("runsc", path=path)
    if runsc is None:
        return {"path": None, "usable": False, "error": "runsc is not installed"}
    scratch = Path(tempfile.mkdtemp(prefix="gg-probe-"))  # 0700: the bundle, runsc's state
    workspace = scratch / "workspace"
    workspace.mkdir(mode=0o711)
    os.chmod(workspace, 0o711)
    try:
        plan = isolation.layout(workspace, path=path)
        spec = gvisor_level.config(["/bin/sh", "-c", _GVISOR_SCRIPT], plan, workspace=workspace,
                                   env={"PATH": "/usr/bin:/bin"}, identity=drop_to, limits=None,
                                   cut_net=True)
        bundle = gvisor_level.write_bundle(scratch, spec, plan)
        root = gvisor_level.state_root(None, bundle)
        name = gvisor_level.name_for(workspace, None)
        ok, out = _capture(gvisor_level.argv(runsc, root=root, bundle=bundle, name=name,
                                             cut_net=True), GVISOR_TIMEOUT)
        _run(gvisor_level.cleanup(runsc, root=root, name=name), GVISOR_TIMEOUT)
    except OSError as exc:
        ok, out = False, _short(f"runsc: {exc}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if not ok:
        return {"path": runsc, "usable": False, "error": out}
    found = confinement_of(out, user_namespace=False)
    if found["uid"] is None or (drop_to is not None and found["uid"] == 0):
        return {"path": runsc, "usable": False,
                "error": "flights would run as root (the gvisor sandbox keeps uid 0)"}
    if found["capabilities"] != "dropped":
        return {"path": runsc, "usable": False,
                "error": "the gvisor sandbox cannot drop its capabilities"}
    return {"path": runsc, "usable": True, "error": None}


def netns_probe_argv(bwrap: str) -> list[str]:
    return [bwrap, "--die-with-parent", "--dev-bind", "/", "/", "--unshare-net", "--", "true"]


def _engine(path: str | None, timeout: float) -> tuple[str | None, str | None]:
    found = [(name, shutil.which(name, path=path)) for name in ENGINES]
    present = [(name, exe) for name, exe in found if exe]
    if not present:
        return None, "neither podman nor docker is installed"
    with ThreadPoolExecutor(max_workers=len(present)) as pool:
        answers = list(pool.map(lambda ne: _run([ne[1], "info"], timeout), present))
    for (name, _), (ok, _) in zip(present, answers, strict=True):
        if ok:
            return name, None
    why = [f"{name}: {reason}" for (name, _), (_, reason) in zip(present, answers, strict=True)]
    return None, "; ".join(why)


def _kept_engine(path: str | None, timeout: float, *, fresh: bool) -> tuple[str | None, str | None]:
    name = probe_cache.key("engine", ENGINES, path, None)
    engine, error = probe_cache.kept(name, lambda: _engine(path, timeout),
                                     usable=lambda answer: answer[0] is not None, fresh=fresh)
    return engine, error


def _kept_gvisor(path: str | None, drop_to: Identity | None, *, fresh: bool) -> dict[str, Any]:
    name = probe_cache.key("gvisor", ("runsc",), path, drop_to)
    return probe_cache.kept(name, lambda: _gvisor(path, drop_to),
                            usable=lambda answer: bool(answer["usable"]), fresh=fresh)


def _unescape(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash as octal escapes."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def cgroups(mountinfo: str, own_cgroups: str) -> tuple[str | None, list[str]]:
    """(version, writable controllers) from /proc/self/mountinfo and /proc/self/cgroup text."""
    v2_mount: str | None = None
    v1: list[tuple[str, list[str]]] = []
    for line in mountinfo.splitlines():
        before, sep, after = line.partition(" - ")
        if not sep:
            continue
        mount_point = _unescape(before.split()[4])
        fstype, _, options = (after.split() + ["", "", ""])[:3]
        if fstype == "cgroup2":
            v2_mount = v2_mount or mount_point
        elif fstype == "cgroup":
            names = [o for o in options.split(",") if o in V1_CONTROLLERS]
            if names:
                v1.append((mount_point, names))
    paths: dict[str, str] = {}
    for line in own_cgroups.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            paths[parts[1]] = parts[2]
    controllers: set[str] = set()
    if v2_mount is not None and "" in paths:
        own = Path(v2_mount + paths[""].rstrip("/"))
        try:
            listed = (own / "cgroup.controllers").read_text().split()
        except OSError:
            listed = []
        if os.access(own, os.W_OK):
            controllers.update(listed)
    for mount_point, names in v1:
        key = next((k for k in paths if set(k.split(",")) == set(names)), None)
        own = Path(mount_point + (paths.get(key, "/") if key else "/").rstrip("/"))
        if own.is_dir() and os.access(own, os.W_OK):
            controllers.update(names)
    version = ("hybrid" if v2_mount and v1 else "2" if v2_mount else "1" if v1 else None)
    return version, sorted(controllers)


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def probe(*, path: str | None = None, engine_timeout: float = ENGINE_TIMEOUT,
          flight_identity: Identity | None = None, reuse: bool = False) -> dict[str, Any]:
    """Measure this host. ``path`` overrides PATH for finding executables (tests use it).
    ``flight_identity``: who a root runner's flights run as (default: the first of the
    flight-uid range, gg.runner.flight_identity). ``reuse``: a runner's first probe at its
    start, which may take the engine's and runsc's answers another runner on this machine
    measured, unchanged since (gg.runner.probe_cache; only where GG_PROBE_CACHE names a
    folder)."""
    if not runs_as_root():
        flight_identity = None  # it runs its flights as itself
    elif flight_identity is None:
        flight_identity = shared().first()
    bwrap = shutil.which("bwrap", path=path)
    tools = sorted(name for name in TOOLS if shutil.which(name, path=path))
    confinement: dict[str, Any] | None = None
    with ThreadPoolExecutor(max_workers=4) as pool:
        engine_job = pool.submit(_kept_engine, path, engine_timeout, fresh=not reuse)
        gvisor_job = pool.submit(_kept_gvisor, path, flight_identity, fresh=not reuse)
        allowlist_job = pool.submit(egress_probe)  # a namespace with rules, made and removed
        if bwrap:
            sandbox_job = pool.submit(_sandbox, bwrap, path, flight_identity)
            netns_job = pool.submit(_run, netns_probe_argv(bwrap), BWRAP_TIMEOUT)
            (bwrap_usable, bwrap_why, confinement), (netns, _) = (sandbox_job.result(),
                                                                  netns_job.result())
        else:
            bwrap_usable, bwrap_why, netns = False, "bwrap is not installed", False
        engine, engine_error = engine_job.result()
        gvisor = gvisor_job.result()
        allowlist_error = allowlist_job.result()
    version, controllers = cgroups(_read("/proc/self/mountinfo"), _read("/proc/self/cgroup"))
    flight_cgroups, flight_cgroups_error = flight_cgroup.usable()  # a flight's whole tree
    flight_limits = flight_cgroup.limits_usable()  # its resource limits and usage
    sandbox = bwrap_usable and confinement_missing(confinement) is None
    levels = (["none"] + (["sandbox"] if sandbox else []) + (["container"] if engine else [])
              + (["gvisor"] if gvisor["usable"] else []))
    egress = (["all"] + (["none"] if netns or engine or gvisor["usable"] else [])
              + (["allowlist"] if allowlist_error is None else []))
    return {
        "bwrap": bwrap,
        "bwrap_usable": bwrap_usable,
        "bwrap_error": None if bwrap_usable else bwrap_why,
        "confinement": confinement,
        "netns": netns,
        "cgroup_version": version,
        "cgroup_controllers": controllers,
        "flight_cgroups": flight_cgroups,
        "flight_cgroups_error": flight_cgroups_error,
        "flight_limits": flight_limits,
        "container_engine": engine,
        "container_engine_error": engine_error,
        "gvisor": gvisor,
        "tools": tools,
        "isolation_levels": levels,
        "egress_controls": egress,
        "egress_allowlist_error": allowlist_error,
        "runs_as_root": runs_as_root(),
    }
