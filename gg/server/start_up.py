"""What a control plane makes sure of before it creates or opens anything.

- **Its port is free.** ``gg server`` on a port another program holds used to create an
  organisation, print "control plane on …" (the other server's address) and then fail with
  uvicorn's raw ``Errno 98``. The port is tried first, and a taken one is one sentence.
- **Its SQLite data dir is its own.** Two servers on one data dir both started, and every
  flight waited for the other's write lock. The first holds ``DATA_DIR/server.lock`` (an
  ``flock`` the kernel drops when the process ends, however it ends) for as long as it runs;
  a second is refused, naming the first's pid. (PostgreSQL replicas share a database on
  purpose; they take no such lock.)
- **Its memory allocator keeps few arenas.** glibc's ``malloc`` gives every thread that
  allocates an arena of its own (up to eight a core), and what one arena frees another does
  not reuse. Bounded before the server starts a thread (:func:`bound_malloc_arenas`).
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import socket
from collections.abc import Mapping
from pathlib import Path

LOCK_NAME = "server.lock"


# glibc's malloc.h: mallopt's parameter for the most arenas
M_ARENA_MAX = -8


def glibc() -> bool:
    """Whether this process's C library is GNU's (whose malloc has arenas to bound)."""
    try:
        return bool(os.confstr("CS_GNU_LIBC_VERSION"))
    except (ValueError, OSError):
        return False


def bound_malloc_arenas(arenas: int, environ: Mapping[str, str] = os.environ) -> int | None:
    """Bound this process's glibc ``malloc`` to ``arenas`` arenas (``GG_MALLOC_ARENAS``);
    the bound set, or None where nothing was set: 0 asked for glibc's own rule, the operator
    set ``MALLOC_ARENA_MAX`` (glibc read it at start, and it wins), or the C library is not
    glibc. Call it before the server starts its threads: a thread keeps the arena it has."""
    if arenas <= 0 or "MALLOC_ARENA_MAX" in environ or not glibc():
        return None
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return None
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return arenas if mallopt(M_ARENA_MAX, arenas) == 1 else None


class StartRefused(Exception):
    """The server cannot start here; the message is the one sentence to show."""


def check_port(host: str, port: int) -> None:
    """Raise ``StartRefused`` when ``host:port`` cannot be listened on (bound as uvicorn binds
    it, with SO_REUSEADDR, so a port left in TIME_WAIT is not called taken)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise StartRefused(f"port {port} on {host} is in use: stop what listens there, or "
                               "start gg server with another --listen HOST:PORT") from None
        if exc.errno == errno.EADDRNOTAVAIL:
            raise StartRefused(f"{host} is not an address of this machine: --listen takes one "
                               "of its own addresses (or 0.0.0.0)") from None
        if exc.errno == errno.EACCES:
            raise StartRefused(f"port {port} needs privileges this user does not have: choose a "
                               "port above 1023") from None
        raise StartRefused(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    finally:
        sock.close()


def hold_data_dir(directory: Path) -> int:
    """Lock ``directory`` for this process's lifetime; the lock file's descriptor (kept open
    on purpose). Raise ``StartRefused`` when another server holds it."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = directory / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
            os.close(fd)
            raise
        holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise StartRefused(f"another gg server (pid {holder}) is using the data dir "
                           f"{directory}: stop it first, or give this one its own "
                           "--data-dir") from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd
