"""A real podman for the tests, run as root, offline.

No image registry is reachable from CI, so the image is made here: a tarball holding a static
busybox (Debian's ``busybox-static``) and a few of its applets, imported with ``podman
import``. The tarball is the same bytes every time (fixed times and owners), and the image is
named by their digest (``localhost/gg-test-busybox:<digest>``): a session imports it once, the
next one finds it, and a changed tarball gets a new name, never a stale image.

The engine's settings for this host go through ``CONTAINERS_CONF`` in the environment of what
runs podman (a runner, its launcher): no file of the host is changed. They are:

- ``default_ulimits = []``: podman otherwise raises ``RLIMIT_NOFILE`` and ``RLIMIT_NPROC`` to
  its defaults, which a root without ``CAP_SYS_RESOURCE`` (as in some CI sandboxes) may not do;
- ``runtime = "runc"`` where runc is installed: crun refuses a host whose cgroups are hybrid
  while the cgroup v2 root still lists a controller (``cgroups in hybrid mode not supported,
  drop all controllers from cgroupv2``), and moving that controller to v1 is a mount that
  podman's own cgroups then keep alive after it is unmounted.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

BUSYBOX = Path("/bin/busybox")
APPLETS = ("sh", "echo", "cat", "env", "true", "id", "ls", "grep", "sleep", "head", "wc",
           "pwd", "wget", "mkdir", "rm")
CONTAINERS_CONF = '[containers]\ndefault_ulimits = []\n'
RUNC = '[engine]\nruntime = "runc"\n'
NAME = "localhost/gg-test-busybox"
LOCK = Path("/tmp/gg-test-busybox.lock")  # two test workers import it once between them


def podman(*args: str, env: dict[str, str] | None = None,
           timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})})


def tarball() -> bytes:
    """A root file system of a static busybox and its applets, the same bytes every time."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        def entry(name: str, **kw) -> tarfile.TarInfo:
            info = tarfile.TarInfo(name)
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "root", "root"
            for key, value in kw.items():
                setattr(info, key, value)
            return info
        for name, mode in (("bin", 0o755), ("tmp", 0o1777), ("workspace", 0o755)):
            tar.addfile(entry(name, type=tarfile.DIRTYPE, mode=mode))
        data = BUSYBOX.read_bytes()
        tar.addfile(entry("bin/busybox", size=len(data), mode=0o755), io.BytesIO(data))
        for applet in APPLETS:
            tar.addfile(entry(f"bin/{applet}", type=tarfile.SYMTYPE, linkname="busybox"))
    return out.getvalue()


def engine_env(folder: Path) -> dict[str, str]:
    """What a process running podman on this host is given (the runner's own environment)."""
    conf = folder / "containers.conf"
    conf.write_text(CONTAINERS_CONF + (RUNC if shutil.which("runc") else ""))
    return {"CONTAINERS_CONF": str(conf)}


def busybox_image(folder: Path, env: dict[str, str]) -> str:
    """The test image's reference, imported unless an earlier session did; skips the test
    where podman, a static busybox or root is missing, or podman cannot run it here."""
    if os.geteuid() != 0 or shutil.which("podman") is None:
        pytest.skip("needs podman, run as root (.ci/run installs it)")
    if not BUSYBOX.is_file():
        pytest.skip("needs a static busybox for the image (busybox-static)")
    data = tarball()
    image = f"{NAME}:{hashlib.sha256(data).hexdigest()[:16]}"
    with open(LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if podman("image", "exists", image, env=env).returncode != 0:
            path = folder / "busybox.tar"
            path.write_bytes(data)
            imported = podman("import", str(path), image, env=env)
            assert imported.returncode == 0, imported.stderr
    probe = podman("run", "--rm", "--network", "none", image, "/bin/true", env=env)
    if probe.returncode != 0:  # a busybox that is not static cannot run without a C library
        pytest.skip("podman cannot run a container here: "
                    + (probe.stderr.strip().splitlines() or ["no reason given"])[-1])
    return image


def containers_named(prefix: str, env: dict[str, str] | None = None) -> list[str]:
    """Every container (running or not) whose name starts with ``prefix``."""
    listed = podman("ps", "--all", "--format", "{{.Names}}", env=env)
    assert listed.returncode == 0, listed.stderr
    return [n for n in listed.stdout.split() if n.startswith(prefix)]


def container_images(prefix: str, env: dict[str, str] | None = None) -> list[str]:
    """The image each container (running or not) whose name starts with ``prefix`` was
    started from, as the engine was told it."""
    listed = podman("ps", "--all", "--format", "{{.Names}} {{.Image}}", env=env)
    assert listed.returncode == 0, listed.stderr
    return [line.split()[1] for line in listed.stdout.splitlines()
            if line.split() and line.split()[0].startswith(prefix)]
