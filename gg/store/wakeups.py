"""Wake-ups between replicas: PostgreSQL's NOTIFY to announce, one LISTEN connection to hear.

A replica announces each wake-up (``gg.control.core.Signals``) on one channel with
``pg_notify``. Inside a transaction the store holds the line and sends the transaction's
lines in one statement just before its COMMIT (``PgDatabase.notify_at_commit``); PostgreSQL
delivers them when it commits, and a rollback (also of a savepoint) takes them back, so a
replica hears only what committed, and hears it after it committed: a claim woken by it reads
the change. Outside a transaction it is sent at once.

Each replica keeps one connection that LISTENs (:class:`Listener`, a thread of its own) and
hands every line heard to a callback. When that connection breaks it is made again; since
announcements made meanwhile are lost, the callback ``missed`` is called once it listens
again, so whoever waits looks again at the store. SQLite has one server and no replicas:
nothing here is used with it.
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    import psycopg

log = logging.getLogger("gg.store")

CHANNEL = "gg_wake"
PAYLOAD_MAX = 7000  # bytes a notification may carry (PostgreSQL's limit is 8000)


def shared(db) -> bool:
    """Whether ``db`` may be shared by several replicas (it is PostgreSQL)."""
    return getattr(db, "dialect", "sqlite") == "postgresql"


def announce(db, line: str) -> None:
    """``line`` to every replica listening (see the module): in the current transaction when
    there is one, at once otherwise."""
    if len(line.encode()) > PAYLOAD_MAX:
        return  # ids are short; a line this long is nobody's wake-up
    if db.in_transaction():
        db.notify_at_commit(CHANNEL, line)
        return
    try:
        db.one("SELECT pg_notify(?, ?)", (CHANNEL, line))
    except Exception as exc:  # noqa: BLE001 - the change committed; its callers hear so
        log.warning("announcing a wake-up to the other replicas: %s: %s",
                    type(exc).__name__, exc)


class Sender:
    """A connection of its own (autocommit, never the writer's: a keystroke does not wait for
    a group commit) that announces lines in a thread, in the order :meth:`send` was called.
    PostgreSQL delivers one session's notifications in the order they were sent, so every
    listener hears these lines in that order. A line that cannot be sent after one fresh
    connection is dropped and ``lost()`` called."""

    def __init__(self, url: str, lost: Callable[[], None] = lambda: None):
        self.url = url
        self.lost = lost
        self._lines: queue.SimpleQueue = queue.SimpleQueue()
        self._conn: psycopg.Connection | None = None
        self._start = threading.Lock()
        self._thread: threading.Thread | None = None  # started by the first line

    def send(self, line: str) -> None:
        with self._start:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name="gg-wake-sender")
                self._thread.start()
        self._lines.put(line)

    def stop(self, timeout: float = 5.0) -> None:
        with self._start:
            thread = self._thread
        if thread is not None:
            self._lines.put(None)
            thread.join(timeout)

    def _run(self) -> None:
        while (line := self._lines.get()) is not None:
            for attempt in (1, 2):
                try:
                    self._notify(line)
                    break
                except Exception as exc:  # noqa: BLE001 - the database went away
                    self._close()
                    if attempt == 2:
                        log.warning("announcing to the other replicas: %s: %s",
                                    type(exc).__name__, exc)
                        self.lost()
        self._close()

    def _notify(self, line: str) -> None:
        import psycopg

        if self._conn is None or self._conn.closed or self._conn.broken:
            self._conn = psycopg.connect(self.url, autocommit=True, connect_timeout=10)
        self._conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, line))

    def _close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:  # noqa: BLE001
                pass
            self._conn = None


class Listener:
    """One LISTEN connection in a thread: ``heard(line)`` for every announcement, then
    ``missed()`` after each time the connection was made again. :meth:`stop` ends it."""

    def __init__(self, url: str, heard: Callable[[str], None], missed: Callable[[], None],
                 *, retry: float = 1.0):
        self.url = url
        self.heard = heard
        self.missed = missed
        self.retry = retry
        self.listening = threading.Event()  # set while the connection listens
        self._stop = threading.Event()
        self._conn: psycopg.Connection | None = None
        self._thread = threading.Thread(target=self._run, daemon=True, name="gg-wake-listener")

    def start(self) -> "Listener":
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        first = True
        while not self._stop.is_set():
            try:
                self._listen(first)
            except Exception as exc:  # noqa: BLE001 - the database went away: again, later
                if not self._stop.is_set():
                    log.warning("listening for other replicas' wake-ups: %s: %s; again in %gs",
                                type(exc).__name__, exc, self.retry)
            finally:
                self.listening.clear()
                if self._conn is not None:
                    try:
                        self._conn.close()
                    except Exception:  # noqa: BLE001
                        pass
                    self._conn = None
            first = False
            self._stop.wait(self.retry)

    def _listen(self, first: bool) -> None:
        import psycopg

        self._conn = conn = psycopg.connect(self.url, autocommit=True, connect_timeout=10)
        conn.execute(f"LISTEN {CHANNEL}")
        self.listening.set()
        if not first:
            self.missed()
        while not self._stop.is_set():
            for note in conn.notifies(timeout=0.5):
                self.heard(note.payload)
            if conn.broken or conn.closed:
                raise ConnectionError("the listening connection closed")
