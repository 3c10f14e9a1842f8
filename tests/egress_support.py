"""Test hosts for the egress allowlist's tests: network namespaces made by the test, each
behind a veth pair to the host, each serving HTTP on its ports; removed (and IPv4 forwarding
restored) by ``stop``."""

from __future__ import annotations

import fcntl
import os
import socket
import subprocess
import sys
from pathlib import Path

from support import wait_until

# The test hosts: A at 198.18.1.2 (ports 8001 and 8002), B at 198.18.2.2 (port 8001); the
# host's end of each link is .1. 198.18.0.0/15 is for benchmarks: never a real destination.
HOSTS = {"a": ("198.18.1.1", "198.18.1.2", (8001, 8002)), "b": ("198.18.2.1", "198.18.2.2", (8001,))}
TAG = f"{os.getpid() % 100000}"
LOCK = "/tmp/gg-test-egress-hosts.lock"
FORWARD = Path("/proc/sys/net/ipv4/ip_forward")
def _ip(*args: str, text: str | None = None) -> None:
    subprocess.run(["ip", *args], input=text, text=True, check=True, capture_output=True)


class Hosts:
    """Two namespaces, each a host serving HTTP on its ports, reachable from the host."""

    def __init__(self) -> None:
        self.listeners: list[subprocess.Popen] = []
        self.forward: str | None = None
        self.lock: int | None = None

    def start(self) -> None:
        # one set of test hosts on the machine at a time: they have fixed addresses
        self.lock = os.open(LOCK, os.O_CREAT | os.O_RDWR, 0o600)
        fcntl.flock(self.lock, fcntl.LOCK_EX)
        self.forward = FORWARD.read_text()
        for name, (outer, inner, ports) in HOSTS.items():
            ns, link = f"ggtest-{name}-{TAG}", f"ggt{name}{TAG}"
            _ip("netns", "add", ns)
            _ip("link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _ip("addr", "add", f"{outer}/30", "dev", link)
            _ip("link", "set", link, "up")
            _ip("-n", ns, "-batch", "-", text=f"link set lo up\naddr add {inner}/30 dev eth0\n"
                                              f"link set eth0 up\nroute add default via {outer}\n")
            for port in ports:
                self.listeners.append(subprocess.Popen(
                    ["ip", "netns", "exec", ns, sys.executable, "-m", "http.server",
                     "--bind", inner, str(port)], cwd="/", stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL))
        for _, inner, ports in HOSTS.values():
            for port in ports:
                wait_until(lambda: _serves(inner, port), timeout=20,
                           what=f"the test host {inner}:{port} to serve")

    def stop(self) -> None:
        for proc in self.listeners:
            proc.kill()
            proc.wait()
        for name in HOSTS:
            subprocess.run(["ip", "link", "delete", f"ggt{name}{TAG}"], capture_output=True)
            subprocess.run(["ip", "netns", "delete", f"ggtest-{name}-{TAG}"],
                           capture_output=True)
        if self.forward is not None:
            FORWARD.write_text(self.forward)
        if self.lock is not None:
            os.close(self.lock)  # releases it
            self.lock = None


def _serves(where: str, port: int) -> bool:
    try:
        with socket.create_connection((where, port), timeout=2):
            return True
    except OSError:
        return False
