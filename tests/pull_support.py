"""Pull-mode runners for the tests: a real ``gg runner up --listen`` process, either on the
host's loopback or inside a network namespace of its own (``unshare --net``) where it has
only ``lo`` and its one inbound port is forwarded from the host through a Unix socket."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

from gg.launch import free_port, gg_argv

# Runs inside the namespace: bring lo up, start the runner on 127.0.0.1:PORT, and bridge
# connections arriving on a Unix socket (on the shared filesystem) to it.
NETNS_BRIDGE = r'''
import fcntl, os, signal, socket, struct, subprocess, sys, threading
sock_path, port, log = sys.argv[1], int(sys.argv[2]), sys.argv[3]
argv = sys.argv[4:]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
flags = struct.unpack("16sH", fcntl.ioctl(s, 0x8913, struct.pack("16sH", b"lo", 0)))[1]
fcntl.ioctl(s, 0x8914, struct.pack("16sH", b"lo", flags | 1))
out = open(log, "ab")
child = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
signal.signal(signal.SIGTERM, lambda *a: child.send_signal(signal.SIGTERM))
def pipe(a, b):
    try:
        while True:
            data = a.recv(65536)
            if not data:
                break
            b.sendall(data)
    except OSError:
        pass
    finally:
        for x in (a, b):
            try:
                x.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
def serve(conn):
    try:
        up = socket.create_connection(("127.0.0.1", port), timeout=10)
    except OSError:
        conn.close()
        return
    up.settimeout(None)
    threading.Thread(target=pipe, args=(conn, up), daemon=True).start()
    pipe(up, conn)
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(sock_path)
srv.listen(64)
def accept():
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()
threading.Thread(target=accept, daemon=True).start()
sys.exit(child.wait())
'''


class TcpToUnix:
    """On the host: a TCP listener on a free loopback port forwarding to a Unix socket."""

    def __init__(self, path: Path):
        self.path = path
        self.server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(64)
        self.port = self.server.getsockname()[1]
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            up.connect(str(self.path))
        except OSError:
            conn.close()
            return
        threading.Thread(target=_pipe, args=(conn, up), daemon=True).start()
        _pipe(up, conn)

    def close(self) -> None:
        self.closed = True
        self.server.close()


def _pipe(a: socket.socket, b: socket.socket) -> None:
    try:
        while True:
            data = a.recv(65536)
            if not data:
                break
            b.sendall(data)
    except OSError:
        pass
    finally:
        for x in (a, b):
            try:
                x.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def netns_available() -> str | None:
    """None when ``unshare --net`` works here; else why not."""
    if shutil.which("unshare") is None:
        return "unshare (util-linux) is not installed"
    probe = subprocess.run(["unshare", "--net", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"unshare --net is not permitted here: {probe.stderr.strip()}"
    return None


class PullRunner:
    """A real ``gg runner up --listen`` process; ``url`` is where the control plane reaches it."""

    def __init__(self, root: Path, name: str, env: dict[str, str], *, netns: bool = False,
                 workers: int = 1, labels: str | None = None):
        self.name = name
        self.state_dir = root / f"state-{name}"
        self.log = root / f"runner-{name}.log"
        self.netns = netns
        self.port = free_port()
        args = ["runner", "up", "--listen", f"127.0.0.1:{self.port}", "--name", name,
                "--workers", str(workers), "--grace", "2"]
        if labels:
            args += ["--labels", labels]
        self.env = {**os.environ, **env, "GG_STATE_DIR": str(self.state_dir),
                    "GG_CONFIG_DIR": str(root / f"config-{name}")}
        self.env.pop("GG_SERVER", None)
        self.forwarder: TcpToUnix | None = None
        if netns:
            self.socket_path = Path(root) / f"{name}.sock"
            bridge = Path(root) / "netns_bridge.py"
            bridge.write_text(NETNS_BRIDGE)
            argv = ["unshare", "--net", sys.executable, str(bridge), str(self.socket_path),
                    str(self.port), str(self.log), *gg_argv(*args)]
            self.proc = subprocess.Popen(argv, env=self.env, stdout=subprocess.DEVNULL,
                                         stderr=open(self.log, "ab"), start_new_session=True)
            self.forwarder = TcpToUnix(self.socket_path)
            self.url = f"http://127.0.0.1:{self.forwarder.port}"
        else:
            self.proc = subprocess.Popen(gg_argv(*args), env=self.env,
                                         stdout=open(self.log, "ab"),
                                         stderr=subprocess.STDOUT, start_new_session=True)
            self.url = f"http://127.0.0.1:{self.port}"

    def output(self) -> str:
        return self.log.read_text() if self.log.exists() else ""

    def fingerprint(self) -> str | None:
        for line in self.output().splitlines():
            if "its key fingerprint is " in line:
                return line.rsplit("its key fingerprint is ", 1)[1].split()[0]
        return None

    def in_namespace(self, *argv: str) -> subprocess.CompletedProcess:
        """Run ``argv`` in the runner's network namespace (the wrapper's)."""
        return subprocess.run(["nsenter", f"--net=/proc/{self.proc.pid}/ns/net", *argv],
                              capture_output=True, text=True, timeout=30)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, 9)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, 15)
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()
        if self.forwarder is not None:
            self.forwarder.close()
