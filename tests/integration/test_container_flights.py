"""Flights under ``isolation: container`` on a real podman (docs/isolation.md): a real control
plane, real root runners over loopback, the real CLI, and the image their policy names.

One fleet serves every test here (a server start is the suite's dearest thing): runner ``open``
(container, egress all, advertising environment ``boxed``) and runner ``closed`` (container,
egress none), both given the image by ``gg runner policy --image``. The image is a static
busybox made offline and the engine's settings for this host go in the runners' environment
(tests/podman_support.py).
"""

from __future__ import annotations

import json
import secrets

import pytest

from gg.api import placement as paths

from podman_support import busybox_image, container_images, containers_named, engine_env, podman
from support import FAST, Fleet, wait_until

ENDED = ("landed", "failed", "cancelled")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    root = tmp_path_factory.mktemp("containers")
    env = engine_env(root)
    image = busybox_image(root, env)
    f = Fleet(root / "fleet", {**FAST, **env}).start()
    try:
        runners = (("open", "all"), ("closed", "none"))
        for name, _ in runners:
            f.runner(name, labels="environment=boxed" if name == "open" else None, workers=2)
        f.wait_online(*(name for name, _ in runners))
        for name, egress in runners:
            set_policy = f.gg("runner", "policy", name, "--isolation", "container",
                              "--egress", egress, "--image", image)
            assert set_policy.returncode == 0, set_policy.stderr
            assert f"image {image}" in set_policy.stdout
        wait_until(lambda: all((f.runner_row(n) or {}).get("health") == "ok"
                               for n in ("open", "closed")), timeout=60,
                   what="both runners to apply the container policy")
        f.image = image  # type: ignore[attr-defined]
        f.engine_env = env  # type: ignore[attr-defined]
        yield f
    finally:
        f.stop()


def _fly(fleet, runner: str, command: str, *args: str) -> str:
    opened = fleet.gg("fly", "--json", "--runner", runner, *args, "--", command)
    assert opened.returncode == 0, opened.stderr
    return json.loads(opened.stdout)["id"]


def _ended(fleet, flight_id: str, timeout: float = 90) -> dict:
    return wait_until(lambda: (lambda d: d if d["stage"] in ENDED else None)(
        fleet.api().flight(flight_id)), timeout=timeout, what=f"{flight_id} to end")


def _output(flight: dict) -> str:
    return "".join(f["body"].get("text", "") for f in flight["facts"] if f["kind"] == "output")


def _status(text: str) -> dict[str, str]:
    """``/proc/self/status`` lines, by key."""
    return {k.strip(): v.strip() for k, _, v in
            (line.partition(":") for line in text.splitlines()) if v}


def test_a_container_flight_lands_from_the_policys_image_with_its_workspace_at_slash_workspace(
        fleet):
    flight_id = _fly(fleet, "open", "pwd; echo made > made.txt; cat /workspace/made.txt; "
                                    "ls /bin/busybox")
    done = _ended(fleet, flight_id)
    assert (done["stage"], done["exit_code"]) == ("landed", 0), _output(done)
    assert _output(done).split() == ["/workspace", "made", "/bin/busybox"]
    # kept until the runner read how it ended, then removed
    wait_until(lambda: containers_named(f"gg-{flight_id}-", fleet.engine_env) == [],
               what="the landed flight's container to be removed")


def test_a_container_flight_runs_as_its_flight_identity_with_no_capabilities(fleet):
    flight_id = _fly(fleet, "open", "cat /proc/self/status; echo uid=$(id -u) gid=$(id -g); "
                                    "ls -ldn /workspace")
    done = _ended(fleet, flight_id)
    assert done["stage"] == "landed", _output(done)
    out = _output(done)
    status = _status(out)
    uid = status["Uid"].split()
    assert len(set(uid)) == 1 and int(uid[0]) != 0
    assert status["Gid"].split()[0] == uid[0]
    assert set(status["Groups"].split()) <= {uid[0]}  # no group but its own (podman lists it)
    for key in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(status[key], 16) == 0, key
    assert status["NoNewPrivs"] == "1"
    assert f"uid={uid[0]} gid={uid[0]}" in out
    assert f" {uid[0]} {uid[0]} " in out.splitlines()[-1]  # the workspace is the flight's


def test_a_container_flight_cannot_reach_the_runners_state_nor_its_credential(fleet):
    state = fleet.root / "state-open"
    token = json.loads((state / "runner.json").read_text())["credential"]
    flight_id = _fly(fleet, "open", f"ls {state} || echo no-state; "
                                    f"cat {state}/runner.json || echo no-credential; env")
    done = _ended(fleet, flight_id)
    out = _output(done)
    assert "no-state" in out and "no-credential" in out
    assert token not in out
    assert "key.pem" not in out


def test_egress_none_leaves_a_container_flight_only_its_loopback(fleet):
    closed = _ended(fleet, _fly(fleet, "closed", "cat /proc/net/dev"))
    opened = _ended(fleet, _fly(fleet, "open", "cat /proc/net/dev"))
    interfaces = [line.split(":")[0].strip() for line in _output(closed).splitlines()
                  if ":" in line and "|" not in line]
    assert interfaces == ["lo"], _output(closed)
    assert "eth0" in _output(opened)  # the engine's network where egress is not cut


def test_a_container_flight_over_its_memory_fails_killed_out_of_memory(fleet):
    flight_id = _fly(fleet, "open", "x=aaaaaaaa; while true; do x=$x$x; done; echo not-killed",
                     "--memory", "256M")
    done = _ended(fleet, flight_id)
    assert (done["stage"], done["ended_reason"]) == ("failed", "killed: out of memory (limit 256M)")
    assert "not-killed" not in _output(done)
    wait_until(lambda: containers_named(f"gg-{flight_id}-", fleet.engine_env) == [],
               what="the killed flight's container to be removed")


def test_cancelling_a_container_flight_removes_its_container(fleet):
    flight_id = _fly(fleet, "closed", "echo up; while true; do sleep 1; done")
    wait_until(lambda: "up" in _output(fleet.api().flight(flight_id)),
               what="the flight to run in its container")
    assert len(containers_named(f"gg-{flight_id}-", fleet.engine_env)) == 1
    cancelled = fleet.gg("cancel", flight_id)
    assert cancelled.returncode == 0, cancelled.stderr
    assert _ended(fleet, flight_id)["stage"] == "cancelled"
    wait_until(lambda: containers_named(f"gg-{flight_id}-", fleet.engine_env) == [],
               timeout=60, what="the cancelled flight's container to be removed")


def test_a_container_flight_in_an_environment_runs_from_the_image_the_root_names_for_it(
        fleet, tmp_path):
    """The root envelope's images: comes before the runner's policy image: the same busybox
    tagged under a second name, which the engine is told for the flight in ``boxed``."""
    named = f"localhost/gg-test-env-{secrets.token_hex(4)}:{fleet.image.rsplit(':', 1)[1]}"
    tagged = podman("tag", fleet.image, named, env=fleet.engine_env)
    assert tagged.returncode == 0, tagged.stderr
    try:
        gate = fleet.api().request("POST", paths.ENVIRONMENTS,
                                   json={"name": "boxed", "means": 'os == "linux"'})["gate"]
        fleet.api().clear_gate(gate)
        (tmp_path / "root.yaml").write_text(f"environments: [boxed]\nimages:\n  boxed: {named}\n")
        applied = fleet.gg("airspace", "apply", "--airspace", str(tmp_path))
        assert applied.returncode == 0, applied.stderr
        assert f"images: boxed {named}" in fleet.gg("airspace", "show").stdout
        flight_id = _fly(fleet, "open", "echo up; while true; do sleep 1; done", "--env", "boxed")
        wait_until(lambda: "up" in _output(fleet.api().flight(flight_id)),
                   what="the flight to run in its container")
        assert container_images(f"gg-{flight_id}-", fleet.engine_env) == [named]
        assert fleet.gg("cancel", flight_id).returncode == 0
        assert _ended(fleet, flight_id)["stage"] == "cancelled"
        wait_until(lambda: containers_named(f"gg-{flight_id}-", fleet.engine_env) == [],
                   timeout=60, what="the cancelled flight's container to be removed")
    finally:
        podman("untag", fleet.image, named, env=fleet.engine_env)  # that name only
