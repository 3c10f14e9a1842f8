"""A service's ports and socket are its own (docs/services.md, "`--port P`").

The runner listens on a service's ``--port`` exclusively (:func:`listen_exclusively`), and
serves only what the generation itself listens on: every socket listening on its ``$PORT``
must be held by the generation's processes (:func:`listeners`, :func:`socket_inodes`), and
its ``$SERVICE_SOCKET`` is connected only as the socket the generation made, never through
a link (:func:`connect_own_socket`). Another flight on the host that binds the port first,
or points the socket path at a socket of the host's, gets nothing served.

Each generation's ``$PORT`` is drawn at random (the system's CSPRNG) from ``GG_SERVICE_PORTS``
outside the kernel's ephemeral range (:func:`generation_port`), so what the kernel hands out
tells nothing of it; a port something else listens on first is found by :func:`foreign` and the
generation started again on another (gg.runner.service).
"""

from __future__ import annotations

import errno
import os
import secrets
import socket
import stat
import struct
from collections.abc import Callable, Mapping
from pathlib import Path

from gg.domain.services import ENV_SERVICE_PORTS, draw_from, port_range

EPHEMERAL = "/proc/sys/net/ipv4/ip_local_port_range"
RANDOM_TRIES = 64  # random draws before the range is walked in a random order


class NotTheGeneration(ConnectionRefusedError):
    """What answers at the generation's address is not the generation's own: never served."""


_SOCK_DIAG, _BY_FAMILY, _DUMP, _DONE, _ERROR = 4, 20, 0x301, 3, 2  # netlink sock_diag(7)
_TCP_LISTEN = 10


def listeners(port: int) -> set[int]:
    """The inode of every TCP socket listening on ``port`` (any address, either family) in
    this network namespace: asked of the kernel's sock_diag for listening sockets only (about
    0.2 ms), or read from ``/proc/net/tcp*`` (every socket of the namespace: milliseconds)
    where netlink is refused."""
    try:
        return _diag_listeners(port)
    except OSError:
        return _proc_listeners(port)


def _diag_listeners(port: int) -> set[int]:
    found: set[int] = set()
    for family in (socket.AF_INET, socket.AF_INET6):
        with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, _SOCK_DIAG) as link:
            link.settimeout(5)
            # inet_diag_req_v2: family, protocol, ext, pad, states; a zero inet_diag_sockid
            ask = struct.pack("=BBBBI", family, socket.IPPROTO_TCP, 0, 0,
                              1 << _TCP_LISTEN) + bytes(48)
            link.sendall(struct.pack("=IHHII", 16 + len(ask), _BY_FAMILY, _DUMP, 1, 0) + ask)
            done = False
            while not done:
                data = link.recv(65536)
                if not data:
                    raise OSError("sock_diag closed its answer early")
                at = 0
                while at + 16 <= len(data):
                    length, kind = struct.unpack_from("=IH", data, at)
                    if kind == _DONE:
                        done = True
                        break
                    if kind == _ERROR or length < 16:
                        raise OSError("sock_diag refused the request")
                    # inet_diag_msg: 4 bytes, then the sockid (source port first, big
                    # endian), expires, rqueue, wqueue, uid, inode
                    if struct.unpack_from(">H", data, at + 20)[0] == port:
                        found.add(struct.unpack_from("=I", data, at + 16 + 68)[0])
                    at += (length + 3) & ~3
    return found


def _proc_listeners(port: int) -> set[int]:
    found: set[int] = set()
    wanted = f":{port:04X}"
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as rows:
                next(rows, None)
                for row in rows:
                    cells = row.split()
                    if len(cells) > 9 and cells[3] == "0A" and cells[1].endswith(wanted):
                        found.add(int(cells[9]))
        except OSError:
            continue
    return found


def socket_inodes(pid: int) -> set[int]:
    """The inode of every socket held by ``pid`` or a process under it."""
    import psutil

    try:
        tree = [pid, *(p.pid for p in psutil.Process(pid).children(recursive=True))]
    except psutil.Error:
        return set()
    held: set[int] = set()
    for each in tree:
        try:
            fds = os.listdir(f"/proc/{each}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{each}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                held.add(int(target[8:-1]))
    return held


def connect_own_socket(path: Path, timeout: float) -> socket.socket:
    """Connect to the Unix socket the generation made at ``path``, never through a symlink:
    the file itself (opened without following a link) must be a socket on the workspace's
    file system, owned by the workspace's owner (the generation's user), and the connection
    goes to that very inode (``/proc/self/fd/N`` of it). A flight that replaces the path with
    a link to a socket elsewhere on the host (a container engine's, an agent's) gets nothing
    served (docs/services.md)."""
    parent = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fd = os.open(path.name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
        try:
            here, there = os.fstat(parent), os.fstat(fd)
            if not stat.S_ISSOCK(there.st_mode) or there.st_dev != here.st_dev \
                    or there.st_uid != here.st_uid:
                raise NotTheGeneration(f"{path.name} is not a socket the generation made in "
                                       "its workspace")
            unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            unix.settimeout(timeout)
            try:
                unix.connect(f"/proc/self/fd/{fd}")
            except OSError:
                unix.close()
                raise
            return unix
        finally:
            os.close(fd)
    finally:
        os.close(parent)


def listen_exclusively(port: int) -> socket.socket:
    """Listen on ``port`` on every address of both families, so that nothing else on the
    host can take it beside us: one dual-stack socket (``[::]`` with IPV6_V6ONLY off, which
    holds the IPv4 port too) where the host has IPv6, else ``0.0.0.0``. Never SO_REUSEPORT:
    with it, another socket of the same user could join and be handed every other
    connection. (SO_REUSEADDR, which create_server sets, only lets a restart reuse a port
    whose old connections linger; it never lets two listen.)"""
    if socket.has_dualstack_ipv6():
        try:
            return socket.create_server(("::", port), family=socket.AF_INET6, backlog=256,
                                        dualstack_ipv6=True)
        except OSError as exc:
            if exc.errno not in (errno.EAFNOSUPPORT, errno.EADDRNOTAVAIL):
                raise
    return socket.create_server(("0.0.0.0", port), backlog=256)


def ephemeral_range(path: str = EPHEMERAL) -> tuple[int, int] | None:
    """The ports the kernel hands out by itself (``ip_local_port_range``), or None unknown."""
    try:
        with open(path) as values:
            low, high = (int(v) for v in values.read().split())
    except (OSError, ValueError):
        return None
    return low, high


def free_on_loopback(port: int) -> bool:
    """Nothing holds ``127.0.0.1:port`` now (a bind there without SO_REUSEADDR succeeds)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def pick_port(ranges: list[range], free: Callable[[int], bool],
              randbelow: Callable[[int], int] = secrets.randbelow) -> int | None:
    """A port of ``ranges`` that ``free`` says is free, drawn uniformly at random; None when
    none is. Random draws first (a range mostly free answers at once), then every port in a
    random order, so a range someone filled but one port of is still found."""
    every = sum(len(r) for r in ranges)
    if every == 0:
        return None

    def nth(n: int) -> int:
        for r in ranges:
            if n < len(r):
                return r[n]
            n -= len(r)
        raise IndexError(n)

    for _ in range(min(RANDOM_TRIES, every)):
        port = nth(randbelow(every))
        if free(port):
            return port
    order = list(range(every))
    for i in range(every - 1, 0, -1):  # Fisher-Yates with the CSPRNG
        j = randbelow(i + 1)
        order[i], order[j] = order[j], order[i]
    return next((nth(n) for n in order if free(nth(n))), None)


def generation_port(environ: Mapping[str, str] | None = None) -> int:
    """A ``$PORT`` for a generation: drawn from ``GG_SERVICE_PORTS`` (the runner's own
    environment) outside the kernel's ephemeral range, skipping what is in use. When every
    port there is held (a flight that bound them all), a port the kernel hands out, rather
    than no service at all."""
    environ = os.environ if environ is None else environ
    wanted = port_range(environ.get(ENV_SERVICE_PORTS))
    port = pick_port(draw_from(wanted, ephemeral_range()), free_on_loopback)
    if port is not None:
        return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def foreign(port: int, own: Callable[[], set[int]]) -> frozenset[int]:
    """The sockets listening on ``port`` that are not among ``own()`` (the inodes of the
    generation's processes' sockets, read only when something listens)."""
    found = listeners(port)
    if not found:
        return frozenset()
    return frozenset(found - own())
