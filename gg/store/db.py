"""The SQLite connections: one writer that commits in groups, and readers of their own.

Durability: ``journal_mode=WAL`` with ``synchronous=FULL`` makes SQLite fsync the WAL at
every commit, so a lease grant that was answered to a runner survives a crash of the
machine, not only of the process (with ``NORMAL`` the last commits can be lost on power
failure). ``BEGIN IMMEDIATE`` takes the write lock at the start of every change, so the
read-decide-write of a claim is one atomic compare-and-set.

The write path (docs/architecture.md, "The write path"): one write connection, owned by
whoever holds its lock. :meth:`Database.submit` queues a unit of work (a function) for the
writer thread, which takes everything queued, runs ``BEGIN IMMEDIATE``, each unit inside
its own ``SAVEPOINT`` (a unit that raises rolls back only itself), then ONE ``COMMIT``: many
changes share one fsync, and no unit's future is resolved before that commit returned, so
nothing is acknowledged before it is durable. :meth:`Database.atomic` still works from any
thread (it takes the write lock and runs one transaction there, as before); inside a unit
it is a savepoint of the group. Reads outside a transaction use a read connection of the
calling thread (WAL readers never wait for the writer).
"""

from __future__ import annotations

import json
import logging
import os
import queue
import sqlite3
import threading
import time
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import sqlite_utils

from gg.errors import BadRequest
from gg.store.migrations import MIGRATIONS

log = logging.getLogger("gg.store")

GROUP_MAX = 256  # units in one group commit (the rest go into the next one)


class WriteTurns:
    """What the writer's group commits cost so far, for ``/metrics``: how many, the units
    they carried, and the seconds spent beginning them (on PostgreSQL: waiting for every
    replica's write lock), running their units, and committing (the durable flush)."""

    __slots__ = ("commits", "units", "begin", "work", "commit")

    def __init__(self) -> None:
        self.commits = self.units = 0
        self.begin = self.work = self.commit = 0.0

    def add(self, units: int, started: float, begun: float, worked: float,
            committed: float) -> None:
        self.commits += 1
        self.units += units
        self.begin += begun - started
        self.work += worked - begun
        self.commit += committed - worked
_PRAGMAS = ("journal_mode=WAL", "synchronous=FULL", "busy_timeout=10000", "foreign_keys=ON",
            "temp_store=MEMORY", "cache_size=-32000")

# A hook run by the writer inside each group after its units, in a savepoint of its own; it
# returns a function told after the commit whether it held (True) or not (False), or None.
BeforeCommit = Callable[[], "Callable[[bool], None] | None"]

NUL_REFUSED = ("text with a NUL character (U+0000) is not accepted: remove it (a name, an id, "
               "a title or a reason never needs one)")


def refuse_nul(params: tuple | list | dict) -> None:
    """Refuse a statement whose text holds U+0000, on both stores. PostgreSQL's text cannot
    hold it (psycopg will not send it), so without this the same request would be stored or
    looked up on SQLite and crash on PostgreSQL; refused on both, it means the same on both:
    400, whatever the route. JSON columns (fact and event bodies, commands) are kept escaped,
    so a flight's output may still carry a NUL byte."""
    for value in params.values() if isinstance(params, dict) else params:
        if type(value) is str and "\x00" in value:
            raise BadRequest(NUL_REFUSED)


class Database:
    dialect = "sqlite"

    def __init__(self, path: Path | str):
        self.path = str(path)
        self._memory = self.path == ":memory:" or "mode=memory" in self.path
        self._write = self._connect()
        self._lock = threading.RLock()  # held by whoever uses the write connection
        self._local = threading.local()  # per thread: transaction depth, read connection
        self._readers: list[sqlite3.Connection] = []
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._writer: threading.Thread | None = None
        self._closed = False
        self.before_commit: BeforeCommit | None = None
        self.turns = WriteTurns()
        self.db = sqlite_utils.Database(self._write)

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        conn.row_factory = sqlite3.Row
        for pragma in _PRAGMAS:
            conn.execute("PRAGMA " + pragma)
        return conn

    @property
    def conn(self) -> sqlite3.Connection:
        """The write connection inside a transaction; otherwise this thread's reader."""
        local = self._local
        if self._memory or getattr(local, "depth", 0):
            return self._write
        reader = getattr(local, "reader", None)
        if reader is None:
            reader = local.reader = self._connect()
            with self._lock:
                self._readers.append(reader)
        return reader

    # -- transactions -------------------------------------------------------------------

    @contextmanager
    def atomic(self, durable: bool = True) -> Iterator[None]:
        """One write transaction (re-entrant: inner blocks join the outer one).

        ``durable=False`` commits without the fsync (``synchronous=NORMAL`` for this one
        commit), for writes whose loss on a power cut is harmless, such as a check-in's
        ``last_seen_at``. Its WAL frames reach the disk with the next durable commit (whose
        fsync covers every earlier frame) or checkpoint; a crash of the process loses nothing.

        Inside a unit of a group commit (:meth:`submit`) the outermost block is a savepoint
        of the group: it rolls back alone, and it is durable when the group commits.
        """
        local = self._local
        depth = getattr(local, "depth", 0)
        if depth and not getattr(local, "unit_top", False):
            local.depth = depth + 1
            try:
                yield
            finally:
                local.depth = depth
            return
        if depth:  # the first block of a unit: a savepoint of the group
            local.unit_top = False
            local.depth = depth + 1
            self._write.execute("SAVEPOINT block")
            try:
                yield
            except BaseException:
                self._write.execute("ROLLBACK TO block")
                self._write.execute("RELEASE block")
                raise
            else:
                self._write.execute("RELEASE block")
            finally:
                local.depth = depth
                local.unit_top = True
            return
        with self._lock:
            conn = self._write
            if not durable:
                conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("BEGIN IMMEDIATE")
            local.depth = 1
            try:
                yield
            except BaseException:
                local.depth = 0
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            else:
                local.depth = 0
                conn.execute("COMMIT")
            finally:
                if not durable:
                    conn.execute("PRAGMA synchronous=FULL")

    # -- the group commit -----------------------------------------------------------------

    def submit(self, unit: Callable[[], Any], *, durable: bool = True) -> Future:
        """Queue ``unit`` for the writer thread; a future of what it returns (or raises),
        resolved only after the group commit that holds it returned. ``durable=False``: the
        group may commit without the fsync when every unit in it says so."""
        future: Future = Future()
        if self._closed:
            future.set_exception(RuntimeError("the store is closed"))
            return future
        self._queue.put((unit, durable, future))
        if self._writer is None:
            with self._lock:
                if self._writer is None:
                    self._writer = threading.Thread(target=self._write_loop, daemon=True,
                                                    name="gg-store-writer")
                    self._writer.start()
        return future

    def _write_loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            batch = [item]
            while len(batch) < GROUP_MAX:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    self._queue.put(None)  # stop after this group
                    break
                batch.append(more)
            try:
                self._group(batch)
            except BaseException as exc:  # never leave a caller waiting
                log.exception("group commit failed")
                for _, _, future in batch:
                    if not future.done():
                        future.set_exception(exc)

    def _group(self, batch: list[tuple[Callable[[], Any], bool, Future]]) -> None:
        live = [(unit, future) for unit, _, future in batch if future.set_running_or_notify_cancel()]
        if not live:
            return
        durable = any(d for _, d, f in batch if f.running())
        outcomes: list[tuple[bool, Any]] = []
        told: Callable[[bool], None] | None = None
        local = self._local
        conn = self._write
        with self._lock:
            if not durable:
                conn.execute("PRAGMA synchronous=NORMAL")
            try:
                started = time.perf_counter()
                conn.execute("BEGIN IMMEDIATE")
                begun = time.perf_counter()
                local.depth = 1
                for unit, _ in live:
                    outcomes.append(self._unit(conn, unit))
                    if not conn.in_transaction:  # SQLite rolled the whole group back
                        raise outcomes[-1][1] if not outcomes[-1][0] else RuntimeError(
                            "the group commit's transaction was rolled back")
                if self.before_commit is not None:
                    ok, told = self._unit(conn, self.before_commit)
                    if not ok:
                        log.error("the group's last step failed: %r", told)
                        told = None
                local.depth = 0
                worked = time.perf_counter()
                conn.execute("COMMIT")
                self.turns.add(len(live), started, begun, worked, time.perf_counter())
            except BaseException as exc:
                local.depth = 0
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                if told is not None:
                    try:
                        told(False)
                    except Exception:  # noqa: BLE001
                        log.exception("after a failed group commit")
                for _, future in live:
                    future.set_exception(exc)
                return
            finally:
                local.depth = 0
                if not durable:
                    conn.execute("PRAGMA synchronous=FULL")
        if told is not None:
            try:
                told(True)
            except Exception:  # noqa: BLE001 - the units committed: their callers hear so
                log.exception("after the group commit")
        for (_, future), (ok, value) in zip(live, outcomes, strict=True):
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)

    def _unit(self, conn: sqlite3.Connection, unit: Callable[[], Any]) -> tuple[bool, Any]:
        local = self._local
        conn.execute("SAVEPOINT unit")
        local.unit_top = True
        try:
            value = unit()
        except BaseException as exc:  # noqa: BLE001 - handed to the unit's caller
            if conn.in_transaction:
                conn.execute("ROLLBACK TO unit")
                conn.execute("RELEASE unit")
            return False, exc
        finally:
            local.unit_top = False
            local.depth = 1
        conn.execute("RELEASE unit")
        return True, value

    def migrate(self) -> list[int]:
        self._write.execute(
            "CREATE TABLE IF NOT EXISTS _migrations (number INTEGER PRIMARY KEY, name TEXT, at REAL)"
        )
        done = {r[0] for r in self._write.execute("SELECT number FROM _migrations")}
        applied = []
        for number in sorted(MIGRATIONS):
            if number in done:
                continue
            name, fn = MIGRATIONS[number]
            with self.atomic():
                fn(self.db)
                self._write.execute(
                    "INSERT INTO _migrations (number, name, at) VALUES (?, ?, ?)",
                    (number, name, time.time()),
                )
            applied.append(number)
        return applied

    # -- small helpers ------------------------------------------------------------------

    def one(self, sql: str, params: tuple | dict = ()) -> sqlite3.Row | None:
        refuse_nul(params)
        return self.conn.execute(sql, params).fetchone()

    def all(self, sql: str, params: tuple | dict = ()) -> list[sqlite3.Row]:
        refuse_nul(params)
        return self.conn.execute(sql, params).fetchall()

    def all_kept(self, table: str, sql: str, params: tuple = ()) -> list[sqlite3.Row]:
        """Rows of a small table that seldom changes, which PostgreSQL's store keeps for the
        rest of a write transaction (gg.store.postgres); here a read costs microseconds, so it
        is simply read."""
        return self.all(sql, params)

    def run(self, sql: str, params: tuple | dict = ()) -> sqlite3.Cursor:
        refuse_nul(params)
        if getattr(self._local, "depth", 0):
            return self._write.execute(sql, params)
        with self._lock:  # a statement on its own: the write connection, in turn
            return self._write.execute(sql, params)

    def tuples(self, sql: str, params: tuple | dict = ()) -> list[tuple]:
        """Rows as plain tuples (a long listing skips building a row object per line)."""
        refuse_nul(params)
        cursor = self.conn.cursor()
        cursor.row_factory = None
        return cursor.execute(sql, params).fetchall()

    def insert(self, table: str, values: dict[str, Any], *,
               returning: str | None = None) -> sqlite3.Cursor:
        cols = ", ".join(f'"{k}"' for k in values)  # quoted: some columns are keywords
        marks = ", ".join(":" + k for k in values)
        tail = f" RETURNING {returning}" if returning else ""
        return self.run(f"INSERT INTO {table} ({cols}) VALUES ({marks}){tail}", values)

    def update(self, table: str, key: str, key_value: Any, values: dict[str, Any]) -> int:
        if not values:
            return 0
        sets = ", ".join(f'"{k}" = :{k}' for k in values)
        params = dict(values)
        params["_key"] = key_value
        cur = self.run(f"UPDATE {table} SET {sets} WHERE {key} = :_key", params)
        return cur.rowcount

    def available(self) -> bool:
        """Whether the store answers (health): a file on this machine always does (a full
        disk still reads; its writes are refused as insufficient storage)."""
        return True

    def size(self) -> int:
        """The store's size on disk: the database file and its write-ahead log."""
        total = 0
        for path in (self.path, self.path + "-wal"):
            try:
                total += os.path.getsize(path)
            except OSError:
                pass
        return total

    def trace(self, callback: Callable[[str], None] | None) -> None:
        """Every statement this thread's reads and the write connection run, to ``callback``
        (None: stop)."""
        self._write.set_trace_callback(callback)
        if not self._memory:
            self.conn.set_trace_callback(callback)

    def close(self) -> None:
        if self._writer is not None and not self._closed:
            self._closed = True
            self._queue.put(None)
            if self._writer is not threading.current_thread():
                self._writer.join(timeout=30)
        self._closed = True
        with self._lock:
            for reader in self._readers:
                reader.close()
            self._readers.clear()
            self._write.close()


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def loads(text: str | None, default: Any = None) -> Any:
    if text is None or text == "":
        return default
    return json.loads(text)
