"""``isolation: gvisor``: a flight under gVisor's ``runsc``, from an OCI bundle the runner writes.

The flight's system calls are answered by gVisor's own kernel (the sentry), not the host's.
What it sees is the sandbox's allowlist layout (:func:`gg.runner.isolation.layout`), never the
host's root: the bundle's root is an empty directory holding only the system links
(``/bin -> usr/bin``), and the system, the Python gg runs on, gg itself and the runner's
``PATH`` are bound read-only, the workspace read-write; every gg tree that is visible is masked
by an empty read-only tmpfs and the files of ``/etc`` others may not read by ``/dev/null``;
the runner's state dir is not bound at all. (``runsc do`` binds the host's root read-only: a
flight could read every token through it, so gg never uses it.)

The process runs as the flight identity on a root runner (uid and gid, no other group), with
no capability and ``noNewPrivileges``, in its own pid, mount, ipc and uts namespaces (and
network, for egress ``none``). Egress ``none``: ``runsc --network=none``, only the sandbox's
loopback. Egress ``all``: ``--network=host``, gVisor passes the flight's sockets to the host's network (its
own netstack, ``--network=sandbox``, needs a network namespace with an interface and routes
made for it, which gg does not make).

Limits: ``runsc --ignore-cgroups`` leaves the sandbox's processes (the sentry, the gofer) in
the flight's cgroups, which the launcher made with its memory and CPU limits
(:mod:`gg.runner.cgroups`): what the flight uses is the sentry's, counted and capped there.
The flight's processes are not host processes, so ``pids`` is gVisor's own count instead
(``RLIMIT_NPROC`` of the flight's uid inside, which the sentry enforces), and the launcher's
cgroup gets no ``pids.max`` (it would starve the sentry of threads).

The flight's environment is in the bundle's ``config.json``, in a directory of the runner's
only it may enter (the container level's, :func:`gg.runner.isolation.environments_root`), which
is removed once the flight ended (``Launch.discard``). ``runsc`` runs with the runner's own
environment, like bubblewrap. ``--host-uds=open`` lets the flight connect to a Unix socket
bound into it: its identity tokens' socket in the workspace (gg.runner.id_tokens).

Debian's runsc 20221219 answers ``statx`` with the flag ``AT_NO_AUTOMOUNT`` with EINVAL, which
coreutils' ``ls -l`` and ``stat`` pass: both fail on every file (``ls`` without ``-l``,
``find -ls``, a shell's ``test``, Python's ``os.stat`` work). Its OCI seccomp support returns
only EPERM, not the ENOSYS that would make glibc fall back, so it cannot be helped there; a
newer runsc accepts the flag.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gg.runner.flight_identity import Identity

RUNSC_DIR = "runsc"  # under the runner's state dir: runsc's own state (--root)
BUNDLE_PREFIX = "gg-gvisor-"
# The limits a gVisor flight enforces itself; the launcher's cgroups take the others.
OWN_LIMITS = ("pids",)
NAMESPACES = ("pid", "mount", "ipc", "uts")  # and "network" for egress none
CAPABILITY_SETS = ("bounding", "effective", "inheritable", "permitted", "ambient")
MASK_OPTIONS = ["ro", "nosuid", "nodev", "noexec", "mode=0755"]


def runsc_path(capabilities: Mapping[str, Any]) -> str:
    return str((capabilities.get("gvisor") or {}).get("path") or "runsc")


def state_root(state_dir: Path | None, bundle: Path) -> Path:
    """runsc's state (``--root``): under the runner's state dir (hidden from every flight),
    else beside the bundle."""
    root = (state_dir / RUNSC_DIR) if state_dir is not None else bundle.parent / RUNSC_DIR
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    return root


def _bind(src: Path, dest: Path, *, writable: bool) -> dict[str, Any]:
    return {"destination": str(dest), "type": "bind", "source": str(src),
            "options": ["rbind", "rw" if writable else "ro", "nosuid", "nodev"]}


def mounts(plan: Any) -> list[dict[str, Any]]:
    """The layout as OCI mounts, outer paths before inner ones (a workspace inside a masked
    state dir after the mask; a mask inside a bound directory after the bind)."""
    ordered: list[tuple[int, int, dict[str, Any]]] = []
    for src, dest in plan.read_only:
        ordered.append((len(dest.parts), 0, _bind(src, dest, writable=False)))
    for src, dest in plan.read_write:
        ordered.append((len(dest.parts), 0, _bind(src, dest, writable=True)))
    for mask in plan.masks:
        ordered.append((len(mask.parts), 1, {"destination": str(mask), "type": "tmpfs",
                                             "source": "tmpfs", "options": MASK_OPTIONS}))
    for blank in plan.blanks:
        ordered.append((len(blank.parts), 1, _bind(Path("/dev/null"), blank, writable=False)))
    fixed: list[dict[str, Any]] = [{"destination": "/proc", "type": "proc", "source": "proc"},
                                   {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
                                    "options": ["nosuid", "strictatime", "mode=755"]},
                                   {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs",
                                    "options": ["nosuid", "nodev", "mode=1777"]}]
    return fixed + [m for _, _, m in sorted(ordered, key=lambda m: (m[0], m[1]))]


def config(command: list[str], plan: Any, *, workspace: Path, env: Mapping[str, str],
           identity: Identity | None, limits: Mapping[str, Any] | None,
           cut_net: bool) -> dict[str, Any]:
    """The bundle's ``config.json``: the flight's process, its root and mounts; a network
    namespace of its own only when egress is cut (``--network=host`` passes its sockets to
    the runner's own, which a namespace of its own would hide)."""
    uid, gid = (identity.uid, identity.gid) if identity is not None else (os.getuid(),
                                                                          os.getgid())
    rlimits = [{"type": "RLIMIT_NOFILE", "hard": 65536, "soft": 65536}]
    pids = (limits or {}).get("pids")
    if pids is not None:
        pids = int(pids)
        rlimits.append({"type": "RLIMIT_NPROC", "hard": pids, "soft": pids})
    return {
        "ociVersion": "1.0.0",
        "process": {
            "terminal": False,
            "user": {"uid": uid, "gid": gid},
            "args": list(command),
            "env": [f"{k}={v}" for k, v in env.items() if "=" not in k and "\0" not in k + v],
            "cwd": str(workspace),
            "capabilities": {name: [] for name in CAPABILITY_SETS},
            "noNewPrivileges": True,
            "rlimits": rlimits,
        },
        "root": {"path": "rootfs", "readonly": True},
        "hostname": "gg",
        "mounts": mounts(plan),
        "linux": {"namespaces": [{"type": name} for name in
                                 (*NAMESPACES, *(["network"] if cut_net else []))]},
    }


def write_bundle(parent: Path | None, spec: Mapping[str, Any], plan: Any) -> Path:
    """A bundle directory only the runner may enter (0700): ``config.json`` (0600: the
    flight's environment is in it) and ``rootfs``, empty but for the system links."""
    if parent is not None:
        parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    bundle = Path(tempfile.mkdtemp(prefix=BUNDLE_PREFIX, dir=parent))
    rootfs = bundle / "rootfs"
    rootfs.mkdir(mode=0o755)
    os.chmod(rootfs, 0o755)
    for target, path in plan.links:
        link = rootfs / Path(path).relative_to("/")
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, link)
    fd = os.open(bundle / "config.json", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(spec, fh)
    return bundle


def argv(runsc: str, *, root: Path, bundle: Path, name: str, cut_net: bool) -> list[str]:
    return [runsc, "--root", str(root), "--rootless=false", "--ignore-cgroups",
            "--host-uds=open", f"--network={'none' if cut_net else 'host'}", "run", "--bundle", str(bundle), name]


def cleanup(runsc: str, *, root: Path, name: str) -> list[str]:
    """Stops and removes the sandbox (killing runsc's client does not); again: nothing."""
    return [runsc, "--root", str(root), "delete", "--force", name]


def name_for(workspace: Path, given: str | None) -> str:
    return given or f"gg-{workspace.name[:40]}-{secrets.token_hex(4)}"


def discard(bundle: Path) -> None:
    shutil.rmtree(bundle, ignore_errors=True)
