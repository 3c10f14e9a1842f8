"""egress allowlist, enforced: a flight in its own network namespace reaches only what its
policy lists. Two test "hosts" are network namespaces made here, each behind a veth pair,
each serving HTTP; everything is removed (and forwarding restored) in a finally."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from egress_support import Hosts

from gg.domain.policy import Policy
from gg.refusals import ApiError
from gg.runner import egress
from gg.runner.capabilities import probe
from gg.runner.isolation import build

from support import FAST, Fleet, flight_workspace, run_launch, wait_until

CAPS = probe()
needs_allowlist = pytest.mark.skipif(
    "allowlist" not in CAPS["egress_controls"] or not CAPS["bwrap_usable"],
    reason=f"egress allowlist needs {CAPS['egress_allowlist_error'] or 'a sandbox'}")

# Played by the flight: one line per destination, "A:8001 reached" or "A:8002 refused ...".
PROBE = """
import socket, subprocess, sys
for argv in (["NFT", "flush", "ruleset"], ["IP", "route", "replace", "default", "dev", "eth0"]):
    done = subprocess.run(argv, capture_output=True)
    print(f"rules:{argv[0].rsplit('/', 1)[-1]} {'changed' if done.returncode == 0 else 'kept'}")
for name, where, port in [("A", "198.18.1.2", 8001), ("A", "198.18.1.2", 8002),
                          ("B", "198.18.2.2", 8001)]:
    try:
        with socket.create_connection((where, port), timeout=5) as s:
            s.sendall(b"GET / HTTP/1.0\\r\\n\\r\\n")
            ok = s.recv(12).startswith(b"HTTP/1.0 200")
        print(f"{name}:{port} {'reached' if ok else 'answered oddly'}")
    except OSError as exc:
        print(f"{name}:{port} refused-{type(exc).__name__}")
""".replace("NFT", egress.tool("nft") or "nft").replace("IP", egress.tool("ip") or "ip")
REACHED_ONLY_A_8001 = {"rules:nft": "kept", "rules:ip": "kept", "A:8001": "reached",
                       "A:8002": "refused-ConnectionRefusedError",
                       "B:8001": "refused-ConnectionRefusedError"}


def _results(output: str) -> dict[str, str]:
    return {line.split()[0]: line.split()[1] for line in output.splitlines()
            if line[:2] in ("A:", "B:") or line.startswith("rules:")}


def _ours(state_dir: Path) -> list[str]:
    tag = egress.tag_for(state_dir)
    names = os.listdir(egress.NETNS_DIR) if egress.NETNS_DIR.exists() else []
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    links = " ".join(line.split(":")[1].strip().split("@")[0] for line in links.splitlines())
    tables = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True).stdout
    return ([n for n in names if n.startswith(f"{egress.PREFIX}{tag:03x}-")]
            + [w for w in links.split() if w.startswith(f"gge{tag:03x}h")]
            + [w for w in tables.split() if w == egress.host_table(tag)])


@needs_allowlist
@pytest.mark.skipif(os.geteuid() != 0 or not CAPS["gvisor"]["usable"],
                    reason=f"gVisor runs no flight here ({CAPS['gvisor']['error'] or 'not root'})")
def test_a_gvisor_flight_reaches_only_the_allowlisted_address_and_port(tmp_path):
    """runsc is started inside the flight's namespace (nsenter), its --network=host is then
    that namespace's network: the same rules hold for the sentry's own sockets."""
    hosts = Hosts()
    links = egress.Links(tmp_path / "state")
    try:
        hosts.start()
        network = links.open(["198.18.1.2:8001"])
        policy = Policy("gvisor", "allowlist", allow=("198.18.1.2:8001",))
        launch = build([sys.executable, "-I", "-c", PROBE], policy=policy,
                       workspace=flight_workspace(tmp_path / "ws"), env={},
                       state_dir=tmp_path / "state", capabilities=CAPS, netns=network.path)
        try:
            done = run_launch(launch, capture_output=True, text=True, timeout=120)
        finally:
            launch.discard()
        network.close()
    finally:
        hosts.stop()
        egress.clear(tmp_path / "state")
    assert _results(done.stdout) == REACHED_ONLY_A_8001, done.stdout + done.stderr


@needs_allowlist
def test_a_sandboxed_flight_reaches_only_the_allowlisted_address_and_port(tmp_path):
    hosts = Hosts()
    links = egress.Links(tmp_path / "state")
    try:
        hosts.start()
        network = links.open(["198.18.1.2:8001"])
        policy = Policy("sandbox", "allowlist", allow=("198.18.1.2:8001",))
        launch = build([sys.executable, "-I", "-c", PROBE], policy=policy,
                       workspace=flight_workspace(tmp_path / "ws"), env={}, state_dir=None,
                       capabilities=CAPS, netns=network.path)
        done = run_launch(launch, capture_output=True, text=True, timeout=60)
        network.close()
        assert not Path(network.path).exists()
    finally:
        hosts.stop()
        egress.clear(tmp_path / "state")
    assert _results(done.stdout) == REACHED_ONLY_A_8001, done.stdout + done.stderr
    assert _ours(tmp_path / "state") == []


@needs_allowlist
def test_a_runner_that_starts_removes_what_a_killed_one_left_of_its_flights_networks(tmp_path):
    state = tmp_path / "state"
    try:
        links = egress.Links(state)
        for _ in range(2):
            links.open(["10.0.0.0/8"])  # never closed: a runner killed
        assert len(_ours(state)) == 5  # two namespaces, two links, the host table
        removed = egress.clear(state)
        assert _ours(state) == []
        assert egress.host_table(egress.tag_for(state)) in removed
    finally:
        egress.clear(state)


@needs_allowlist
def test_a_real_root_runner_under_an_allowlist_lets_its_flight_reach_only_that(tmp_path):
    """Also: a bad entry is one sentence and exit 2 (a 400 over HTTP), the policy unchanged."""
    hosts = Hosts()
    fleet = Fleet(tmp_path / "prod", dict(FAST))
    fleet.server.dev = False
    try:
        hosts.start()
        fleet.start()
        fleet.runner("r1")
        fleet.wait_online("r1")
        bad = fleet.gg("runner", "policy", "r1", "--egress", "allowlist", "--allow",
                       "10.0.0.0/33")
        assert bad.returncode == 2
        assert bad.stderr.strip().splitlines() == [
            "--allow: allowlist entry '10.0.0.0/33' is not a valid IPv4 address or network "
            "(host[:port] or CIDR[:port])"]
        with pytest.raises(ApiError) as refused:
            fleet.api().client.set_policy("r1", allow=["*.example.com"])
        assert refused.value.status == 400
        assert str(refused.value) == ("allowlist entry '*.example.com' has a wildcard; list "
                                      "each host name")
        assert fleet.runner_row("r1")["policy"] == {"isolation": "sandbox", "egress": "all",
                                                    "workers": 1}
        changed = fleet.gg("runner", "policy", "r1", "--egress", "allowlist",
                           "--allow", "198.18.1.2:8001")
        assert changed.returncode == 0, changed.stderr
        assert "allow 198.18.1.2:8001" in changed.stdout
        api = fleet.api()
        wait_until(lambda: fleet.runner_row("r1")["health"] == "ok", timeout=30,
                   what="the runner to meet its allowlist policy")
        shown = fleet.gg("runner", "show", "r1").stdout
        assert "allow 198.18.1.2:8001, egress allowlist" in shown, shown
        flight = api.open_flight({"command": [sys.executable, "-I", "-c", PROBE]})
        wait_until(lambda: api.flight(flight["id"])["stage"] in ("landed", "failed"),
                   timeout=90, what="the flight to end")
        out = "".join(f["body"]["text"] for f in api.flight(flight["id"])["facts"]
                      if f["kind"] == "output")
        # the runner removes the flight's namespace and link once it handed the flight back,
        # which may be just after the control plane recorded its end
        table = egress.host_table(egress.tag_for(tmp_path / "prod" / "state-r1"))
        during = wait_until(
            lambda: (o := _ours(tmp_path / "prod" / "state-r1")) == [table] and o,
            timeout=30, what="the flight's namespace and link removed once it ended")
    finally:
        fleet.stop()
        hosts.stop()
        left = _ours(tmp_path / "prod" / "state-r1")
        egress.clear(tmp_path / "prod" / "state-r1")
    assert _results(out) == REACHED_ONLY_A_8001, out
    assert during == [egress.host_table(egress.tag_for(tmp_path / "prod" / "state-r1"))]
    assert left == []  # the flight's namespace went with it, the host table with the runner
