"""A reference provider for the pool's ``command`` driver whose "hosts" are network namespaces
on this machine, as close to a machine elsewhere as one host gets without a hypervisor.

``create`` makes a namespace ``gg-<member>`` (only its own loopback up: no route to this
machine's network), starts a relay that listens on the namespace's ``127.0.0.1:<port of the
server>`` and carries each connection to the server on this machine's loopback, and runs
``gg runner up --once`` inside the namespace with the member's one-use code in
``GG_MEMBER_CODE``. So the member reaches the control plane the way a machine elsewhere
would, through one address and port, and nothing else of this machine's network. ``delete``
stops both and removes the namespace; ``list`` names every host whose runner still runs.

Hosts are kept under HOSTS (``$GG_TEST_HOSTS``): ``HOSTS/<member>/`` holds the runner's state,
its log and the pids. Needs root and ``ip`` (iproute2); the server must be on this machine's
loopback (the relay's other end).

The relay lives in this machine's network namespace and opens its listening socket inside the
member's (``setns`` for a moment, then back): a socket stays in the namespace it was made in.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hosts import HOSTS, KEPT, _alive, answer, list_, stop  # noqa: E402

CLONE_NEWNET = 0x40000000


def namespace(member_id: str) -> str:
    return f"gg-{member_id}"


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if done.returncode != 0:
        print(f"ip {' '.join(args)}: {done.stderr.strip()}", file=sys.stderr)
        raise SystemExit(1)


def _spawn(argv: list[str], home: Path, log: str, env: dict[str, str]) -> int:
    with open(home / log, "ab") as out:
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    return proc.pid


def create(body: dict) -> dict:
    server = urlsplit(body["server"])
    if server.hostname not in ("127.0.0.1", "localhost") or server.port is None:
        print(f"these hosts reach a server on this machine's loopback only (got {body['server']})",
              file=sys.stderr)
        raise SystemExit(1)
    member = body["member_id"]
    home = HOSTS / member
    home.mkdir(parents=True)
    ns = namespace(member)
    _ip("netns", "add", ns)
    _ip("-n", ns, "link", "set", "lo", "up")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GG_")}
    env.update({k: os.environ[k] for k in KEPT if k in os.environ})
    relay = _spawn([sys.executable, __file__, "relay", ns, str(server.port), str(home)],
                   home, "relay.log", env)
    (home / "relay.pid").write_text(str(relay))
    deadline = time.monotonic() + 30
    while not (home / "relay.ready").exists():  # the runner's first call must find it
        if time.monotonic() > deadline or not _alive(relay):
            print("the relay into the namespace did not start", file=sys.stderr)
            raise SystemExit(1)
        time.sleep(0.05)
    env.update({"GG_MEMBER_CODE": body["code"], "GG_STATE_DIR": str(home / "state"),
                "GG_CONFIG_DIR": str(home / "config")})
    runner = _spawn(["ip", "netns", "exec", ns, sys.executable, "-m", "gg", "--server",
                     body["server"], "runner", "up", "--once", "--name", body["name"]],
                    home, "runner.log", env)
    (home / "pid").write_text(str(runner))
    return {"machine": ns}


def delete(body: dict) -> dict:
    member = body["member_id"]
    home = HOSTS / member
    stop(home / "pid")
    stop(home / "relay.pid")
    if Path(f"/run/netns/{namespace(member)}").exists():
        _ip("netns", "delete", namespace(member))
    shutil.rmtree(home, ignore_errors=True)
    return {}


# -- the relay: the namespace's 127.0.0.1:PORT -> this machine's 127.0.0.1:PORT -----------------


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while chunk := source.recv(65536):
            sink.sendall(chunk)
    except OSError:
        pass
    finally:
        for s, how in ((sink, socket.SHUT_WR), (source, socket.SHUT_RD)):
            try:
                s.shutdown(how)
            except OSError:
                pass


def _carry(conn: socket.socket, port: int) -> None:
    try:
        up = socket.create_connection(("127.0.0.1", port))
    except OSError:
        conn.close()
        return
    back = threading.Thread(target=_pump, args=(up, conn), daemon=True)
    back.start()
    _pump(conn, up)
    back.join()
    conn.close()
    up.close()


def relay(ns: str, port: int, home: Path) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    here = os.open("/proc/self/ns/net", os.O_RDONLY)
    there = os.open(f"/run/netns/{ns}", os.O_RDONLY)
    if libc.setns(there, CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), f"setns into {ns}")
    listener = socket.create_server(("127.0.0.1", port), backlog=64)
    if libc.setns(here, CLONE_NEWNET) != 0:  # back: the connections out are made here
        raise OSError(ctypes.get_errno(), "setns back")
    (home / "relay.ready").write_text("")
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=_carry, args=(conn, port), daemon=True).start()


def main(verb: str) -> None:
    answer({"create": create, "delete": delete, "list": list_}, verb)


if __name__ == "__main__" and sys.argv[1:2] == ["relay"]:
    relay(sys.argv[2], int(sys.argv[3]), Path(sys.argv[4]))
