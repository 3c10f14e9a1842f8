"""Wrap a flight's command so that it runs under the policy's isolation and egress.

The policy is met or the flight does not run: when the capability report says a piece is
missing, ``build`` raises ``IsolationUnavailable`` naming it (the same phrase the server shows
as ``degraded: ...``), and the runner reports degraded. Nothing here ever falls back to less
isolation than the policy asks for.

What each combination becomes::

    none      + all    the command as is, cwd = workspace
    none      + none   bwrap --dev-bind / / --unshare-net  (the host as is, but an empty
                       network namespace: only its own loopback, so egress is really cut)
    sandbox   + all    bwrap: an empty read-only root with only an allowlist bound in (the
                       workspace read-write, HOME in it; the system, the Python gg runs on,
                       gg itself and the PATH directories read-only; see ``layout``), a
                       private /tmp, own /proc, /dev and pid namespace, no capabilities
                       (--cap-drop ALL, and a user namespace where the host allows one),
                       no_new_privs, new session, dies with the runner; every gg state and
                       config tree on the host that is visible (``gg_trees``, the runner's
                       state dir, any ``hidden`` path) masked by an empty read-only tmpfs
    sandbox   + none   the same, plus --unshare-net
    container + all    ENGINE run, workspace mounted at /workspace, the policy's image (kept
                       until ``Launch.discard`` so its end can be inspected: gg.runner.containers)
    container + none   the same, plus --network none
    gvisor    + all    runsc run of a bundle of the sandbox's layout (gg.runner.gvisor),
                       the host's network through gVisor (--network=host)
    gvisor    + none   the same, with --network=none
    any       + allowlist  the same as ``all``, started in the flight's own network namespace
                       (``netns``, made by gg.runner.egress): nsenter --net=NETNS before
                       bwrap, runsc (or the command, isolation none); podman --network ns:NETNS

Whatever the policy, the runner's launcher (:mod:`gg.runner.launching`) forks what ``build``
returns, in a process group of its own that is killed when the runner dies.

The flight's environment reaches only its command, never what builds the sandbox nor what
drops root (:mod:`gg.runner.flight_env`): bwrap runs with the runner's own environment, and
the command's is the launch's ``handed`` bytes on fd ``HANDED_FD``, which bwrap applies as it
execs the command (``--args 3``), or, on a root runner, which a shell started after setpriv
took the flight identity applies. A flight's ``LD_PRELOAD`` or ``PATH`` so never loads into
bwrap or setpriv nor finds another one, and no value is on a command line.
A container engine's client runs with the runner's own environment too; the flight's
variables are a file bound read-only into the container and sourced there before the command
(``Launch.private``, removed once the container ended). The plain command (isolation
``none``, egress ``all``) gets its environment directly.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import stat
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from gg import config
from gg.domain.health import FLIGHTS_AS_ROOT, first_missing
from gg.domain.policy import Policy, image_problem
from gg.runner import flight_identity as identities
from gg.runner import gvisor, socket_activation
from gg.runner.flight_env import (
    ENVIRONMENT_FILE,
    HANDED_FD,
    after_drop,
    before_drop,
    bound_file,
    environment_file,
    handed_env,
    runner_env,
    sourcing,
    write_private,
)
from gg.runner.flight_identity import Identity
from gg.trees import recorded as recorded_trees

DEFAULT_IMAGE = "docker.io/library/python:3.11-slim"
CONTAINER_WORKSPACE = "/workspace"
# Each container's environment file, in a directory of its own, while the container runs:
# under a directory of the runner's in memory (MEMORY, a tmpfs) when there is one, so that a
# flight's variables (its secrets among them: docs/jobs.md) never reach a disk; else under the
# runner's state dir (hidden from every sandbox).
ENVIRONMENTS = "environments"
MEMORY = Path("/dev/shm")
# Host-specific variables that mean nothing (or the wrong thing) inside a container.
# Bound read-only into every sandbox when present (a symbolic link stays a link).
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
# Files in /etc that are often links into directories a sandbox does not get (/run).
ETC_LINKS = ("/etc/resolv.conf", "/etc/hosts", "/etc/localtime")
# gg's platformdirs roots under a home directory on Linux: config, state, data.
GG_HOME_TREES = (".config/gg", ".local/state/gg", ".local/share/gg")
ENV_TREES = (config.ENV_STATE_DIR, config.ENV_CONFIG_DIR, config.ENV_DATA_DIR)
# More trees to hide, os.pathsep-separated: a pool maintainer passes its own to its members.
ENV_HIDE = "GG_HIDE"
PASSWD = "/etc/passwd"
# Bound directories whose files only their owner or group may read are looked through for them
# (a root flight would read them otherwise: /etc/shadow, ssh host keys, /etc/ssl/private).
PRIVATE_ROOTS = ("/etc",)
PRIVATE_REFRESH = 30.0  # seconds a look through them is reused
# Bound read-only over the sandbox's own /proc: a flight never writes a host sysctl (a
# core_pattern runs its handler as host root) nor triggers a SysRq, whatever its uid.
# Bound over /proc, they also forbid any fresh proc mount inside (the kernel refuses one
# where the existing /proc is not fully visible).
READ_ONLY_PROC = ("/proc/sys", "/proc/sysrq-trigger")
# What bubblewrap keeps for a root runner's flight, only so that setpriv can take the flight
# identity; setpriv then empties every set (bounding, inheritable, ambient) before the command.
DROP_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP")
# setpriv is run from the read-only system directories only, never from a flight's PATH.
SETPRIV_DIRS = ("/usr/bin", "/bin", "/usr/sbin", "/sbin")
_HOST_ONLY = frozenset({"PATH", "HOME", "PWD", "OLDPWD", "SHLVL", "HOSTNAME", "TMPDIR", "_",
                        "SSH_AUTH_SOCK", "DISPLAY", "XAUTHORITY", "DBUS_SESSION_BUS_ADDRESS"})


class IsolationUnavailable(Exception):
    """The policy cannot be met on this host; ``missing`` is the one missing piece."""

    def __init__(self, missing: str) -> None:
        super().__init__(missing)
        self.missing = missing


@dataclass(frozen=True)
class Launch:
    """What to hand ``subprocess.Popen``: ``Popen(l.argv, env=l.env, cwd=l.cwd)``.

    ``cleanup`` is an argv to run when the flight is cancelled or the runner stops it: killing
    a container engine's client does not stop the container, so ``ENGINE rm -f NAME`` must.

    ``handed``: bytes the first program reads on fd ``HANDED_FD`` (the command's environment,
    for bwrap's ``--args``, or a root runner's environment file: :mod:`gg.runner.flight_env`);
    ``env`` is then the runner's own, for bwrap alone. ``sourced``: ``handed`` is that file's
    shell lines, applied by a shell after the drop, not bwrap's ``--args``. The runner's
    launcher puts them there (``LAUNCHER.start(..., handed=...)``).

    ``private``: a container's environment file's directory (the flight's variables, bound
    into the container), to remove with :meth:`discard` once the container ended. It is also
    the engine client's working directory, where podman 4's conmon leaves its ``oom`` mark
    (:mod:`gg.runner.containers`).
    """

    argv: list[str]
    env: dict[str, str]
    cwd: Path
    cleanup: list[str] | None = None
    container_name: str | None = None
    handed: bytes | None = None
    sourced: bool = False
    private: Path | None = None
    own_limits: tuple[str, ...] = ()  # limits the launch enforces itself (gg.runner.gvisor)

    def discard(self) -> None:
        """What this launch left on the host for its process (a container, kept after it
        ended so that its end can be inspected, and its environment file), gone; call it once
        the process ended (again: nothing happens)."""
        if self.container_name is not None and self.cleanup:
            from gg.runner import containers

            containers.remove(self)
        if self.private is not None:
            shutil.rmtree(self.private, ignore_errors=True)


def _bwrap(capabilities: Mapping[str, Any]) -> str:
    return str(capabilities.get("bwrap") or "bwrap")


def _masks(workspace: Path, hidden: Iterable[Path]) -> list[Path]:
    masks: list[Path] = []
    for path in hidden:
        path = Path(os.path.abspath(path))
        if path == workspace or path == Path("/"):
            raise ValueError(f"{path} cannot be hidden from a sandbox whose workspace is "
                             f"{workspace}")
        if path not in masks:
            masks.append(path)
    return masks


def _real(path: Path | str) -> Path:
    return Path(os.path.realpath(path))


def _reachable(look: Callable[[], bool]) -> bool:
    """``look`` (a path's ``exists`` or ``is_dir``), False for a path this runner may not
    look into (a PATH entry or a gg tree under another user's home, such as a 0700 /root):
    it is neither bound nor masked, as it is not there for its flights either, and it never
    stops the runner (Path.exists raises PermissionError rather than answer False)."""
    try:
        return look()
    except OSError:
        return False


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def home_dirs(passwd: str | None = None) -> list[Path]:
    """Every home directory this host lists (``/etc/passwd``), plus ``/root`` and ``$HOME``."""
    homes: list[Path] = [Path("/root")]
    try:
        lines = Path(passwd or PASSWD).read_text(errors="replace").splitlines()
    except OSError:
        lines = []
    for line in lines:
        fields = line.split(":")
        if len(fields) >= 6 and fields[5].startswith("/") and fields[5] != "/":
            homes.append(Path(fields[5]))
    if os.environ.get("HOME", "/") != "/":
        homes.append(Path(os.environ["HOME"]))
    return list(dict.fromkeys(homes))


def gg_trees(environ: Mapping[str, str] | None = None,
             passwd: str | None = None) -> list[Path]:
    """Every gg state, config and data tree on this host, existing or not.

    The roots platformdirs gives gg for this user (which honour ``XDG_*``) and for every home
    directory on the host, the system-wide config, any ``GG_STATE_DIR``, ``GG_CONFIG_DIR`` or
    ``GG_DATA_DIR`` this process was given, every path in its ``GG_HIDE`` (a pool's maintainer
    passes its own directories to its members there), and every tree a gg process of root or
    of this user recorded (:mod:`gg.trees`). No other process's environment is read: nothing
    another process was given decides what a flight sees.
    """
    import platformdirs

    environ = os.environ if environ is None else environ
    trees: list[Path] = [Path(platformdirs.user_state_dir("gg")),
                         Path(platformdirs.user_config_dir("gg")),
                         Path(platformdirs.user_data_dir("gg")),
                         Path(platformdirs.site_config_dir("gg"))]
    for home in home_dirs(passwd):
        trees += [home / sub for sub in GG_HOME_TREES]
    for name in ENV_TREES:
        if environ.get(name):
            trees.append(Path(os.path.abspath(environ[name])))
    trees += [Path(p) for p in environ.get(ENV_HIDE, "").split(os.pathsep) if p]
    trees += recorded_trees()
    return list(dict.fromkeys(Path(os.path.abspath(t)) for t in trees if os.path.isabs(t)))


def install_paths() -> list[Path]:
    """What gg needs to run inside a sandbox: the Python it runs on and the directory gg is
    imported from (a venv under /tmp, an editable checkout anywhere)."""
    import gg

    paths = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             os.path.dirname(os.path.realpath(sys.executable)),
             os.path.dirname(os.path.dirname(os.path.realpath(gg.__file__)))]
    return list(dict.fromkeys(Path(os.path.abspath(p)) for p in paths if p))


@dataclass(frozen=True)
class Layout:
    """A sandbox's file system: what is bound read-only, read-write, linked and masked.

    ``read_only`` and ``read_write`` are (host path, path inside) pairs; ``links`` are
    (target, path inside) symbolic links; ``masks`` are paths inside covered by an empty
    read-only tmpfs. Everything else is an empty read-only root, plus ``/dev``, ``/proc`` and a
    private ``/tmp``.
    """

    read_only: tuple[tuple[Path, Path], ...]
    read_write: tuple[tuple[Path, Path], ...]
    links: tuple[tuple[str, Path], ...]
    masks: tuple[Path, ...]
    blanks: tuple[Path, ...] = ()  # files inside covered by /dev/null, bound nodev: unopenable

    def visible(self) -> list[Path]:
        return [dest for _, dest in (*self.read_only, *self.read_write)]


_private_seen: dict[str, tuple[float, tuple[list[Path], list[Path]]]] = {}
_private_lock = threading.Lock()


def private_paths(root: str | Path, *, now: float | None = None) -> tuple[list[Path], list[Path]]:
    """(directories, files) under ``root`` that others may not read: what only their owner or
    group reads on the host stays out of a sandbox's sight, whatever uid the flight runs as.
    A directory others cannot list or enter is one entry (nothing under it is looked at).
    Reused for PRIVATE_REFRESH seconds (a look through /etc costs tens of milliseconds)."""
    key = str(root)
    now = time.monotonic() if now is None else now
    with _private_lock:
        seen = _private_seen.get(key)
        if seen is not None and now - seen[0] < PRIVATE_REFRESH:
            return seen[1]
    dirs: list[Path] = []
    files: list[Path] = []

    def look(directory: str) -> None:
        try:
            entries = list(os.scandir(directory))
        except OSError:
            return
        for entry in entries:
            try:
                mode = entry.stat(follow_symlinks=False).st_mode  # a link is never followed
            except OSError:
                continue
            if stat.S_ISDIR(mode):
                if mode & 0o005 != 0o005:
                    dirs.append(Path(entry.path))
                else:
                    look(entry.path)
            elif stat.S_ISREG(mode) and not mode & 0o004:
                files.append(Path(entry.path))

    look(key)
    found = (dirs, files)
    with _private_lock:
        _private_seen[key] = (now, found)
    return found


def layout(workspace: Path, *, path: str | None = None, hidden: Iterable[Path] = (),
           read_write: Iterable[Path] = (), passwd: str | None = None) -> Layout:
    """The allowlist for a sandbox whose workspace is ``workspace``.

    Read-write: the workspace and ``read_write`` (a pool member's image root). Read-only: the
    system directories, the Python gg runs on and gg itself, the directories on ``path`` (the
    runner's own PATH when None: never a flight's, whose PATH may only name what is bound),
    and the targets of ``/etc`` links that point elsewhere (resolv.conf). Masked: every explicit
    ``hidden`` path and every gg tree on the host (:func:`gg_trees`) that falls inside a bound
    directory or holds one.
    """
    searched = os.environ.get("PATH", "") if path is None else path
    workspace = Path(os.path.abspath(workspace))
    explicit = _masks(workspace, hidden)
    links: list[tuple[str, Path]] = []
    candidates: list[Path] = []
    for name in SYSTEM_PATHS:
        system = Path(name)
        if system.is_symlink():
            links.append((os.readlink(system), system))
        elif system.is_dir():
            candidates.append(system)
    candidates += install_paths()
    candidates += [Path(p) for p in searched.split(os.pathsep) if os.path.isabs(p)]
    for name in ETC_LINKS:
        if os.path.islink(name):
            candidates.append(Path(name))
    roots: list[Path] = []
    for real in sorted({_real(c) for c in candidates if _reachable(c.exists)},
                       key=lambda p: len(p.parts)):
        if real == Path("/") or any(_inside(real, root) for root in roots):
            continue
        if any(_inside(real, Path(dest)) for _, dest in links):
            continue
        roots.append(real)
    read_only = [(root, root) for root in roots]
    writable = [(workspace, workspace)]
    for given in read_write:
        bound = Path(os.path.abspath(given))
        if bound == Path("/"):
            raise ValueError("the whole host cannot be bound into a sandbox")
        if bound.is_dir() and bound != workspace:
            writable.append((bound, bound))
    binds = [*read_only, *writable]
    masks: list[Path] = []
    for tree in [*explicit, *gg_trees(passwd=passwd)]:
        if tree == Path("/") or tree == workspace or not _reachable(tree.is_dir):
            continue
        real = _real(tree)
        for src, dest in binds:
            if _inside(real, _real(src)):
                masks.append(dest / real.relative_to(_real(src)))
        if tree in explicit or any(_inside(dest, tree) for _, dest in binds):
            masks.append(tree)
    blanks: list[Path] = []
    for root in PRIVATE_ROOTS:
        if any(dest == Path(root) for _, dest in read_only):
            private_dirs, private_files = private_paths(root)
            masks += private_dirs
            blanks += private_files
    masks = [m for m in dict.fromkeys(masks) if m != workspace]
    return Layout(tuple(read_only), tuple(writable), tuple(links), tuple(masks), tuple(blanks))


def _passages(plan: Layout) -> list[Path]:
    """The directories bubblewrap would make on the way to a bound path or a mask (which it
    makes as the runner's umask says, 0700 under root's usual one): made 0755 instead, so the
    flight identity reaches what is bound for it (a Python under /root, a workspace under the
    masked state dir). Those inside a bound host directory are the host's own, left alone."""
    binds = [dest for _, dest in (*plan.read_only, *plan.read_write)]
    ends = [*binds, *plan.masks, *plan.blanks]
    taken = set(ends) | {Path(path) for _, path in plan.links}
    mounts = [(bound, True) for bound in binds] + [(mask, False) for mask in plan.masks]
    out: set[Path] = set()
    for end in ends:
        for folder in end.parents:
            if folder == Path("/") or folder in taken or folder == Path("/tmp"):
                continue
            if any(_inside(folder, Path(link)) for _, link in plan.links):
                continue
            # what it lies in, deepest first: a host directory bound in (its own), or a
            # mask's or the root's tmpfs (made by bubblewrap)
            under = [(len(path.parts), host) for path, host in mounts if _inside(folder, path)]
            if under and max(under)[1]:
                continue
            out.add(folder)
    return sorted(out)


def sandbox_argv(bwrap: str, plan: Layout, *, workspace: Path, cut_net: bool,
                 user_namespace: bool, drop_to: Identity | None = None,
                 handed_file: bool = False) -> list[str]:
    """bwrap's arguments for ``plan``, up to (not including) ``--`` and the command.

    ``drop_to`` (a root runner's flight): no user namespace (one made by root maps its root to
    host root), and bubblewrap keeps only what :func:`drop_argv` needs to change uid; the
    command must then be started through ``drop_argv(drop_to)``. ``handed_file``: the
    command's environment, handed on fd 3, becomes a read-only file inside
    (:func:`gg.runner.flight_env.bound_file`).
    """
    argv = [bwrap, "--die-with-parent", "--new-session", "--unshare-pid"]
    if user_namespace and drop_to is None:
        argv.append("--unshare-user")
    argv += ["--cap-drop", "ALL"]
    if drop_to is not None:
        for cap in DROP_CAPS:
            argv += ["--cap-add", cap]
    if cut_net:
        argv.append("--unshare-net")
    for target, path in plan.links:
        argv += ["--symlink", target, str(path)]
    argv += ["--dev", "/dev", "--proc", "/proc"]
    for knob in READ_ONLY_PROC:  # the kernel's knobs: read-only over the sandbox's own /proc
        if os.path.exists(knob):
            argv += ["--ro-bind", knob, knob]
    argv += ["--perms", "1777", "--tmpfs", "/tmp"]
    # Outer paths before inner ones: a workspace inside a masked state dir is bound after the
    # mask, a mask inside a bound directory after the bind; at one path, the bind first.
    mounts: list[tuple[int, int, list[str]]] = []
    for src, dest in plan.read_only:
        mounts.append((len(dest.parts), 0, ["--ro-bind", str(src), str(dest)]))
    for src, dest in plan.read_write:
        mounts.append((len(dest.parts), 0, ["--bind", str(src), str(dest)]))
    for mask in plan.masks:
        mounts.append((len(mask.parts), 1, ["--tmpfs", str(mask)]))
    for blank in plan.blanks:
        mounts.append((len(blank.parts), 1, ["--ro-bind", "/dev/null", str(blank)]))
    for folder in _passages(plan):
        mounts.append((len(folder.parts), 2, ["--perms", "0755", "--dir", str(folder)]))
    for _, _, args in sorted(mounts, key=lambda m: (m[0], m[1])):
        argv += args
    # Read-only last, so the mount points for deeper binds already exist inside each mask.
    for mask in plan.masks:
        argv += ["--remount-ro", str(mask)]
    if handed_file:
        argv += bound_file()
    return argv + ["--remount-ro", "/", "--chdir", str(workspace)]


# What makes ``rm --force`` kill at once: podman first sends the stop signal and waits 10 s
# (a container's PID 1 ignores SIGTERM); docker's kills.
_NO_WAIT = {"podman": ("--time", "0")}


def _container(command: list[str], engine: str, workspace: Path, env: Mapping[str, str],
               cut_net: bool, image: str, name: str, terminal: bool = False,
               drop_to: Identity | None = None, private_root: Path | None = None,
               limits: Mapping[str, Any] | None = None) -> Launch:
    """The engine's client with the runner's own environment; the flight's variables only in
    a file bound read-only into the container, which its ``/bin/sh`` sources before it execs
    the command (:mod:`gg.runner.flight_env`)."""
    argv = [engine, "run", *(["--interactive", "--tty"] if terminal else []),
            "--name", name, "--security-opt", "no-new-privileges"]
    if drop_to is not None:  # a root engine's container root is host root: never a flight's
        argv += ["--user", f"{drop_to.uid}:{drop_to.gid}", "--cap-drop", "ALL"]
    argv += ["--volume", f"{workspace}:{CONTAINER_WORKSPACE}", "--workdir", CONTAINER_WORKSPACE,
             "--env", f"HOME={CONTAINER_WORKSPACE}"]
    if cut_net:
        argv += ["--network", "none"]
    argv += container_limits(limits or {})
    passed = {k: v for k, v in env.items() if k not in _HOST_ONLY}
    path = write_private(environment_file(passed, unset_path=False), private_root)
    argv += ["--volume", f"{path}:{ENVIRONMENT_FILE}:ro"]
    return Launch(argv=argv + [image, *sourcing(command)], env=runner_env(), cwd=path.parent,
                  cleanup=[engine, "rm", "--force", *_NO_WAIT.get(Path(engine).name, ()), name],
                  container_name=name,
                  private=path.parent)


def environments_root(state_dir: Path | None) -> Path | None:
    """Where a container's environment file goes: a directory only the runner's uid may
    enter in MEMORY when that is a tmpfs (one that exists already and is not the runner's
    own, 0700, is not used: anyone may make names there), else the state dir's."""
    fallback = state_dir / ENVIRONMENTS if state_dir else None
    try:
        with open("/proc/self/mounts") as mounts:
            if not any(line.split()[1:3] == [str(MEMORY), "tmpfs"] for line in mounts):
                return fallback
        tag = hashlib.sha256(str(state_dir).encode()).hexdigest()[:12]
        folder = MEMORY / f"gg-environments-{os.getuid()}-{tag}"
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            pass
        st = os.lstat(folder)
    except OSError:
        return fallback
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return fallback
    return folder


def container_limits(limits: Mapping[str, Any]) -> list[str]:
    """A flight's resource limits as the engine's own flags: a container lives in the
    engine's cgroups, not the flight's (gg.domain.limits)."""
    flags: list[str] = []
    if limits.get("memory") is not None:
        memory = str(int(limits["memory"]))
        flags += ["--memory", memory, "--memory-swap", memory]
    if limits.get("cpus") is not None:
        flags += ["--cpus", f"{float(limits['cpus']):g}"]
    if limits.get("pids") is not None:
        flags += ["--pids-limit", str(int(limits["pids"]))]
    return flags


class _LastPolicy:
    """The policy read last, kept with what it was read from: a runner's flights are handed
    the same policy until an admin changes it, and reading one (its limits checked, its
    allowlist parsed) was about a twentieth of what a trivial flight cost a runner."""

    def __init__(self) -> None:
        self._last: tuple[str, Policy] | None = None

    def policy(self, data: Mapping[str, Any]) -> Policy:
        # compared as JSON, not by ==: 2 == 2.0 == True, and the reading refuses the last two
        key = json.dumps(data, sort_keys=True, default=repr)
        last = self._last
        if last is not None and last[0] == key:
            return last[1]
        read = Policy.from_dict(data)
        self._last = (key, read)
        return read


_READ = _LastPolicy()


def build(command: list[str], *, policy: Policy | Mapping[str, Any], workspace: Path,
          env: Mapping[str, str], state_dir: Path | None, capabilities: Mapping[str, Any],
          hidden: Iterable[Path] = (), image: str | None = None,
          container_name: str | None = None, terminal: bool = False,
          identity: Identity | None = None, as_runner: bool = False,
          activation: bool = False, limits: Mapping[str, Any] | None = None,
          netns: str | None = None) -> Launch:
    """Wrap ``command`` for ``policy``; raise ``IsolationUnavailable`` if it cannot be met.

    ``netns``: under ``egress: allowlist``, the path of the flight's network namespace
    (:mod:`gg.runner.egress`), which the launch enters before anything else starts.

    ``limits``: the flight's resource limits; a container gets them as the engine's flags
    (elsewhere the launcher's cgroups enforce them). ``image``: what a container runs from;
    by default the policy's ``image``, else DEFAULT_IMAGE.

    ``identity``: who a root runner's flight runs as (its worker slot's flight identity,
    :mod:`gg.runner.flight_identity`; by default the first of the runner's range). A root runner's
    sandbox or container never runs a command as root, except with ``as_runner`` (an admin's
    console to the machine itself, which says so: docs/console.md). A runner that is not root
    runs everything as itself.

    ``terminal``: the command runs on a console's PTY (docs/console.md): in a sandbox it is
    started through :func:`on_terminal` inside, so its session and controlling terminal live
    in the sandbox's pid namespace; a container gets ``--interactive --tty``; with isolation
    ``none`` the caller starts the whole argv through :func:`on_terminal`.

    ``state_dir`` (the runner's keys and credentials), every ``hidden`` path (pass the
    runner's config dir) and every gg tree on the host are neither readable nor writable
    inside a sandbox. The runner's own ``GG_IMAGE_ROOT`` (a pool member's machine) is bound
    read-write. ``env`` is the command's alone: nothing in it decides what is bound, nor reaches
    bwrap (see ``Launch.handed``).

    ``activation``: the command is handed a listening socket, right after the descriptors
    bwrap reads (:mod:`gg.runner.socket_activation`), and started through its
    :func:`~gg.runner.socket_activation.wrap`, which puts it on fd 3; not offered in a
    container.
    """
    if not command:
        raise ValueError("there is no command to run")
    policy = policy if isinstance(policy, Policy) else _READ.policy(policy)
    missing = first_missing(policy, capabilities)
    if missing:
        raise IsolationUnavailable(missing)
    workspace = Path(os.path.abspath(workspace))
    cut_net = policy.egress == "none"
    if policy.egress == "allowlist" and not netns:
        raise IsolationUnavailable("egress allowlist: no network namespace was made for it")
    enter = allowlist_entry(netns) if policy.egress == "allowlist" and netns else []
    out_env = dict(env)
    drop_to = None
    if identities.runs_as_root() and not as_runner and policy.isolation != "none":
        drop_to = identity or identities.shared().first()
        if drop_to.uid == 0 or drop_to.gid == 0:
            raise IsolationUnavailable(FLIGHTS_AS_ROOT)
    if activation:
        if policy.isolation == "container":
            raise IsolationUnavailable("socket activation is not offered in a container")
        plain = policy.isolation == "none" and not cut_net  # nothing handed on fd 3 before it
        command = socket_activation.wrap(command, at=HANDED_FD + (0 if plain else 1))
    if policy.isolation == "container":
        engine = str(capabilities["container_engine"])
        name = container_name or f"gg-{workspace.name[:40]}-{secrets.token_hex(4)}"
        if image and (problem := image_problem(image)):  # the environment's, as sent
            raise IsolationUnavailable(problem)
        image = image or policy.image or DEFAULT_IMAGE
        launch = _container(command, engine, workspace, out_env, cut_net, image, name, terminal,
                            drop_to, environments_root(state_dir), limits)
        if enter:
            if Path(engine).name != "podman":
                raise IsolationUnavailable("egress allowlist in a container needs podman")
            at = launch.argv.index("--volume")  # podman joins the namespace by its path
            launch.argv[at:at] = ["--network", f"ns:{netns}"]
        return launch
    if policy.isolation == "gvisor":
        launch = _gvisor(command, capabilities, workspace, out_env, cut_net, state_dir, hidden,
                         drop_to, container_name, limits, terminal or activation)
        launch.argv[:0] = enter  # runsc's --network=host is then the namespace's network
        return launch
    if policy.isolation == "none":
        if not cut_net:
            return Launch(argv=enter + list(command), env=out_env, cwd=workspace)
        argv = [_bwrap(capabilities), "--die-with-parent", "--unshare-net",
                "--dev-bind", "/", "/", "--chdir", str(workspace),
                "--args", str(HANDED_FD), "--"]
        return Launch(argv=argv + list(command), env=runner_env(), cwd=workspace,
                      handed=handed_env(out_env))
    explicit = [*([state_dir] if state_dir else []), *hidden]
    image_root = os.environ.get("GG_IMAGE_ROOT")  # the runner's own: a pool member's machine
    plan = layout(workspace, hidden=explicit,
                  read_write=[Path(image_root)] if image_root else [])
    out_env["HOME"] = str(workspace)
    out_env["TMPDIR"] = "/tmp"
    confinement = capabilities.get("confinement") or {}
    argv = sandbox_argv(_bwrap(capabilities), plan, workspace=workspace, cut_net=cut_net,
                        user_namespace=bool(confinement.get("user_namespace")), drop_to=drop_to,
                        handed_file=drop_to is not None)
    if terminal:  # the console's PTY becomes the terminal of the session inside the sandbox
        command = on_terminal(command)
    if drop_to is not None:  # setpriv, still root, never sees the flight's environment
        return Launch(argv=[*enter, *argv, *before_drop(), "--", *drop_argv(drop_to),
                            *after_drop(command)],
                      env=runner_env(), cwd=workspace, handed=environment_file(out_env),
                      sourced=True)
    return Launch(argv=enter + argv + ["--args", str(HANDED_FD), "--", *command],
                  env=runner_env(), cwd=workspace, handed=handed_env(out_env))


def allowlist_entry(netns: str) -> list[str]:
    """What enters a flight's network namespace before the rest of its launch starts:
    util-linux's nsenter from the system directories (run by the runner: root)."""
    for folder in SETPRIV_DIRS:
        path = os.path.join(folder, "nsenter")
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return [path, f"--net={netns}", "--"]
    raise IsolationUnavailable("egress allowlist needs util-linux (nsenter)")


def _gvisor(command: list[str], capabilities: Mapping[str, Any], workspace: Path,
            env: dict[str, str], cut_net: bool, state_dir: Path | None, hidden: Iterable[Path],
            drop_to: Identity | None, name: str | None, limits: Mapping[str, Any] | None,
            unoffered: bool) -> Launch:
    """The flight under runsc, from a bundle of the sandbox's layout (gg.runner.gvisor)."""
    if unoffered:
        raise IsolationUnavailable("a console or socket activation is not offered under gvisor")
    image_root = os.environ.get("GG_IMAGE_ROOT")
    plan = layout(workspace, hidden=[*([state_dir] if state_dir else []), *hidden],
                  read_write=[Path(image_root)] if image_root else [])
    env["HOME"] = str(workspace)
    env["TMPDIR"] = "/tmp"
    env.setdefault("PATH", os.environ.get("PATH", "/usr/bin:/bin"))
    spec = gvisor.config(command, plan, workspace=workspace, env=env, identity=drop_to,
                         limits=limits, cut_net=cut_net)
    bundle = gvisor.write_bundle(environments_root(state_dir), spec, plan)
    runsc = gvisor.runsc_path(capabilities)
    root = gvisor.state_root(state_dir, bundle)
    name = gvisor.name_for(workspace, name)
    return Launch(argv=gvisor.argv(runsc, root=root, bundle=bundle, name=name, cut_net=cut_net),
                  env=runner_env(), cwd=workspace,
                  cleanup=gvisor.cleanup(runsc, root=root, name=name), private=bundle,
                  own_limits=gvisor.OWN_LIMITS)


def setpriv_path() -> str:
    """util-linux's setpriv, from the read-only system directories (bound in every sandbox);
    IsolationUnavailable when there is none: a root runner's flight cannot drop root."""
    for folder in SETPRIV_DIRS:
        path = os.path.join(folder, "setpriv")
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise IsolationUnavailable(f"{FLIGHTS_AS_ROOT}: setpriv (util-linux) is not installed")


def drop_argv(identity: Identity) -> list[str]:
    """What a command is started through to become ``identity``: uid and gid, no
    supplementary group, every capability set empty (bounding, inheritable, ambient; the
    permitted and effective go with root), no_new_privs, then exec."""
    return [setpriv_path(), f"--reuid={identity.uid}", f"--regid={identity.gid}",
            "--clear-groups", "--bounding-set=-all", "--inh-caps=-all", "--ambient-caps=-all",
            "--no-new-privs", "--"]


# A console's command runs first through this (standard library only, ``python -I -S``): its
# session (a new one, unless it leads one already) takes the PTY on fd 0 as its controlling
# terminal, then the command replaces it. Inside a sandbox that session is bubblewrap's new
# one (``--new-session``), inside the sandbox's pid namespace, so the shell's job control
# sees every process group it deals with; a ``TIOCSTI`` reaches only the console's own PTY.
# With ``--handed`` it takes the command's environment from fd HANDED_FD (bwrap's ``--args``
# form), so what starts it (nsenter, setpriv) runs with the runner's own.
TERMINAL_LEADER = ("import fcntl, os, sys, termios\n"
                   "env = None\n"
                   "if sys.argv[1] == '--handed':\n"
                   "    del sys.argv[1]\n"
                   "    data = chunk = b'-'\n"
                   "    while chunk:\n"
                   "        chunk = os.read(3, 65536)\n"
                   "        data += chunk\n"
                   "    os.close(3)\n"
                   "    items = [os.fsdecode(i) for i in data[1:].split(b'\\0')[1:-1]]\n"
                   "    env = {items[i + 1]: items[i + 2] for i in range(0, len(items) - 2, 3)}\n"
                   "try:\n    os.setsid()\nexcept OSError:\n    pass\n"
                   "fcntl.ioctl(0, termios.TIOCSCTTY, 0)\n"
                   "if env is None:\n    os.execvp(sys.argv[1], sys.argv[1:])\n"
                   "os.execvpe(sys.argv[1], sys.argv[1:], env)")


def on_terminal(command: list[str], *, handed: bool = False) -> list[str]:
    """``command`` run as the leader of a session whose terminal is its stdin (a PTY);
    ``handed``: with the environment read from fd HANDED_FD (``Launch.handed``)."""
    return [sys.executable, "-I", "-S", "-c", TERMINAL_LEADER, *(["--handed"] if handed else []),
            *command]


def build_argv(command: list[str], *, policy: Policy | Mapping[str, Any], workspace: Path,
               env: Mapping[str, str], state_dir: Path | None,
               capabilities: Mapping[str, Any], **options: Any) -> tuple[list[str], dict[str, str]]:
    """(argv, env) for callers that only need those two; run it with ``cwd=workspace``."""
    launch = build(command, policy=policy, workspace=workspace, env=env, state_dir=state_dir,
                   capabilities=capabilities, **options)
    return launch.argv, launch.env
