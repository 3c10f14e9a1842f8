"""The reference provider of the pool's ``command`` driver, used by the tests: a "host" is a
``gg runner up --once`` process in a session of its own, with its own state and config
directories under HOSTS (``hosts/`` beside these scripts, or ``$GG_TEST_HOSTS``). A cloud's
scripts would call its API where these start and stop a process (docs/pools.md).

Switches a test sets by creating files in HOSTS: ``fail-create`` (its text is the reason
create fails with) and ``never-join`` (create starts a machine that never checks in).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

HOSTS = Path(os.environ.get("GG_TEST_HOSTS") or Path(__file__).resolve().parent / "hosts")
# the protocol's timings the test shrank, passed on to the member's runner
KEPT = ("GG_CHECK_IN_INTERVAL", "GG_OFFLINE_AFTER", "GG_CLAIM_WAIT", "GG_LEASE_TTL",
        "GG_LEASE_RENEW_AT")


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def create(body: dict) -> dict:
    HOSTS.mkdir(parents=True, exist_ok=True)
    fail = HOSTS / "fail-create"
    if fail.exists():
        print(fail.read_text().strip() or "create refused", file=sys.stderr)
        raise SystemExit(1)
    home = HOSTS / body["member_id"]
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GG_")}
    env.update({"GG_MEMBER_CODE": body["code"], "GG_STATE_DIR": str(home / "state"),
                "GG_CONFIG_DIR": str(home / "config"), "PYTHONPATH": os.environ.get(
                    "PYTHONPATH", "")})
    env.update({k: os.environ[k] for k in KEPT if k in os.environ})
    if (HOSTS / "never-join").exists():
        argv = ["sleep", "3600"]
    else:
        argv = [sys.executable, "-m", "gg", "--server", body["server"], "runner", "up",
                "--once", "--name", body["name"]]
    with open(home / "runner.log", "ab") as log:
        proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    (home / "pid").write_text(str(proc.pid))
    return {"machine": f"local-{proc.pid}"}


def stop(pid_file: Path) -> None:
    """Stop the process group whose leader's pid ``pid_file`` holds: TERM, then KILL."""
    if not pid_file.exists():
        return
    pid = int(pid_file.read_text())
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.monotonic() + 5
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if not _alive(pid):
            return


def delete(body: dict) -> dict:
    home = HOSTS / body["member_id"]
    stop(home / "pid")
    shutil.rmtree(home, ignore_errors=True)
    return {}


def list_(body: dict) -> dict:
    machines = []
    for home in sorted(HOSTS.glob("m_*")) if HOSTS.exists() else []:
        pid_file = home / "pid"
        running = pid_file.exists() and _alive(int(pid_file.read_text()))
        machines.append({"member_id": home.name, "running": running})
    return {"machines": machines}


def answer(verbs: dict, verb: str) -> None:
    """Read the driver's JSON request on stdin, answer ``verb`` with JSON on stdout."""
    body = json.loads(sys.stdin.read() or "{}")
    print(json.dumps(verbs[verb](body)))


def main(verb: str) -> None:
    answer({"create": create, "delete": delete, "list": list_}, verb)
