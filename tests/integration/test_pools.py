"""Pools end to end: a real control plane, a real ``gg runner maintain`` process, real member
processes unpacked from a real image, and real flights."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from gg.launch import gg_argv, stop_process

from podman_support import containers_named, engine_env, podman
from support import FAST, Fleet, cli, wait_until

STRATEGY = """\
environment: ui
inventory: {{name: ui-pool, size: {size}, warm: {warm}}}
image: {{ref: ui-image}}
bounds: {{pool-max: {pool_max}}}
build: {{context: {context}}}
driver: {driver}
"""


class Pool:
    """A fleet with strategy ``ui`` (pool ``ui-pool``) in force and built, and its maintainer."""

    def __init__(self, fleet, root: Path, driver: str = "process", name: str = "keeper"):
        self.fleet = fleet
        self.root = root
        self.driver = driver
        self.name = name  # the maintainer's; its state dir is its host
        self.built: list[str] = []  # the digests' hex built here
        self.context = root / "image"
        self.state = root / name
        self.proc: subprocess.Popen | None = None

    def apply(self, size: int, warm: int, pool_max: int) -> None:
        """Apply with the CLI, clear its gate, and build the image on this host."""
        self.context.mkdir(exist_ok=True)
        (self.context / "hello.txt").write_text("hello from the image\n")
        path = self.root / "ui.yaml"
        path.write_text(STRATEGY.format(size=size, warm=warm, pool_max=pool_max,
                                        context=self.context, driver=self.driver))
        self.fleet.chart("ui")  # flights may use environment ui
        applied = self.gg("strategy", "apply", "ui", str(path), "--json")
        self.fleet.api().clear_gate(applied["gate"]["id"])
        self.build()

    def widen(self, size: int, warm: int, pool_max: int) -> None:
        """Apply more machines over the API; it waits for a gate, which an admin clears."""
        mapping = {"environment": "ui", "inventory": {"name": "ui-pool", "size": size,
                                                      "warm": warm},
                   "image": {"ref": "ui-image"}, "bounds": {"pool-max": pool_max}}
        applied = self.fleet.api().apply_strategy("ui", mapping)
        assert applied["status"] == "gated"
        self.fleet.api().clear_gate(applied["gate"]["id"])

    def build(self) -> str:
        digest = self.gg("strategy", "build", "ui", "--base", str(self.root), "--json")["digest"]
        self.built.append(digest.removeprefix("sha256:"))
        return digest

    def gg(self, *args: str):
        code, out, err = cli(self.fleet, *args)
        assert code == 0, err
        return json.loads(out) if "--json" in args else out

    def maintain(self, *extra: str, env: dict[str, str] | None = None) -> subprocess.Popen:
        env = {**os.environ, **self.fleet.env, "GG_CONFIG_DIR": str(self.fleet.config_dir),
               "GG_STATE_DIR": str(self.state), **(env or {})}
        with open(self.root / f"{self.name}.log", "ab") as log:
            self.proc = subprocess.Popen(
                gg_argv("--server", self.fleet.url, "runner", "maintain", "ui-pool", "--name",
                        self.name, *extra), env=env, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True)
        return self.proc

    def ready(self, count: int) -> list[dict] | None:
        """The ready members, once there are ``count`` of them."""
        members = self.members("ready")
        return members if len(members) == count else None

    def row(self) -> dict:
        return self.fleet.api().pool("ui-pool")

    def members(self, state: str | None = None) -> list[dict]:
        return [m for m in self.row()["members"] if state is None or m["state"] == state]

    def member_pids(self) -> dict[str, int]:
        out = {}
        for info in (self.state / "members").glob("m_*/member.json"):
            out[info.parent.name] = json.loads(info.read_text())["pid"]
        return out

    def log(self) -> str:
        path = self.root / f"{self.name}.log"
        return path.read_text() if path.exists() else ""

    def stop(self) -> None:
        stop_process(self.proc, timeout=15)
        for pid in self.member_pids().values():  # members outlive their maintainer by design
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(pid, sig)
                except (ProcessLookupError, PermissionError):
                    break
                if _gone(pid, 5.0):
                    break


def _gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return True
        if stat.rpartition(")")[2].split()[0] in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def pool(tmp_path):
    fleet = Fleet(tmp_path, {**FAST, "GG_IMAGES_DIR": str(tmp_path / "images")}).start()
    p = Pool(fleet, tmp_path)
    try:
        yield p
    finally:
        p.stop()
        fleet.stop()


def allowed_maintainer(pool: Pool) -> None:
    """The maintainer refuses to start until an admin allows it; then it runs."""
    refused = pool.maintain()
    assert refused.wait(timeout=60) == 4  # Exit.FORBIDDEN
    assert "may not maintain pool ui-pool" in pool.log()
    assert "gg pool allow ui-pool keeper" in pool.log()
    pool.fleet.api().allow_maintainer("ui-pool", "keeper")
    pool.maintain()


def landed(api, flight_id: str):
    shown = api.flight(flight_id)
    return shown if shown["stage"] == "landed" else None


def output_of(flight: dict) -> str:
    return "".join(f["body"]["text"] for f in flight["facts"] if f["kind"] == "output")


def test_a_pool_serves_flights_from_its_image_resets_members_and_keeps_its_bounds(pool):
    pool.apply(size=1, warm=1, pool_max=1)
    allowed_maintainer(pool)
    api = pool.fleet.api()
    first = api.open_flight({"environment": "ui", "command": [
        ('cat "$GG_IMAGE_ROOT/hello.txt"; echo left > "$GG_IMAGE_ROOT/left-behind"; '
         'ls "$GG_IMAGE_ROOT"')]})
    shown = wait_until(lambda: landed(api, first["id"]), timeout=45, what="the first flight")
    assert output_of(shown) == "hello from the image\nhello.txt\nleft-behind\n"
    clean = 'ls "$GG_IMAGE_ROOT"; test ! -e "$GG_IMAGE_ROOT/left-behind"'
    second = api.open_flight({"environment": "ui", "command": [clean]})
    again = wait_until(lambda: landed(api, second["id"]), timeout=45, what="the second flight")
    assert output_of(again) == "hello.txt\n"
    assert again["runner"] == shown["runner"]  # the one member, reset in between
    assert wait_until(pool.members, what="the member")[0]["resets"] >= 1

    pool.widen(size=3, warm=1, pool_max=2)  # more machines: through the gate again
    ids = [api.open_flight({"command": [clean], "environment": "ui"})["id"] for _ in range(3)]
    most = 0

    def all_landed():
        nonlocal most
        most = max(most, sum(1 for m in pool.members() if m["state"] != "stopped"))
        return all(landed(api, i) for i in ids)

    wait_until(all_landed, timeout=75, interval=0.2, what="three flights to land on the pool")
    assert most == 2
    attested = api.events(kind="info:pool:attested", limit=1000)
    assert attested and all(e["body"]["live"] <= 2 for e in attested)
    assert all(output_of(api.flight(i)) == "hello.txt\n" for i in ids)
    wait_until(lambda: len(pool.members("ready")) >= 1, what="a warm member again")


def test_a_restarted_maintainer_adopts_its_members_and_a_new_digest_rolls_them(pool):
    pool.apply(size=2, warm=2, pool_max=2)
    allowed_maintainer(pool)
    before = wait_until(lambda: pool.ready(2), timeout=45, what="two warm members")
    pids = pool.member_pids()
    pool.proc.send_signal(signal.SIGKILL)
    pool.proc.wait()
    killed_at = time.time()
    pool.maintain()
    api = pool.fleet.api()

    def attested_since_the_restart():
        row = pool.row()
        return row if (row["last_attested_at"] or 0) > killed_at + 1.0 else None

    row = wait_until(attested_since_the_restart, timeout=30,
                     what="the restarted maintainer to attest")
    assert [e for e in api.events(kind="info:pool:attested", limit=1000)
            if e["at"] > killed_at] == []  # it did nothing, and the pool holds the same
    assert sorted(m["id"] for m in row["members"]) == sorted(m["id"] for m in before)
    assert all(m["state"] == "ready" for m in row["members"])
    assert pool.member_pids() == pids and all(not _gone(p, 0) for p in pids.values())

    (pool.context / "second.txt").write_text("a new layer\n")
    digest = pool.build()
    assert digest != before[0]["digest"]

    def rolled():
        ready = pool.ready(2)
        return ready if ready and all(m["digest"] == digest for m in ready) else None

    new = wait_until(rolled, timeout=60, what="both members on the new digest")
    assert not {m["id"] for m in new} & {m["id"] for m in before}
    did = [d for e in api.events(kind="info:pool:attested", limit=1000) for d in e["body"]["did"]]
    assert {f"roll {m['id']}" for m in before} <= {" ".join(d.split()[:2]) for d in did}
    flight = api.open_flight({"environment": "ui", "command": ['cat "$GG_IMAGE_ROOT/second.txt"']})
    shown = wait_until(lambda: landed(api, flight["id"]), timeout=30, what="a flight after")
    assert output_of(shown) == "a new layer\n"


@pytest.fixture
def container_pool(tmp_path):
    """The same pool with the podman driver, on the real engine (as root): the engine set up
    for this host through the maintainer's environment (tests/podman_support.py)."""
    if os.geteuid() != 0 or shutil.which("podman") is None:
        pytest.skip("needs podman, run as root (.ci/run installs it)")
    env = engine_env(tmp_path)
    fleet = Fleet(tmp_path, {**FAST, **env, "GG_IMAGES_DIR": str(tmp_path / "images")}).start()
    p = Pool(fleet, tmp_path, driver="podman")
    try:
        yield p
    finally:
        stop_process(p.proc, timeout=15)
        for name in containers_named("gg-ui-pool-", env):  # members outlive their maintainer
            podman("rm", "--force", "--time", "0", name, env=env)
        for image in podman("images", "--format", "{{.Repository}}:{{.Tag}}", env=env
                            ).stdout.split():
            if image.startswith("localhost/gg-pool-image:") and image.split(":")[1] in p.built:
                podman("rmi", "--force", image, env=env)
        fleet.stop()


def test_a_container_pool_member_runs_from_the_image_built_here_enrols_and_lands_a_flight(
        container_pool):
    pool = container_pool
    pool.apply(size=1, warm=1, pool_max=1)
    allowed_maintainer(pool)
    api = pool.fleet.api()
    flight = api.open_flight({"environment": "ui", "command": [
        'cat "$GG_IMAGE_ROOT/hello.txt"; test ! -e /etc/shadow && echo no-host-etc; '
        "tr '\\0' ' ' < /proc/1/cmdline"]})
    shown = wait_until(lambda: landed(api, flight["id"]), timeout=120,
                       what="the flight to land on the container member")
    said = output_of(shown).splitlines()
    assert said[:2] == ["hello from the image", "no-host-etc"]
    # in the member's container: its first process is the member's runner, the host's gg
    assert " -m gg --server " in said[2] and " runner up --once " in said[2], said
    members = {key: m for m in pool.members() for key in (m["runner_id"], m["name"]) if key}
    assert shown["runner"] in members  # a member of the pool flew it
    assert members[shown["runner"]]["digest"] == f"sha256:{pool.built[-1]}"


SCALED = """\
environment: ui
inventory: {{name: ui-pool, size: {max}}}
image: {{ref: ui-image}}
bounds: {{pool-max: {max}}}
build: {{context: {context}}}
scale: {{min: 0, max: {max}, idle-after: {idle_after}}}
"""


def test_a_scaled_pool_grows_from_a_burst_drains_it_and_shrinks_to_zero_when_idle(pool):
    pool.context.mkdir(exist_ok=True)
    (pool.context / "hello.txt").write_text("hello from the image\n")
    path = pool.root / "ui.yaml"
    path.write_text(SCALED.format(max=3, idle_after="2s", context=pool.context))
    pool.fleet.chart("ui")
    applied = pool.gg("strategy", "apply", "ui", str(path), "--json")
    api = pool.fleet.api()
    api.clear_gate(applied["gate"]["id"])
    pool.build()
    allowed_maintainer(pool)
    wait_until(lambda: pool.row()["last_attested_at"], timeout=30, what="a first attestation")
    assert pool.members() == [] and pool.row()["counts"]["desired"] == 0  # min 0: nothing idles

    ids = [api.open_flight({"environment": "ui", "command": ["sleep 1"]})["id"]
           for _ in range(6)]
    most = 0

    def all_landed():
        nonlocal most
        most = max(most, sum(1 for m in pool.members() if m["state"] != "stopped"))
        return all(landed(api, i) for i in ids)

    wait_until(all_landed, timeout=120, interval=0.2, what="six flights to land on the pool")
    assert most == 3
    scaled = [e["body"] for e in api.events(kind="info:pool:scaled", limit=1000)]
    assert any(e["reason"].startswith("scaled ui-pool from 0 to ")
               and "flights waiting" in e["reason"] for e in scaled)
    assert max(e["desired"] for e in scaled) == 3

    wait_until(lambda: pool.members() == [], timeout=60, interval=0.2,
               what="the pool to shrink to nothing once idle")
    shrunk = [e["body"]["reason"] for e in api.events(kind="info:pool:scaled", limit=1000)]
    assert any("idle for 2 s or more, no flight waiting" in r for r in shrunk)
    assert pool.row()["counts"] == {"desired": 0, "starting": 0, "warm": 0, "busy": 0}
    # Nothing was taken from a flight: every flight flew once, on its first lease.
    assert api.events(kind="info:flight:expired", limit=100) == []
    assert all(api.flight(i)["outcome"] == "landed" for i in ids)


def test_a_scaled_pool_member_killed_mid_flight_is_replaced_and_its_flight_flies_again(pool):
    pool.context.mkdir(exist_ok=True)
    (pool.context / "hello.txt").write_text("hello from the image\n")
    path = pool.root / "ui.yaml"
    path.write_text(SCALED.format(max=1, idle_after="60s", context=pool.context))
    pool.fleet.chart("ui")
    applied = pool.gg("strategy", "apply", "ui", str(path), "--json")
    api = pool.fleet.api()
    api.clear_gate(applied["gate"]["id"])
    pool.build()
    allowed_maintainer(pool)
    marker = pool.root / "attempts"
    flight = api.open_flight({"environment": "ui", "command": [
        f'echo x >> {marker}; if [ "$(wc -l < {marker})" -lt 2 ]; then sleep 60; fi']})

    def flying_member():
        busy = pool.members("busy")
        return busy[0] if busy and marker.exists() else None

    first = wait_until(flying_member, timeout=60, what="the flight to fly on a member")
    os.killpg(pool.member_pids()[first["id"]], signal.SIGKILL)
    shown = wait_until(lambda: landed(api, flight["id"]), timeout=90, interval=0.2,
                       what="the flight to land on the replacement")
    assert shown["attempt"] == 2
    assert len(api.events(kind="info:flight:expired", limit=100)) == 1  # offered again once
    assert marker.read_text() == "x\nx\n"
    # The killed member was brought up afresh (reset: a new process, key and image) or
    # replaced by a new one; the pool never grew beyond max 1 to do it.
    members = pool.members()
    assert len(members) <= 1
    assert not members or members[0]["id"] != first["id"] or members[0]["resets"] >= 1


def test_two_maintainers_on_two_hosts_share_one_pools_demand_and_one_takes_over_the_other(
        pool):
    """Two real maintainer processes (two state dirs: two hosts) serve one scaled pool: the
    demand is met once in total, split across both; one killed, the other takes its share."""
    pool.context.mkdir(exist_ok=True)
    (pool.context / "hello.txt").write_text("hello from the image\n")
    path = pool.root / "ui.yaml"
    path.write_text(SCALED.format(max=2, idle_after="300s", context=pool.context))
    pool.fleet.chart("ui")
    api = pool.fleet.api()
    api.clear_gate(pool.gg("strategy", "apply", "ui", str(path), "--json")["gate"]["id"])
    pool.build()
    other = Pool(pool.fleet, pool.root, name="keeper-b")
    try:
        for host in (pool, other):  # registered on its first start, refused until allowed
            assert host.maintain().wait(timeout=60) == 4
            api.allow_maintainer("ui-pool", host.name)
            host.maintain()

        def both_live():
            row = pool.row()
            return row if sorted(m["name"] for m in row["maintainers"] if m["online"]) == [
                "keeper", "keeper-b"] else None

        wait_until(both_live, timeout=60, what="both maintainers to check in")
        ids = [api.open_flight({"environment": "ui", "command": ["sleep 2"]})["id"]
               for _ in range(2)]
        most, owners = 0, set()

        def all_landed():
            nonlocal most
            members = pool.members()
            most = max(most, sum(1 for m in members if m["state"] != "stopped"))
            owners.update(m["maintainer_id"] for m in members)
            return all(landed(api, i) for i in ids)

        wait_until(all_landed, timeout=120, interval=0.2, what="two flights to land")
        assert most == 2  # met once in total: never a machine made twice
        row = pool.row()
        held = {m["name"]: len(m["members"]) for m in row["maintainers"]}
        assert held == {"keeper": 1, "keeper-b": 1} and len(owners) == 2
        listing = pool.gg("pools")
        assert "maintained by 2 hosts" in listing and "keeper-b (online)" in listing
        assert "keeper (online): " in listing

        pool.proc.send_signal(signal.SIGKILL)  # host a goes silent; its member runs on
        pool.proc.wait()
        b_id = next(m["id"] for m in row["maintainers"] if m["name"] == "keeper-b")

        def taken_over():
            members = pool.members()
            return members if len(members) == 2 and all(
                m["maintainer_id"] == b_id for m in members) else None

        wait_until(taken_over, timeout=120, interval=0.2, what="keeper-b to take over")
        flight = api.open_flight({"environment": "ui", "command": ["echo on b"]})
        shown = wait_until(lambda: landed(api, flight["id"]), timeout=60,
                           what="a flight on keeper-b's members")
        assert output_of(shown) == "on b\n"
        removed = [d for e in api.events(kind="info:pool:attested", limit=1000)
                   if e["body"].get("did") for d in e["body"]["did"]]
        assert any(d.startswith("remove ") for d in removed)
    finally:
        other.stop()


COMMANDS = Path(__file__).resolve().parent.parent / "pool" / "commands"
ON_HOSTS = f"""\
environment: ui
inventory: {{name: ui-pool, size: 2}}
image: {{ref: ui-image, digest: "sha256:{'c' * 64}"}}
driver: command
command: {{create: create-host, delete: delete-host, list: list-hosts, join-within: 15s}}
scale: {{min: 0, max: 2, idle-after: 2s}}
"""


def test_machines_on_other_hosts_come_from_the_strategys_commands_and_failures_back_off(
        tmp_path):
    """The command driver with the reference scripts: a create that fails is retried with
    backoff and gg pools reads why; a machine that never checks in before its member code
    expires is deleted, recorded, and replaced; then a machine enrols and flies."""
    fleet = Fleet(tmp_path, FAST).start()  # the strategy's join-within: 15s, not the TTL
    pool = Pool(fleet, tmp_path)
    hosts = tmp_path / "hosts"
    hosts.mkdir()
    try:
        path = tmp_path / "ui.yaml"
        path.write_text(ON_HOSTS)
        fleet.chart("ui")
        applied = pool.gg("strategy", "apply", "ui", str(path), "--json")
        api = fleet.api()
        api.clear_gate(applied["gate"]["id"])
        (hosts / "fail-create").write_text("no capacity in zone test-1\n")
        refused = pool.maintain("--commands", str(COMMANDS))
        assert refused.wait(timeout=60) == 4
        api.allow_maintainer("ui-pool", "keeper")
        pool.maintain("--commands", str(COMMANDS), env={"GG_TEST_HOSTS": str(hosts)})
        flight = api.open_flight({"environment": "ui", "command": ["echo on a host"]})

        def failing():
            backoff = (pool.row()["last_attestation"] or {}).get("backoff")
            return backoff if backoff and backoff["failures"] >= 2 else None

        backoff = wait_until(failing, timeout=60, what="a create failing twice")
        assert backoff["error"] == ("the create command failed (exit 1): no capacity in zone "
                                    "test-1")
        assert backoff["retry_in"] > 0.5  # it waits longer than the plain interval
        listing = pool.gg("pools")
        assert "failing" in listing and "no capacity in zone test-1" in listing

        (hosts / "never-join").write_text("")
        (hosts / "fail-create").unlink()
        never = wait_until(lambda: api.events(kind="warn:pool:member_never_joined", limit=10),
                           timeout=90, what="a machine that never checked in to be recorded")
        assert "never checked in within 15 s" in never[0]["body"]["reason"]
        (hosts / "never-join").unlink()
        shown = wait_until(lambda: landed(api, flight["id"]), timeout=120, interval=0.2,
                           what="the flight to land on a machine made by the create command")
        assert output_of(shown) == "on a host\n"
        assert never[0]["body"]["member"] not in {p.name for p in hosts.glob("m_*")}
    finally:
        pool.stop()
        for home in hosts.glob("m_*"):  # the reference hosts outlive the maintainer
            pid = home / "pid"
            if pid.exists():
                try:
                    os.killpg(int(pid.read_text()), signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        fleet.stop()


IN_NAMESPACES = f"""\
environment: ui
inventory: {{name: ui-pool, size: 1}}
image: {{ref: ui-image, digest: "sha256:{'d' * 64}"}}
driver: command
command: {{create: create-netns-host, delete: delete-netns-host, list: list-netns-hosts,
          join-within: 60s}}
scale: {{min: 0, max: 1, idle-after: 1s}}
"""


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ip") is None,
                    reason="network namespaces need root and iproute2")
def test_a_machine_made_as_a_network_namespace_joins_flies_and_is_deleted(tmp_path):
    """The reference scripts that make each host a network namespace (only its loopback, the
    control plane reached through one relayed port): a member joins from inside it, flies a
    flight that sees only the namespace's network, and is deleted with its namespace once
    the scaled pool is idle."""
    fleet = Fleet(tmp_path, FAST).start()
    pool = Pool(fleet, tmp_path)
    hosts = tmp_path / "hosts"
    made: set[str] = set()
    try:
        (tmp_path / "ui.yaml").write_text(IN_NAMESPACES)
        fleet.chart("ui")
        api = fleet.api()
        api.clear_gate(pool.gg("strategy", "apply", "ui", str(tmp_path / "ui.yaml"),
                               "--json")["gate"]["id"])
        assert pool.maintain("--commands", str(COMMANDS)).wait(timeout=60) == 4
        api.allow_maintainer("ui-pool", "keeper")
        pool.maintain("--commands", str(COMMANDS), env={"GG_TEST_HOSTS": str(hosts)})
        flight = api.open_flight({"environment": "ui", "command": ["ls /sys/class/net"]})

        def flying_or_landed():
            made.update(p.name for p in hosts.glob("m_*"))
            return landed(api, flight["id"])

        shown = wait_until(flying_or_landed, timeout=120, interval=0.2,
                           what="the flight to land on a machine in a network namespace")
        assert output_of(shown) == "lo\n"  # the namespace's own network: loopback only
        assert made and all(f"gg-{m}" in _namespaces() for m in made
                            if (hosts / m).exists())
        wait_until(lambda: pool.members() == [] and not list(hosts.glob("m_*")), timeout=90,
                   interval=0.2, what="the idle machine to be deleted")
        assert not {f"gg-{m}" for m in made} & set(_namespaces())
    finally:
        pool.stop()
        for home in hosts.glob("m_*"):  # the namespaces outlive the maintainer: remove them
            subprocess.run([str(COMMANDS / "delete-netns-host")], input=json.dumps(
                {"pool": "ui-pool", "member_id": home.name}), text=True, capture_output=True,
                env={**os.environ, "GG_TEST_HOSTS": str(hosts)})
        for name in {f"gg-{m}" for m in made} & set(_namespaces()):
            subprocess.run(["ip", "netns", "delete", name], capture_output=True)
        fleet.stop()


def _namespaces() -> list[str]:
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in listed.splitlines() if line.strip()]
