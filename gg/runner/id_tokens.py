"""A flight's way to an identity token: a Unix socket in its workspace that its runner serves
(docs/jobs.md, "Identity tokens").

Each flight gets a **request token** (random, this flight's only) and the socket's path in
its environment (``GG_ID_TOKEN_REQUEST_TOKEN``, ``GG_ID_TOKEN_SOCKET``). ``gg id-token
--audience AUD`` sends one line to the socket; the runner checks the request token (in
constant time), then asks the control plane with its own credential and the flight's epoch
as it holds it now, and answers one line::

    flight ──{"request_token", "audience"}──> socket (the runner) ──credential, epoch──>
    control plane ──token or refusal──> runner ──{"token", "expires_at"} or {"error"}──> flight

The flight never sees the runner's credential. A socket in the workspace reaches every
flight whatever its isolation (a sandbox binds the workspace; ``egress: none`` cuts the
network, not a path on the file system; a container mounts the workspace at /workspace). On
a root runner the socket is handed to the flight's identity with the workspace (0600 in a
0711 directory): no other flight's uid reaches it. The runner listens on the socket it made
and never connects to the path, so a flight that replaces it harms only itself.

One thread per runner (:data:`DESKS`) waits on every flight's socket; an answer, which waits
on the control plane, takes a short thread of its own.
"""

from __future__ import annotations

import json
import os
import secrets
import selectors
import socket
import threading
from pathlib import Path
from typing import Callable, cast

from gg.domain.id_tokens import audience_problem
from gg.domain.tokens import same_digest
from gg.error_codes import ErrorCode

SOCKET_NAME = ".gg-id-token.sock"
ENV_SOCKET = "GG_ID_TOKEN_SOCKET"
ENV_REQUEST_TOKEN = "GG_ID_TOKEN_REQUEST_TOKEN"
ASK_BYTES = 8192  # one request line at most
TALK_TIMEOUT = 10.0  # seconds a flight may take to send its line, or to read the answer
MINT_PATIENCE = 20.0  # seconds the runner keeps asking a control plane that does not answer


class IdTokenError(Exception):
    """The request was refused: its HTTP-like ``status``, ``code`` and one-sentence message."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def _via_dir(path: Path) -> tuple[int, str]:
    """(a descriptor of ``path``'s directory, a short address of ``path`` through it): a
    socket's address holds 107 bytes, a workspace path may be longer."""
    parent = os.open(path.parent, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    return parent, f"/proc/self/fd/{parent}/{path.name}"


class Desk:
    """One flight's socket and request token. ``mint(audience)`` asks the control plane for
    the flight as its lease is now; it raises IdTokenError for a refusal."""

    def __init__(self, mint: Callable[[str], dict]):
        self.mint = mint
        self.request_token = secrets.token_urlsafe(32)
        self.listener: socket.socket | None = None
        self.path: Path | None = None

    def environment(self, workspace: Path, inside: Path | None = None) -> dict[str, str]:
        """The flight's variables: where to ask (``inside``: the workspace as the flight
        sees it, a container's /workspace) and with what."""
        return {ENV_SOCKET: str((inside or workspace) / SOCKET_NAME),
                ENV_REQUEST_TOKEN: self.request_token}

    def open(self, workspace: Path) -> None:
        """Listen at the workspace's socket (before the workspace is handed to the flight's
        identity, which takes the socket with it)."""
        path = workspace / SOCKET_NAME
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        parent, address = _via_dir(path)
        try:
            try:
                os.unlink(address)
            except FileNotFoundError:
                pass
            listener.bind(address)
            os.chmod(address, 0o600)
        except OSError:
            listener.close()
            raise
        finally:
            os.close(parent)
        listener.listen(8)
        listener.setblocking(False)
        self.listener, self.path = listener, path
        DESKS.watch(self)

    def close(self) -> None:
        listener, self.listener = self.listener, None
        if listener is None:
            return
        DESKS.forget(listener)
        listener.close()
        if self.path is not None:
            try:
                os.unlink(self.path)
            except OSError:
                pass

    def answer(self, conn: socket.socket) -> None:
        """Read one request line from ``conn`` and answer it with one line."""
        try:
            conn.settimeout(TALK_TIMEOUT)
            try:
                reply = {"token": None, **self._serve(_read_line(conn))}
            except IdTokenError as exc:
                reply = {"error": {"status": exc.status, "code": exc.code,
                                   "message": exc.message}}
            conn.sendall(json.dumps(reply).encode() + b"\n")
        except OSError:
            pass  # the flight went away: nothing to answer
        finally:
            conn.close()

    def _serve(self, line: bytes) -> dict:
        try:
            ask = json.loads(line)
            token, audience = ask["request_token"], ask["audience"]
            if not isinstance(token, str) or not isinstance(audience, str):
                raise TypeError
        except (ValueError, KeyError, TypeError):
            raise IdTokenError(400, ErrorCode.BAD_REQUEST, "the request must be one JSON line "
                               "with request_token and audience") from None
        if not same_digest(token, self.request_token):
            raise IdTokenError(401, ErrorCode.UNAUTHORIZED, "the request token is not this "
                               f"flight's (it is ${ENV_REQUEST_TOKEN})")
        problem = audience_problem(audience)
        if problem:
            raise IdTokenError(400, ErrorCode.BAD_REQUEST, problem)
        return self.mint(audience)


def _read_line(conn: socket.socket) -> bytes:
    data = b""
    while b"\n" not in data:
        chunk = conn.recv(ASK_BYTES)
        if not chunk:
            break
        data += chunk
        if len(data) > ASK_BYTES:
            raise IdTokenError(413, ErrorCode.TOO_LARGE, f"a request is at most {ASK_BYTES} "
                               "bytes")
    return data.split(b"\n", 1)[0]


_EPOLL = getattr(selectors, "EpollSelector", ())


class Desks:
    """The runner's one thread waiting on every flight's socket; started with the first."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._selector: selectors.BaseSelector | None = None
        self._wake_r, self._wake_w = -1, -1
        # epoll sees a socket added or removed while the loop waits in it: no wake-up needed
        # (two a flight otherwise); a selector of another kind is woken to look again.
        self._sees_changes = False

    def watch(self, desk: Desk) -> None:
        with self._lock:
            if self._selector is None:
                self._selector = selectors.DefaultSelector()
                self._sees_changes = isinstance(self._selector, _EPOLL)
                self._wake_r, self._wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
                self._selector.register(self._wake_r, selectors.EVENT_READ, None)
                threading.Thread(target=self._loop, name="id-token-desks", daemon=True).start()
            assert desk.listener is not None, "a desk is watched once it listens"
            self._selector.register(desk.listener, selectors.EVENT_READ, desk)
        if not self._sees_changes:
            self._wake()

    def forget(self, listener: socket.socket) -> None:
        with self._lock:
            if self._selector is not None:
                try:
                    self._selector.unregister(listener)
                except (KeyError, ValueError):
                    pass
        if not self._sees_changes:
            self._wake()

    def _wake(self) -> None:
        try:
            os.write(self._wake_w, b".")
        except OSError:
            pass

    def _loop(self) -> None:
        selector = self._selector
        assert selector is not None, "the loop starts once its selector is made"
        while True:
            for key, _ in selector.select():
                if key.data is None:
                    try:
                        os.read(self._wake_r, 4096)
                    except BlockingIOError:
                        pass
                    continue
                desk: Desk = key.data
                try:
                    conn, _ = cast(socket.socket, key.fileobj).accept()
                except OSError:  # closed meanwhile, or nothing there after all
                    continue
                conn.setblocking(True)
                threading.Thread(target=desk.answer, args=(conn,), name="id-token",
                                 daemon=True).start()


DESKS = Desks()


def desk_for(run) -> Desk:
    """The desk of ``run`` (a gg.runner.flight.FlightRun): it mints with the runner's client
    for the flight's epoch as the runner holds it when asked."""
    from gg.client import ApiError, Unreachable

    def mint(audience: str) -> dict:
        try:
            minted = run.client.id_token(run.id, run.lease.epoch, audience,
                                         retry_for=MINT_PATIENCE)
        except Unreachable:
            raise IdTokenError(503, ErrorCode.UNREACHABLE, "the control plane did not answer "
                               "the runner; try again") from None
        except ApiError as exc:
            raise IdTokenError(exc.status, exc.code, exc.message) from None
        return minted.model_dump()

    return Desk(mint)


def ask(path: str, request_token: str, audience: str, timeout: float = 60.0) -> dict:
    """What ``gg id-token`` does inside the flight: one request line to the runner's socket,
    one answer; IdTokenError for a refusal (the runner's or the control plane's)."""
    parent, address = _via_dir(Path(path))
    try:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.settimeout(timeout)
        try:
            conn.connect(address)
            conn.sendall(json.dumps({"request_token": request_token,
                                     "audience": audience}).encode() + b"\n")
            data = b""
            while not data.endswith(b"\n"):
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
        finally:
            conn.close()
    finally:
        os.close(parent)
    try:
        answer = json.loads(data)
    except ValueError:
        raise IdTokenError(502, ErrorCode.ERROR, "the runner did not answer the request for an "
                           "identity token") from None
    error = answer.get("error")
    if error:
        raise IdTokenError(int(error.get("status") or 500), str(error.get("code")),
                           str(error.get("message")))
    return answer
