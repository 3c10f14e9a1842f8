"""``isolation: gvisor`` for real: flights under runsc from the bundle the runner writes, the
sandbox escape attacks played against it, and a real server with a real root runner whose
policy asks for it (docs/isolation.md, "isolation: gvisor")."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
from pathlib import Path

import pytest

from gg.runner.capabilities import probe
from gg.runner.flight_identity import shared
from gg.runner.isolation import IsolationUnavailable, Launch, build

from support import FAST, Fleet, flight_workspace, run_launch, wait_until

CAPS = probe()
pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="runsc runs flights for a root runner"),
    pytest.mark.skipif(not CAPS["gvisor"]["usable"],
                       reason=f"gVisor cannot run a flight here ({CAPS['gvisor']['error']})"),
]
KEY = "-----BEGIN PRIVATE KEY-----\nsecret-key-material\n-----END PRIVATE KEY-----\n"
CREDENTIAL = "ggr_the-runner-credential-0123456789"


@pytest.fixture
def host_dir():
    """A directory on the host outside /tmp (the flight's /tmp is its own)."""
    base = Path("/var/tmp") if os.path.isdir("/var/tmp") else Path(tempfile.gettempdir())
    path = Path(tempfile.mkdtemp(prefix="gg-gvisor-", dir=base))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _state_dir(path: Path) -> Path:
    (path / "workspaces").mkdir(parents=True)
    (path / "key.pem").write_text(KEY)
    (path / "runner.json").write_text(json.dumps({"credential": CREDENTIAL}))
    return path


def _launch(script: str, workspace: Path, *, egress: str = "all",
            state_dir: Path | None = None, bound: tuple[Path, ...] = ()) -> Launch:
    saved = os.environ["PATH"]
    os.environ["PATH"] = os.pathsep.join([*map(str, bound), saved])  # the runner's PATH
    try:
        return build(["sh", "-c", script], policy={"isolation": "gvisor", "egress": egress},
                     workspace=workspace, env={"PATH": "/usr/bin:/bin", "GG_SAID": "it's me"},
                     state_dir=state_dir, capabilities=CAPS)
    finally:
        os.environ["PATH"] = saved


def _run(launch: Launch) -> subprocess.CompletedProcess[str]:
    try:
        return run_launch(launch, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    finally:
        if launch.cleanup:
            subprocess.run(launch.cleanup, capture_output=True, check=False)
        launch.discard()


def test_a_gvisor_flight_runs_as_its_identity_with_no_capability_and_its_bundle_is_removed(
        tmp_path):
    workspace = flight_workspace(tmp_path / "ws")
    launch = _launch('echo "$GG_SAID" > said; cat said; grep -E "^(Uid|CapEff|CapBnd):" '
                     '/proc/self/status; echo "Pid: $$"', workspace)
    bundle = launch.private
    assert bundle is not None and (bundle.stat().st_mode & 0o777) == 0o700
    assert "it's me" not in " ".join(launch.argv) and "GG_SAID" not in launch.env
    result = _run(launch)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "it's me"
    status = {k: v.split() for k, _, v in (line.partition(":") for line in lines[1:])}
    identity = shared().first()
    assert int(status["Uid"][0]) == identity.uid != 0
    assert int(status["CapEff"][0], 16) == 0 and int(status["CapBnd"][0], 16) == 0
    assert int(status["Pid"][0]) <= 2
    assert (workspace / "said").stat().st_uid == identity.uid  # what it makes is its own
    assert not bundle.exists()  # the flight's environment is gone with it


ESCAPE = """
cat {state}/key.pem {state}/runner.json
umount {state} && echo umounted
mount -o remount,rw / && echo remounted
touch /etc/gg-escape && echo wrote-etc
echo 1 > /proc/sys/kernel/panic && echo wrote-sysctl
echo '|/bin/sh -c id' > /proc/sys/kernel/core_pattern && echo wrote-core-pattern
cat {secret} && echo read-host
ls /root /home /var /srv /run 2>/dev/null && echo listed-host
echo done
"""


def test_the_sandbox_escapes_fail_under_gvisor(host_dir):
    # The state dir lies inside a directory on the runner's PATH (bound read-only): only the
    # mask stands between the flight and the key. A secret elsewhere on the host: not bound.
    tools = host_dir / "tools"
    state = _state_dir(tools / "state")
    workspace = flight_workspace(state / "workspaces" / "f1")
    secret = host_dir / "elsewhere.txt"
    secret.write_text(CREDENTIAL)
    core_pattern = Path("/proc/sys/kernel/core_pattern").read_text()
    panic = Path("/proc/sys/kernel/panic").read_text()
    result = _run(_launch(ESCAPE.format(state=state, secret=secret), workspace,
                          state_dir=state, bound=(tools,)))
    out = result.stdout.split()
    assert out[-1] == "done", result.stderr
    for escaped in ("umounted", "remounted", "wrote-etc", "wrote-sysctl", "wrote-core-pattern",
                    "read-host", "listed-host"):
        assert escaped not in out, result.stdout + result.stderr
    for leaked in ("secret-key-material", CREDENTIAL):
        assert leaked not in result.stdout + result.stderr
    assert not Path("/etc/gg-escape").exists()
    assert Path("/proc/sys/kernel/core_pattern").read_text() == core_pattern
    assert Path("/proc/sys/kernel/panic").read_text() == panic


@pytest.fixture
def listener():
    """A TCP listener on the host's loopback that answers one line to whoever connects."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(30)

    def answer():
        try:
            conn, _ = server.accept()
            conn.sendall(b"reached\n")
            conn.close()
        except OSError:
            pass

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    server.close()


CONNECT = ("python3 -c 'import socket, sys\n"
           "try:\n"
           "    print(socket.create_connection((\"127.0.0.1\", {port}), 5).recv(20).decode())\n"
           "except OSError as exc:\n"
           "    print(\"refused\", exc)'")


@pytest.mark.parametrize("egress", ["none", "all"])
def test_egress_none_cuts_the_host_network_and_all_reaches_it(tmp_path, listener, egress):
    workspace = flight_workspace(tmp_path / "ws")
    result = _run(_launch(CONNECT.format(port=listener), workspace, egress=egress))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[0] == ("refused" if egress == "none" else "reached")


def test_listing_and_stat_in_the_workspace_work_but_ls_l_is_refused_as_the_docs_say(tmp_path):
    # Debian's runsc 20221219 refuses statx with AT_NO_AUTOMOUNT (coreutils' ls -l, stat):
    # docs/isolation.md says so; everything else that looks at a file works.
    workspace = flight_workspace(tmp_path / "ws")
    result = _run(_launch("echo hi > f; mkdir d; ls; test -f f && echo is-file; "
                          "python3 -c 'import os; print(os.stat(\"f\").st_size)'; "
                          "ls -l f >/dev/null && echo ls-l-works; echo done", workspace))
    out = result.stdout.split()
    assert out[:4] == ["d", "f", "is-file", "3"], result.stderr
    assert out[-1] == "done"
    if "ls-l-works" not in out:  # a newer runsc accepts the flag
        assert "cannot access 'f': Invalid argument" in result.stderr


def test_a_console_or_socket_activation_is_not_offered_under_gvisor(tmp_path):
    for option in ({"terminal": True}, {"activation": True}):
        with pytest.raises(IsolationUnavailable):
            build(["true"], policy={"isolation": "gvisor", "egress": "all"}, workspace=tmp_path,
                  env={}, state_dir=None, capabilities=CAPS, **option)


# -- end to end: a real server, a real root runner whose policy asks gvisor ----------------------

# Forks 200 children that sleep, counting the forks refused; prints both counts.
FORKS = """
import os
started = refused = 0
for _ in range(200):
    try:
        pid = os.fork()
    except BlockingIOError:
        refused += 1
        continue
    if pid == 0:
        os.execvp("sleep", ["sleep", "30"])
    started += 1
print(started, refused, flush=True)
"""


def _ended(api, flight_id: str) -> dict | None:
    shown = api.flight(flight_id)
    return shown if shown["stage"] in ("landed", "failed", "cancelled") else None


def _output(flight: dict) -> str:
    return "".join(f["body"].get("text", "") for f in flight["facts"] if f["kind"] == "output")


def test_a_root_runner_under_gvisor_lands_flights_as_their_identity_and_caps_memory_and_pids(
        tmp_path, host_dir):
    fleet = Fleet(tmp_path / "prod", dict(FAST))
    fleet.server.dev = False
    fleet.start()
    try:
        tools = host_dir / "tools"
        tools.mkdir()
        state = tools / "state"
        fleet.runner("r1", env={"GG_STATE_DIR": str(state),
                                "PATH": f"{tools}{os.pathsep}{os.environ['PATH']}"})
        fleet.wait_online("r1")
        policy = fleet.gg("runner", "policy", "r1", "--isolation", "gvisor")
        assert policy.returncode == 0, policy.stderr
        api = fleet.api()
        row = wait_until(lambda: (r := fleet.runner_row("r1")) and r["health"] == "ok"
                         and r["policy"]["isolation"] == "gvisor" and r, timeout=40,
                         what="the runner to read ok under gvisor")
        assert row["policy"]["isolation"] == "gvisor"
        flight = api.open_flight({"command": [
            f"id -u; echo out of $(cat /proc/self/status | grep -c .) lines; "
            f"cat {state}/key.pem {state}/runner.json; echo done"]})
        landed = wait_until(lambda: _ended(api, flight["id"]), timeout=60,
                            what="the gvisor flight to end")
        out = _output(landed).split()
        assert landed["stage"] == "landed", _output(landed)
        assert int(out[0]) == shared().first().uid and out[-1] == "done"
        assert "BEGIN" not in _output(landed) and "ggr_" not in _output(landed)

        opened = fleet.gg("fly", "--json", "--memory", "256M", "--",
                          "python3", "-c", "b = b'x' * (1 << 30); print('not killed')")
        assert opened.returncode == 0, opened.stderr
        hog = json.loads(opened.stdout)["id"]
        failed = wait_until(lambda: _ended(api, hog), timeout=60, what="the allocation to end")
        assert (failed["stage"], failed["ended_reason"]) == (
            "failed", "killed: out of memory (limit 256M)")
        assert "not killed" not in _output(failed)

        # its processes are gVisor's, not the host's: --pids is counted by gVisor itself
        opened = fleet.gg("fly", "--json", "--pids", "64", "--", "python3", "-c", FORKS)
        assert opened.returncode == 0, opened.stderr
        bomb = json.loads(opened.stdout)["id"]
        done = wait_until(lambda: _ended(api, bomb), timeout=60, what="the fork bomb to end")
        assert done["stage"] == "landed", _output(done)
        started, refused = map(int, _output(done).split())
        assert started < 64 and refused > 0
        assert fleet.runner_row("r1")["health"] == "ok"
    finally:
        fleet.stop()
