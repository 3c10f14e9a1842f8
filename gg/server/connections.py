"""Bounded connections: the server keeps answering however many sockets are opened to it.

Every open socket costs a file descriptor, and a process has only so many. Without a bound,
idle sockets that never send a request exhaust them; the server then cannot accept anyone
(``/v1/health`` included) and the event loop reports every failed ``accept()``. So:

- **A cap on connections** (``GG_MAX_CONNECTIONS``; by default :func:`default_cap` of the
  file limit, which is first raised to the hard limit). A connection beyond the cap replaces
  the oldest *stranger*: a connection with no whole request in hand (a socket that sent
  nothing, half a request, headers and part of a body, an upgraded WebSocket, or one idle
  between keep-alive requests). Only a connection whose request the server has read whole
  (a parked claim, say) is never replaced; when every connection is such, the newcomer is
  closed at once. Descriptors in use stay below the file limit, with a reserve for the
  database and the logs.
- **A cap per source** (``GG_MAX_CONNECTIONS_PER_SOURCE``; by default a quarter of the cap):
  one peer address holds at most that many strangers; beyond it, its new connections are
  closed as they are accepted, before a byte is read, so one host's flood (upgrades nobody
  finishes, bodies that never end, idle keep-alive sockets) costs the loop next to nothing
  and cannot push out anyone else's connections. Behind a proxy every connection comes from
  the proxy's address: raise it to the cap there (docs/server.md).
- **Deadlines**: a connection that has not sent complete request headers within
  ``GG_HEADER_TIMEOUT`` is closed, whether it just opened or started a new request on a
  kept-alive connection; a request whose whole body has not arrived within
  ``GG_BODY_TIMEOUT`` of its headers is answered 408 and closed; idle keep-alive connections
  close after ``GG_KEEP_ALIVE_TIMEOUT``; a WebSocket is pinged, and closed when its peer stops
  answering (uvicorn's ping interval and timeout).
- **Requests in hand** (``GG_MAX_REQUESTS_IN_HAND``, 1,024): a request counts once its
  headers are read, until it is answered or waits without working (a parked claim, a long
  poll: :func:`settled`). While that many are in hand, a runner's next call is left unread
  (its first bytes kept, the socket no longer read) until its turn comes; a person's
  request is read at once all the same: a fleet
  of 10,000 reconnecting at once after a restart waits in the kernel's buffers, not as
  10,000 parsed requests in the server's memory, which the allocator keeps long after.
- **One log line per episode**: reaching the cap, and failing to ``accept()`` (EMFILE and
  friends), are each logged when they start and when they end, never once per attempt.

The seam is uvicorn's HTTP protocol class: :func:`protocol_for` subclasses it (httptools'
parser where installed, h11 otherwise), so the timeouts hold for every request the server
reads. The server runs on uvloop where installed (``uvicorn[standard]``), asyncio's loop
otherwise.
"""

from __future__ import annotations

import asyncio
import collections
import errno
import gc
import logging
import resource
from typing import Callable, Protocol

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from gg.error_codes import ErrorCode
from gg.server.one_send import OneSend

try:  # uvicorn[standard]: the C parser and loop; pure-Python ones otherwise
    import uvloop  # noqa: F401
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    FastProtocol: type = HttpToolsProtocol
    LOOP = "uvloop"
except ImportError:  # pragma: no cover - a bare install
    FastProtocol, LOOP = H11Protocol, "asyncio"

log = logging.getLogger("gg.server")

# An ASGI scope key: a request that holds its connection open (a parked claim) may put here
# what to do if the connection is lost before it is answered (the client went away).
ON_LOST = "gg.on_connection_lost"
# An ASGI scope key: the connection a request came on, for :func:`settled`.
CONNECTION = "gg.connection"
# Requests never counted in hand: a load balancer's health check and a scrape (their request
# line starts the bytes read).
UNCOUNTED = (b"GET /v1/health ", b"GET /v1/health?", b"GET /metrics ", b"GET /metrics?")
# The only requests that wait for a turn: a runner's calls, the traffic of a fleet coming back
# at once. A person's request is read at once, however many runners wait.
TAKES_TURNS = b"POST /v1/runner/"


def settled(scope) -> None:
    """The request of ``scope`` now waits without working (a parked claim, a long poll): the
    gate no longer counts it in hand, and reads the next request waiting for its turn."""
    conn = scope.get(CONNECTION)
    if conn is not None:
        conn.gg_settle()

CAP_CEILING = 65_536  # idle connections cost memory too; above this, raise it explicitly
_ACCEPT_FAILED = "socket.accept() out of system resource"  # asyncio's message, all versions


def reserve_for(limit: int) -> int:
    """Descriptors kept back from connections: the database, its WAL, logs, the listener."""
    return max(256, limit // 16)


def default_cap(limit: int) -> int:
    """The connection cap for a process allowed ``limit`` open files."""
    return max(16, min(CAP_CEILING, limit - reserve_for(limit)))


def raise_file_limit() -> int:
    """Raise the soft open-file limit to the hard limit where allowed; the soft limit after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else 1 << 20
    if soft == resource.RLIM_INFINITY or soft >= target:
        return soft if soft != resource.RLIM_INFINITY else target
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        return target
    except (ValueError, OSError):
        return soft


class Connection(Protocol):
    """A connection as the gate holds it: uvicorn's HTTP protocol as :func:`protocol_for`
    makes it, with the peer address the gate notes on it when it admits it."""

    transport: asyncio.Transport
    gg_source: str


class Gate:
    """Counts the connections this server holds and decides who may stay.

    A *stranger* is a connection with no whole request in hand (see the module docstring);
    strangers are kept oldest first, overall and per peer address, and are the only ones
    ever replaced."""

    def __init__(self, cap: int, header_timeout: float, *, per_source: int = 0,
                 body_timeout: float = 30.0, most_in_hand: int = 0):
        self.cap = cap
        self.most_in_hand = most_in_hand  # 0: no bound
        self.in_hand = 0  # requests read or being read, neither answered nor settled
        self.waiting: collections.deque = collections.deque()  # their next request unread
        self.per_source = per_source if per_source > 0 else max(16, cap // 4)
        self.header_timeout = header_timeout
        self.body_timeout = body_timeout
        self.admitted: set[Connection] = set()
        self.idle: dict[Connection, None] = {}  # the strangers, oldest first
        self.sources: dict[str, dict[Connection, None]] = {}  # the same, by peer address
        self.full = False  # in a cap episode
        self.crowded: set[str] = set()  # sources in a per-source cap episode
        self.accept_failures = 0  # failed accept() calls in the current episode

    def admit(self, conn: Connection, source: str = "") -> bool:
        if self.accept_failures:
            log.warning("accepting connections again (%d accept() attempts failed while the "
                        "process was out of file descriptors)", self.accept_failures)
            self.accept_failures = 0
        own = self.sources.get(source)
        if own is not None and len(own) >= self.per_source:
            if source not in self.crowded:  # refused before a byte is read: the flood pays
                self.crowded.add(source)    # for itself, and costs the loop next to nothing
                log.warning("%s holds %d connections with no whole request, the cap per source "
                            "(GG_MAX_CONNECTIONS_PER_SOURCE): its new ones are closed at once",
                            source or "a local socket", self.per_source)
            return False
        if len(self.admitted) >= self.cap:
            if not self.full:
                self.full = True
                log.warning("%d connections open, the cap (GG_MAX_CONNECTIONS): each new one "
                            "now replaces the oldest with no whole request", self.cap)
            victim = next(iter(self.idle), None)
            if victim is None:  # every connection is busy with a request
                return False
            self._close(victim)
        conn.gg_source = source
        self.admitted.add(conn)
        self.idle_again(conn)
        return True

    def may_read(self, conn: Connection) -> bool:
        """A request starts on ``conn``: True when it may be read now; else ``conn`` waits
        its turn behind those already waiting (:meth:`done` hands turns on, oldest first)."""
        if self.most_in_hand and (self.waiting or self.in_hand >= self.most_in_hand):
            self.waiting.append(conn)
            return False
        return True

    def done(self, loop: asyncio.AbstractEventLoop) -> None:
        """A request in hand was answered or settled: the oldest one waiting is read next."""
        self.in_hand -= 1
        if self.in_hand < self.most_in_hand:
            self.next_turn(loop)

    def next_turn(self, loop: asyncio.AbstractEventLoop) -> None:
        """Hand the turn to the oldest connection still open among those waiting."""
        while self.waiting:
            conn = self.waiting.popleft()
            if conn in self.admitted:  # not closed meanwhile
                loop.call_soon(conn.gg_go)
                return

    def busy(self, conn: Connection) -> None:
        """``conn``'s request is read whole: it is no stranger until it is answered."""
        self.idle.pop(conn, None)
        own = self.sources.get(getattr(conn, "gg_source", ""))
        if own is not None:
            own.pop(conn, None)
            if len(own) < self.per_source * 9 // 10:
                self._left(conn.gg_source, own)

    def idle_again(self, conn: Connection) -> None:
        if conn in self.admitted:
            self.busy(conn)
            self.idle[conn] = None  # to the back: the most recently active
            self.sources.setdefault(conn.gg_source, {})[conn] = None

    def forget(self, conn: Connection) -> None:
        self.busy(conn)
        self.admitted.discard(conn)
        if self.full and len(self.admitted) < self.cap * 9 // 10:
            self.full = False
            log.warning("connections back under the cap (%d open)", len(self.admitted))

    def _close(self, conn: Connection) -> None:
        self.forget(conn)
        if getattr(conn, "gg_started", False):  # half a request, a body or a WebSocket:
            conn.transport.abort()              # nothing of it is owed an answer, nor a flush
        else:
            conn.transport.close()

    def _left(self, source: str, own: dict) -> None:
        if not own:
            del self.sources[source]
        if source in self.crowded:
            self.crowded.discard(source)
            log.warning("%s is back under the cap per source", source or "a local socket")

    def loop_exception(self, loop: asyncio.AbstractEventLoop, context: dict) -> None:
        """The loop's exception handler: a failed accept() is logged once per episode.
        asyncio reports each failed attempt with a traceback, and keeps trying the whole
        backlog on every retry, so without this one episode writes thousands of them."""
        if str(context.get("message", "")).startswith(_ACCEPT_FAILED):
            if not self.accept_failures:
                exc = context.get("exception")
                code = errno.errorcode.get(getattr(exc, "errno", None) or 0, "an error")
                log.warning("cannot accept connections: out of file descriptors (%s); "
                            "logged again when accepting resumes", code)
            self.accept_failures += 1
            return
        loop.default_exception_handler(context)


def protocol_for(gate: Gate, base: type = FastProtocol) -> type:
    """uvicorn's HTTP protocol, admitted by ``gate``, closed when headers are late and
    answered 408 when a body is."""

    class Bounded(base):
        _refused = False
        _upgraded = False
        gg_started = False  # bytes of a request (or a WebSocket) arrived: a close is abrupt
        _header_timer: asyncio.TimerHandle | None = None
        _body_timer: asyncio.TimerHandle | None = None
        _held: bytes | None = None  # a request's first bytes, waiting for its turn
        _turn = False  # given its turn, and not yet counted in hand
        gg_in_hand = False  # this connection's request counts in the gate's in hand

        def connection_made(self, transport) -> None:
            peer = transport.get_extra_info("peername")
            source = peer[0] if isinstance(peer, tuple) and peer else ""
            if not gate.admit(self, source):
                self._refused = True
                transport.abort()
                return
            super().connection_made(OneSend(transport, self.loop))  # a response, one send
            self._arm()

        def connection_lost(self, exc) -> None:
            if self._refused:
                return
            self._disarm()
            self._disarm_body()
            gate.forget(self)
            self.gg_settle()
            if self._turn:  # closed with its turn unused: the next one's
                self._turn = False
                gate.next_turn(self.loop)
            if self._in_request():  # gone before its answer: a parked claim stops waiting
                on_lost = (self.scope or {}).get(ON_LOST)
                if on_lost is not None:
                    on_lost()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            self.gg_started = True
            if self._held is not None:  # read before the pause took hold
                self._held += data
                return
            if not (self.gg_in_hand or self._upgraded or self._in_request()):
                if data.startswith(UNCOUNTED):
                    return self._read(data, counted=False)
                if data.startswith(TAKES_TURNS) and not gate.may_read(self):  # its turn later
                    self._held = data
                    self._disarm()  # its headers are late because of us, not of the peer
                    self._unset_keepalive_if_required()  # nor is it idle
                    self.transport.pause_reading()
                    if b"\r\n\r\n" in data:  # a request's whole head: no stranger
                        gate.busy(self)
                    return
            self._read(data)

        def gg_go(self) -> None:
            """This connection's turn: read what was held (it counts in hand once its
            headers are read); closed meanwhile, the turn goes to the next."""
            data, self._held = self._held, None
            if data is None or self.transport.is_closing():
                gate.next_turn(self.loop)
                return
            self._turn = True
            self.transport.resume_reading()
            self._read(data)

        def gg_settle(self) -> None:
            """This connection's request no longer counts in hand."""
            if self.gg_in_hand:
                self.gg_in_hand = False
                self.scope.pop(CONNECTION, None)  # no cycle left behind in a kept request
                gate.done(self.loop)

        def _read(self, data: bytes, counted: bool = True) -> None:
            super().data_received(data)
            if counted and not self.gg_in_hand and self._in_request():  # headers read: in hand
                self.gg_in_hand, self._turn = True, False
                gate.in_hand += 1
                self.scope[CONNECTION] = self
            if self._upgraded or self.transport.is_closing():
                return
            if self._in_request():
                self._disarm()
                if self.cycle.more_body:  # headers, and not yet the whole body: a stranger
                    if self._body_timer is None:  # the whole body is due in time
                        self._body_timer = self.loop.call_later(gate.body_timeout,
                                                                self._body_late)
                else:
                    self._disarm_body()
                    gate.busy(self)
            elif self._header_timer is None:  # the first bytes of a request on a kept-alive
                self._arm()                   # connection: its headers are due in time too

        def handle_websocket_upgrade(self, *event) -> None:  # h11's passes the request
            """A WebSocket (a console, docs/console.md) holds its connection for as long as it
            lasts: no header timeout, and counted until it closes; a stranger all along (its
            ping timeout ends it when its peer stops answering), so upgrades nobody finishes
            are capped like any other stranger."""
            self._upgraded = True
            self._disarm()
            self._disarm_body()
            self.gg_settle()
            super().handle_websocket_upgrade(*event)
            ws = self.transport.get_protocol()
            if ws is self:
                return
            lost = ws.connection_lost

            def connection_lost(exc) -> None:
                gate.forget(self)
                lost(exc)

            ws.connection_lost = connection_lost

        def on_response_complete(self) -> None:
            self.gg_settle()
            super().on_response_complete()
            self.gg_started = False
            if not self.transport.is_closing():
                gate.idle_again(self)

        def _in_request(self) -> bool:
            return self.cycle is not None and not self.cycle.response_complete

        def _arm(self) -> None:
            self._header_timer = self.loop.call_later(gate.header_timeout, self._headers_late)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _disarm_body(self) -> None:
            if self._body_timer is not None:
                self._body_timer.cancel()
                self._body_timer = None

        def _headers_late(self) -> None:
            self._header_timer = None
            if not self._in_request() and not self.transport.is_closing():
                self.transport.close()

        def _body_late(self) -> None:
            """The whole body did not arrive in time: one sentence, 408, and the connection
            closed (the request's handler hears it as a client gone)."""
            self._body_timer = None
            if self._in_request() and self.cycle.more_body and not self.transport.is_closing():
                if not self.cycle.response_started:
                    self.transport.write(_LATE_BODY)
                self.transport.close()

    return Bounded


_LATE_BODY_TEXT = ('{"error": {"code": "%s", "message": "the request body did not arrive in time '
                   '(GG_BODY_TIMEOUT)"}}' % ErrorCode.REQUEST_TIMEOUT).encode()
_LATE_BODY = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
              b"connection: close\r\ncontent-length: " + str(len(_LATE_BODY_TEXT)).encode()
              + b"\r\n\r\n" + _LATE_BODY_TEXT)


class BoundedServer(uvicorn.Server):
    """uvicorn's server with the gate's loop handler, and ``on_stopping`` called first
    thing on shutdown (so parked claims are answered before connections are drained)."""

    def __init__(self, config: uvicorn.Config, gate: Gate, on_stopping: Callable[[], None]):
        super().__init__(config)
        self.gate = gate
        self.on_stopping = on_stopping

    async def startup(self, sockets=None) -> None:
        asyncio.get_running_loop().set_exception_handler(self.gate.loop_exception)
        await super().startup(sockets=sockets)

    async def shutdown(self, sockets=None) -> None:
        self.on_stopping()
        await super().shutdown(sockets=sockets)


def plan_cap(configured: int, limit: int) -> tuple[int, str | None]:
    """The cap to use, and a sentence for the operator when the file limit is too low."""
    if configured > 0:
        if configured > limit - reserve_for(limit):
            return configured, (f"GG_MAX_CONNECTIONS={configured} leaves too few of the "
                                f"{limit} open files this process may have for the database "
                                "and logs; accept errors are possible")
        return configured, None
    cap = default_cap(limit)
    if cap < 10_000:
        return cap, (f"the open-file limit ({limit}) allows only {cap} connections; raise it "
                     "(ulimit -n) to serve a large fleet")
    return cap, None


def serve(app, host: str, port: int, settings, on_stopping: Callable[[], None],
          say: Callable[[str], None], tls: tuple[str, str] | None = None) -> None:
    """Serve ``app`` (the ASGI app uvicorn calls: ``gg.server.ahead.front`` of gg's app);
    ``tls`` is (certificate chain file, private key file) for HTTPS."""
    limit = raise_file_limit()
    cap, warning = plan_cap(settings.max_connections, limit)
    if warning:
        say(warning)
    gate = Gate(cap, settings.header_timeout, per_source=settings.max_connections_per_source,
                body_timeout=settings.body_timeout, most_in_hand=settings.max_requests_in_hand)
    state = getattr(app, "state", None)
    if state is not None:  # its /metrics reads the requests in hand and waiting
        state.gate = gate
    config = server_config(app, host, port, settings, gate, tls)
    freeze_start_up()
    BoundedServer(config, gate, on_stopping).run()


# The collector's thresholds in a server (default 700, 10, 10): see freeze_start_up
COLLECT_THRESHOLDS = (700, 10, 200)


def freeze_start_up() -> int:
    """Take what start-up made (modules, the app, the settings: hundreds of thousands of
    objects that live as long as the process) out of the garbage collector's sight; how many.

    Python's full collection walks every tracked object. With a fleet of thousands holding
    claims, a full collection found nothing to free yet stalled the loop for 300–700 ms, the
    check-ins' p99; frozen, the start-up objects are no longer walked (docs/performance.md).
    The parked claims' own objects (each re-park makes a few hundred that live its wait) still
    are, so a full walk comes less often (:data:`COLLECT_THRESHOLDS`: after 200 collections of
    the middle generation instead of 10); the young generations are collected as often as
    before, so short-lived reference cycles (a refused request's) never pile up."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*COLLECT_THRESHOLDS)
    return gc.get_freeze_count()


def server_config(app, host: str, port: int, settings, gate: Gate,
                  tls: tuple[str, str] | None = None) -> uvicorn.Config:
    """uvicorn's configuration: the gate's protocol, the timeouts and the listen backlog."""
    # ASGI 3 named, not guessed: gg's front is a plain function handing back what answers
    return uvicorn.Config(app, host=host, port=port, log_level="warning", loop=LOOP,
                          interface="asgi3",
                          http=protocol_for(gate), backlog=settings.listen_backlog,
                          timeout_keep_alive=settings.keep_alive_timeout,
                          # uvicorn annotates it int; it is seconds, handed to asyncio.wait_for
                          timeout_graceful_shutdown=0.5,  # type: ignore[arg-type]
                          ssl_certfile=tls[0] if tls else None,
                          ssl_keyfile=tls[1] if tls else None)
