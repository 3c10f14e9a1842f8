"""A real container engine (podman, run by a root runner): the flight's environment reaches
the container's command, never the engine's client (docs/isolation.md, "isolation: container").

The image is made here, offline: a tarball holding a static busybox, imported with
``podman import`` (and removed again when this module made it). Skipped where podman or
busybox is not installed, or podman cannot run a container on this machine (a busybox that is
not static cannot run in an image that holds no C library).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from egress_support import Hosts

from gg.runner import egress
from gg.runner.isolation import build

from support import flight_workspace, marking_library, run_launch, wait_until

# One per test worker: a worker removes the image it made when its tests end.
IMAGE = f"localhost/gg-test-busybox-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}:1"
BUSYBOX = Path("/bin/busybox")
APPLETS = ("sh", "echo", "cat", "env", "true")
# What this engine is told through the runner's own environment (CONTAINERS_CONF): runc,
# where crun refuses a host whose cgroups are in hybrid mode, and resource limits below the
# runner's own (podman raises them to its defaults otherwise, which a root without
# CAP_SYS_RESOURCE, as in some CI sandboxes, may not do).
CONTAINERS_CONF = """[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]
"""
RUNC = """[engine]
runtime = "runc"
"""


def _podman(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def _image(folder: Path) -> Path:
    """A tarball of a root file system holding a static busybox and a few of its applets."""
    tarball = folder / "busybox.tar"
    with tarfile.open(tarball, "w") as tar:
        for name in ("bin", "tmp", "workspace"):
            entry = tarfile.TarInfo(name)
            entry.type, entry.mode = tarfile.DIRTYPE, 0o1777 if name == "tmp" else 0o755
            tar.addfile(entry)
        tar.add(BUSYBOX, arcname="bin/busybox")
        for applet in APPLETS:
            entry = tarfile.TarInfo(f"bin/{applet}")
            entry.type, entry.linkname = tarfile.SYMTYPE, "busybox"
            tar.addfile(entry)
    return tarball


@pytest.fixture(scope="module")
def podman(tmp_path_factory):
    """The engine, set up for this machine through the runner's environment; the image."""
    if os.geteuid() != 0 or shutil.which("podman") is None:
        pytest.skip("needs podman, run as root (.ci/run installs it)")
    if not BUSYBOX.is_file():  # a dynamic one makes an image that cannot run: skipped below
        pytest.skip("needs a static busybox for the image (busybox-static)")
    folder = tmp_path_factory.mktemp("podman")
    conf = folder / "containers.conf"
    conf.write_text(CONTAINERS_CONF + (RUNC if shutil.which("runc") else ""))
    with pytest.MonkeyPatch.context() as env:
        env.setenv("CONTAINERS_CONF", str(conf))  # the runner's own environment
        made = _podman("image", "exists", IMAGE).returncode != 0
        if made:
            imported = _podman("import", str(_image(folder)), IMAGE)
            assert imported.returncode == 0, imported.stderr
        try:
            probe = _podman("run", "--rm", "--network", "none", IMAGE, "/bin/true")
            if probe.returncode != 0:
                pytest.skip("podman cannot run a container here: "
                            + (probe.stderr.strip().splitlines() or ["no reason given"])[-1])
            yield "podman"
        finally:
            if made:
                _podman("rmi", "--force", IMAGE)


def test_a_flights_ld_preload_reaches_the_containers_command_and_never_the_engine_client(
        podman, tmp_path):
    built = marking_library(tmp_path)
    if built is None:
        pytest.skip("no C compiler to build the marking library")
    library, marks = built
    workspace = flight_workspace(tmp_path / "workspace")
    env = {"PATH": "/usr/bin:/bin", "LD_PRELOAD": str(library), "NOTE": "a=b # c\nd 'e'"}
    launch = build(["/bin/sh", "-c", 'echo "$LD_PRELOAD"; echo "$NOTE"'],
                   policy={"isolation": "container", "egress": "none"}, workspace=workspace,
                   env=env, state_dir=tmp_path / "state",
                   capabilities={"container_engine": podman, "bwrap": None,
                                 "bwrap_usable": False, "netns": False},
                   image=IMAGE, container_name=f"gg-test-{secrets.token_hex(4)}")
    try:
        done = run_launch(launch, capture_output=True, text=True, timeout=120)
    finally:
        launch.discard()
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{library}\na=b # c\nd 'e'\n"  # the command got them, as they were
    assert sorted(p.name for p in marks.iterdir()) == []  # podman (host root) never loaded it
    assert not launch.private.exists()


# A stand-in for the runner (the same runner-side code, in a process of its own): it starts
# the container through its launcher, waits until the container's command runs, gives the
# launcher a kill deadline of now, and freezes itself, as a SIGSTOPped runner would be.
FROZEN_RUNNER = """
import json, os, signal, sys, time
from gg.runner.launching import LAUNCHER, PIPE
launch = json.loads(open(sys.argv[1]).read())
proc = LAUNCHER.start(launch["argv"], env=launch["env"], cwd=launch["cwd"], stdout=PIPE,
                      handed=None, cleanup=launch["cleanup"])
print(proc.stdout.readline().decode().strip(), flush=True)
proc.watch(time.monotonic())
os.kill(os.getpid(), signal.SIGSTOP)
"""


def _running(name: str) -> bool:
    return name in _podman("ps", "--format", "{{.Names}}").stdout.split()


def test_a_frozen_runners_launcher_removes_its_flights_container_at_the_kill_deadline(
        podman, tmp_path):
    """The container lives in the engine's cgroups, outside the flight's tree: killing its
    client leaves it running. The launcher runs the launch's cleanup itself."""
    name = f"gg-test-{secrets.token_hex(4)}"
    launch = build(["/bin/sh", "-c", "echo up; while true; do sleep 1; done"],
                   policy={"isolation": "container", "egress": "none"},
                   workspace=flight_workspace(tmp_path / "workspace"),
                   env={"PATH": "/usr/bin:/bin"}, state_dir=tmp_path / "state",
                   capabilities={"container_engine": podman, "bwrap": None,
                                 "bwrap_usable": False, "netns": False},
                   image=IMAGE, container_name=name)
    given = tmp_path / "launch.json"
    given.write_text(json.dumps({"argv": launch.argv, "env": launch.env,
                                 "cwd": str(launch.cwd), "cleanup": launch.cleanup}))
    runner = subprocess.Popen([sys.executable, "-c", FROZEN_RUNNER, str(given)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert runner.stdout.readline().strip() == "up"
        wait_until(lambda: runner.poll() is None and _state(runner.pid) == "T",
                   what="the runner to be frozen")
        wait_until(lambda: not _running(name), timeout=60,
                   what="the launcher to remove the container")
        assert _state(runner.pid) == "T"  # the runner had no part in it
    finally:
        runner.send_signal(signal.SIGCONT)
        runner.kill()
        runner.wait()
        _podman("rm", "--force", "--time", "0", name)
        launch.discard()


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(")", 1)[1].split()[0]


def test_a_container_under_an_egress_allowlist_reaches_only_the_listed_address_and_port(
        podman, tmp_path):
    if egress.probe() is not None:
        pytest.skip(f"egress allowlist needs {egress.probe()}")
    hosts, links = Hosts(), egress.Links(tmp_path / "state")
    tries = "".join(
        f"/bin/busybox nc -w 5 {where} {port} </dev/null >/dev/null 2>&1 "
        f"&& echo {name}:{port} reached || echo {name}:{port} refused; "
        for name, where, port in (("A", "198.18.1.2", 8001), ("A", "198.18.1.2", 8002),
                                  ("B", "198.18.2.2", 8001)))
    try:
        hosts.start()
        network = links.open(["198.18.1.2:8001"])
        launch = build(["/bin/sh", "-c", tries],
                       policy={"isolation": "container", "egress": "allowlist",
                               "allow": ["198.18.1.2:8001"]},
                       workspace=flight_workspace(tmp_path / "workspace"),
                       env={"PATH": "/bin"}, state_dir=tmp_path / "state",
                       capabilities={"container_engine": podman, "bwrap": None,
                                     "bwrap_usable": False, "netns": False,
                                     "egress_controls": ["all", "allowlist"]},
                       image=IMAGE, container_name=f"gg-test-{secrets.token_hex(4)}",
                       netns=network.path)
        assert f"ns:{network.path}" in launch.argv
        try:
            done = run_launch(launch, capture_output=True, text=True, timeout=120)
        finally:
            launch.discard()
        network.close()
    finally:
        hosts.stop()
        egress.clear(tmp_path / "state")
    assert done.stdout.split("\n")[:3] == ["A:8001 reached", "A:8002 refused",
                                           "B:8001 refused"], done.stdout + done.stderr
