"""A real container engine (podman, run by a root runner): the flight's environment reaches
the container's command, never the engine's client (docs/isolation.md, "isolation: container").

The image is made offline from a static busybox and kept by its digest, the engine's settings
for this host go in the runner's own environment (tests/podman_support.py). Skipped where
podman or busybox is not installed, or podman cannot run a container on this machine.
"""

from __future__ import annotations

import json
import secrets
import signal
import subprocess
import sys

import pytest
from egress_support import Hosts

from gg.runner import egress
from gg.runner.isolation import build

from podman_support import busybox_image, engine_env
from podman_support import podman as _podman
from support import flight_workspace, marking_library, run_launch, wait_until


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    """The image podman runs here, the engine set up for this machine through the runner's
    own environment."""
    folder = tmp_path_factory.mktemp("podman")
    env = engine_env(folder)
    with pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        yield busybox_image(folder, env)


def test_a_flights_ld_preload_reaches_the_containers_command_and_never_the_engine_client(
        image, tmp_path):
    built = marking_library(tmp_path)
    if built is None:
        pytest.skip("no C compiler to build the marking library")
    library, marks = built
    workspace = flight_workspace(tmp_path / "workspace")
    env = {"PATH": "/usr/bin:/bin", "LD_PRELOAD": str(library), "NOTE": "a=b # c\nd 'e'"}
    launch = build(["/bin/sh", "-c", 'echo "$LD_PRELOAD"; echo "$NOTE"'],
                   policy={"isolation": "container", "egress": "none"}, workspace=workspace,
                   env=env, state_dir=tmp_path / "state",
                   capabilities={"container_engine": "podman", "bwrap": None,
                                 "bwrap_usable": False, "netns": False},
                   image=image, container_name=f"gg-test-{secrets.token_hex(4)}")
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
        image, tmp_path):
    """The container lives in the engine's cgroups, outside the flight's tree: killing its
    client leaves it running. The launcher runs the launch's cleanup itself."""
    name = f"gg-test-{secrets.token_hex(4)}"
    launch = build(["/bin/sh", "-c", "echo up; while true; do sleep 1; done"],
                   policy={"isolation": "container", "egress": "none"},
                   workspace=flight_workspace(tmp_path / "workspace"),
                   env={"PATH": "/usr/bin:/bin"}, state_dir=tmp_path / "state",
                   capabilities={"container_engine": "podman", "bwrap": None,
                                 "bwrap_usable": False, "netns": False},
                   image=image, container_name=name)
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
        image, tmp_path):
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
                       capabilities={"container_engine": "podman", "bwrap": None,
                                     "bwrap_usable": False, "netns": False,
                                     "egress_controls": ["all", "allowlist"]},
                       image=image, container_name=f"gg-test-{secrets.token_hex(4)}",
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
