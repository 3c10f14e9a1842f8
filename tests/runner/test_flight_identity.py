"""Flights never run as host root (docs/isolation.md, "The identity model"): the attacks a
flight written by an attacker plays on a root runner, for real, and the rule that picks the
flight identity."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gg.runner import flight_identity
from gg.runner.capabilities import probe
from gg.runner.flight_identity import (
    DEFAULT_BASE,
    DEFAULT_COUNT,
    FlightIdentities,
    Identity,
    IdentityRangeError,
    IdRange,
    flight_range,
    parse_range,
)
from gg.runner.isolation import build
from gg.runner.launching import LAUNCHER

from support import FAST, Fleet, flight_workspace, run_launch, wait_until

CAPS = probe()
needs_root_sandbox = pytest.mark.skipif(
    os.geteuid() != 0 or not CAPS["bwrap_usable"],
    reason="the attack needs a root runner whose bubblewrap sandbox starts "
           f"({CAPS['bwrap_error'] or 'not root'})")
needs_keyctl = pytest.mark.skipif(shutil.which("keyctl") is None,
                                  reason="keyctl (keyutils) is not installed")
CORE_PATTERN = Path("/proc/sys/kernel/core_pattern")
PANIC = Path("/proc/sys/kernel/panic")
EGRESS = [pytest.param("all", id="egress-all"), pytest.param("none", id="egress-none")]
# Played by the flight: each line prints a word only when the attack worked.
SYSCTL_ATTACK = """
echo '|/tmp/gg-pwn %p' > /proc/sys/kernel/core_pattern && echo WROTE-core-pattern
echo 7 > /proc/sys/kernel/panic && echo WROTE-panic
mount -o remount,rw /proc/sys 2>/dev/null && echo REMOUNTED-proc-sys
unshare -Urpf --mount-proc sh -c 'echo "|/tmp/gg-pwn" > /proc/sys/kernel/core_pattern' \
    2>/dev/null && echo NESTED-core-pattern
echo uid=$(id -u) gid=$(id -g) groups=$(id -G)
grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb)' /proc/self/status | tr -d ' \\t'
echo made > made.txt && stat -c 'owner=%u' made.txt
echo done
"""
WROTE = ("WROTE-core-pattern", "WROTE-panic", "REMOUNTED-proc-sys", "NESTED-core-pattern")
KEY_SECRET = "host-keyring-secret-0123456789"


def _sysctls() -> dict[Path, str]:
    return {path: path.read_text() for path in (CORE_PATTERN, PANIC)}


def _restore(saved: dict[Path, str]) -> None:
    for path, value in saved.items():
        if path.read_text() != value:
            path.write_text(value)


def _played(output: str) -> dict[str, str]:
    words = dict(item.split("=", 1) for item in output.split() if "=" in item)
    caps = {line.split(":")[0]: line.split(":")[1] for line in output.splitlines()
            if line.startswith("Cap") and ":" in line}
    return {**words, **caps}


# -- the rule -----------------------------------------------------------------------------------

def test_the_flight_range_is_the_setting_then_the_subordinate_range_then_the_default(tmp_path):
    subuid = tmp_path / "subuid"
    subuid.write_text("alice:100000:65536\nroot:300000:1000\n")
    assert flight_range("5000000:8", uid=0, subuid=str(subuid)) == IdRange(5_000_000, 8,
                                                                           "setting")
    assert flight_range("", uid=0, subuid=str(subuid)) == IdRange(300_000, 1000, "/etc/subuid")
    assert flight_range("", uid=0, subuid=str(tmp_path / "none")) == IdRange(
        DEFAULT_BASE, DEFAULT_COUNT, "default")


@pytest.mark.parametrize("text", ["abc", "0:10", "12", "4294967290:100", "5000:0"])
def test_a_flight_range_that_cannot_be_used_is_one_sentence(text):
    with pytest.raises(IdentityRangeError) as refused:
        parse_range(text)
    assert "\n" not in str(refused.value) and str(refused.value)


def test_each_worker_slot_has_its_own_identity_and_gives_it_back():
    ids = FlightIdentities(IdRange(3_000_000, 4, "setting"), slots=2)
    first, second = ids.take(), ids.take()
    assert first == Identity(3_000_000, 3_000_000) and second == Identity(3_000_001, 3_000_001)
    ids.give_back(first)
    assert ids.take() == first
    with pytest.raises(IdentityRangeError):
        FlightIdentities(IdRange(3_000_000, 2, "setting"), slots=3)


def test_a_runner_refuses_to_start_with_a_range_it_cannot_use(tmp_path):
    from gg.launch import gg_argv

    done = subprocess.run(gg_argv("runner", "up", "--flight-uids", "12"), capture_output=True,
                          text=True, timeout=60, check=False, stdin=subprocess.DEVNULL,
                          env={**os.environ, "GG_SERVER": "http://127.0.0.1:9",
                               "GG_STATE_DIR": str(tmp_path / "state"),
                               "GG_CONFIG_DIR": str(tmp_path / "config")})
    if os.geteuid() == 0:
        assert done.returncode == 2, done.stderr
        assert "flight uids must start at 1000 or above" in done.stderr
        assert "Traceback" not in done.stderr


# -- the attacks, on a root runner's sandbox -----------------------------------------------------

@needs_root_sandbox
@pytest.mark.parametrize("egress", EGRESS)
def test_a_root_runners_flight_cannot_write_a_host_sysctl_and_runs_as_its_identity(
        tmp_path, egress):
    workspace = flight_workspace(tmp_path / "workspace")
    identity = flight_identity.shared().first()
    launch = build(["sh", "-c", SYSCTL_ATTACK], workspace=workspace,
                   policy={"isolation": "sandbox", "egress": egress, "workers": 1},
                   env={"PATH": os.environ["PATH"], "LANG": "C.UTF-8"}, state_dir=None,
                   capabilities=CAPS, identity=identity)
    saved = _sysctls()
    try:
        result = run_launch(launch, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        after = _sysctls()
    finally:
        _restore(saved)
    assert after == saved  # the host's values never changed
    out = result.stdout
    assert out.split()[-1] == "done", result.stderr
    assert not set(WROTE) & set(out.split()), out
    played = _played(out)
    assert int(played["uid"]) == identity.uid != 0 and int(played["gid"]) == identity.gid
    assert played["groups"] == str(identity.gid)  # no supplementary group of the runner's
    for name in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(played[name], 16) == 0, (name, out)
    assert int(played["owner"]) == identity.uid  # what it makes is its own
    assert (workspace / "made.txt").stat().st_uid == identity.uid


def _join_session_keyring() -> None:
    """This process (the test's, as a runner's parent would be) in a fresh session keyring
    of its own, as a login gives one."""
    number = {"x86_64": 250, "aarch64": 219}.get(os.uname().machine)
    if number is None:
        pytest.skip(f"keyctl's system call number on {os.uname().machine} is not known here")
    if ctypes.CDLL(None, use_errno=True).syscall(number, 1, None) < 0:
        pytest.skip(f"keyrings are not available here (errno {ctypes.get_errno()})")


def _add_key() -> str:
    done = subprocess.run(["keyctl", "add", "user", "gg-test-secret", KEY_SECRET, "@s"],
                          capture_output=True, text=True, timeout=30, check=True)
    return done.stdout.strip()


def _unlink(key: str) -> None:
    subprocess.run(["keyctl", "unlink", key, "@s"], capture_output=True, timeout=30,
                   check=False)


@needs_root_sandbox
@needs_keyctl
def test_a_flight_started_by_the_launcher_cannot_read_its_runners_session_keyring(tmp_path):
    _join_session_keyring()
    key = _add_key()
    try:
        workspace = flight_workspace(tmp_path / "workspace")
        launch = build(["sh", "-c", f"keyctl print {key}; keyctl show @s; echo done"],
                       policy={"isolation": "sandbox", "egress": "all", "workers": 1},
                       workspace=workspace, env={"PATH": os.environ["PATH"]}, state_dir=None,
                       capabilities=CAPS)
        out_path = tmp_path / "out"
        with open(out_path, "wb") as out:
            proc = LAUNCHER.start(launch.argv, env=launch.env, cwd=launch.cwd, stdout=out.fileno(),
                                  stderr=subprocess.STDOUT, handed=launch.handed)
            proc.wait(timeout=60)
        seen = out_path.read_text()
        # the test itself still reads it: the key is there to be stolen
        mine = subprocess.run(["keyctl", "print", key], capture_output=True, text=True,
                              timeout=30, check=False)
        assert KEY_SECRET in mine.stdout
    finally:
        _unlink(key)
    assert seen.split()[-1] == "done", seen
    assert KEY_SECRET not in seen and "gg-test-secret" not in seen, seen


# -- end to end: a real server, a real root runner -----------------------------------------------

@needs_root_sandbox
@needs_keyctl
def test_an_attacking_flight_on_a_real_root_runner_writes_no_sysctl_and_reads_no_host_key(
        tmp_path):
    _join_session_keyring()
    key = _add_key()  # in the session keyring the runner inherits from this process
    fleet = Fleet(tmp_path / "prod", dict(FAST))
    fleet.server.dev = False  # every runner is sandboxed by default
    saved = _sysctls()
    fleet.start()
    try:
        fleet.runner("r1", workers=2)
        fleet.wait_online("r1")
        api = fleet.api()
        row = next(r for r in api.runners() if r["name"] == "r1")
        assert row["policy"]["isolation"] == "sandbox" and row["health"] == "ok"
        attack = SYSCTL_ATTACK.replace("echo done\n", "") + (
            f"keyctl print {key}; keyctl show @s; stat -c 'workspace=%u' .; echo done\n")
        flights = [api.open_flight({"command": [attack]}) for _ in range(2)]
        for flight in flights:
            wait_until(lambda: api.flight(flight["id"])["stage"] in ("landed", "failed"),
                       timeout=60, what="the attacking flight to end")
        after = _sysctls()
        outputs = ["".join(f["body"]["text"] for f in api.flight(flight["id"])["facts"]
                           if f["kind"] == "output") for flight in flights]
    finally:
        fleet.stop()
        _restore(saved)
        _unlink(key)
    assert after == saved
    uids = set()
    for out in outputs:
        assert out.split()[-1] == "done", out
        assert not set(WROTE) & set(out.split()), out
        assert KEY_SECRET not in out and "gg-test-secret" not in out, out
        played = _played(out)
        assert int(played["uid"]) != 0 and played["workspace"] == played["uid"]
        assert int(played["CapEff"], 16) == 0 and int(played["CapBnd"], 16) == 0
        uids.add(played["uid"])
    assert len(uids) >= 1
