"""The SQLite store: one write connection served by the store's writer, readers of their own.

Durability: ``journal_mode=WAL`` with ``synchronous=FULL`` makes SQLite fsync the WAL at
every commit, so a lease grant that was answered to a runner survives a crash of the
machine, not only of the process (with ``NORMAL`` the last commits can be lost on power
failure). ``BEGIN IMMEDIATE`` takes the write lock at the start of every change, so the
read-decide-write of a claim is one atomic compare-and-set.

The write path (docs/architecture.md, "The write path"): the group commit is
:class:`gg.store.writer.Writer`'s; this module gives it SQLite's edges of a transaction
(:class:`_Transactions`: ``BEGIN IMMEDIATE``, ``COMMIT``, ``ROLLBACK``, ``SAVEPOINT``). A
transaction of only ``durable=False`` work commits with ``synchronous=NORMAL`` (no fsync).
Reads outside a transaction use a read connection of the calling thread (WAL readers never
wait for the writer).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Callable

import sqlite_utils

from gg.store import loop_guard
from gg.store.db import SharedDatabase, refuse_nul
from gg.store.held import Fold, Held, fold_all
from gg.store.migrations import MIGRATIONS
from gg.store.writer import Writer

_PRAGMAS = ("journal_mode=WAL", "synchronous=FULL", "busy_timeout=10000", "foreign_keys=ON",
            "temp_store=MEMORY")
# Pages each connection keeps, in KiB: the write connection 8 MB, each thread's reader
# SQLite's default 2 MB. A page that is not in a connection's own cache comes from the
# operating system's file cache. A server has a reader a thread: at 32 MB each they held
# ~22 MB more under 10,000 runners for no measured gain; the writer's 32 MB held ~15 MB
# more, and 8 MB wrote as fast (docs/performance.md, "The server's memory under a fleet").
WRITE_CACHE_KIB = 8_000
READ_CACHE_KIB = 2_000


class _Transactions:
    """SQLite's edges of a write transaction, on the write connection (the writer's hooks)."""

    def __init__(self, conn: sqlite3.Connection, folds: dict[str, Fold]):
        self.conn = conn
        self._quick = False  # this transaction lowered ``synchronous`` (durable=False)
        # rows of small tables read in this transaction (SqliteDatabase.all_kept)
        self.kept: dict[tuple, list[sqlite3.Row]] = {}
        self.held = Held()  # items for the transaction's end (gg.store.held)
        self._folds = folds
        self._marks: dict[str, int] = {}  # the held mark of the savepoint of each name made last

    def begin(self, durable: bool) -> None:
        self.kept.clear()
        self.held = Held()
        if not durable:
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self._quick = True
        self.conn.execute("BEGIN IMMEDIATE")

    def last(self) -> None:
        """The held items folded (one writer, so events are inserted in commit order as they
        come)."""
        if self.held:
            fold_all(self.held, self._folds)

    def commit(self) -> None:
        self.kept.clear()
        self.conn.execute("COMMIT")
        self._durable_again()

    def rollback(self) -> None:
        self.kept.clear()
        try:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
        finally:
            self._durable_again()

    def _durable_again(self) -> None:
        if self._quick:
            self._quick = False
            self.conn.execute("PRAGMA synchronous=FULL")

    def savepoint(self, name: str, *, release_first: bool = False) -> object:
        # SQLite nests savepoints of one name (ROLLBACK TO and RELEASE take the latest, the
        # commit releases them all): the last unit's is left open, one statement a unit fewer
        self.conn.execute(f"SAVEPOINT {name}")
        mark = self._marks[name] = self.held.mark()
        return mark

    def release(self, name: str) -> None:
        self.conn.execute(f"RELEASE {name}")

    def rollback_to(self, name: str, mark: object) -> None:
        self.kept.clear()
        assert isinstance(mark, int)
        self.held.undo(mark)
        if self.conn.in_transaction:
            self.conn.execute(f"ROLLBACK TO {name}")
            self.conn.execute(f"RELEASE {name}")

    def holds(self) -> bool:
        return self.conn.in_transaction

    def retryable(self, exc: BaseException) -> bool:
        """Never: one writer, which no other ever makes give way."""
        return False

    def changes(self) -> int | None:
        return self.conn.total_changes + self.held.added

    def rewind(self, name: str) -> None:
        self.kept.clear()
        self.held.undo(self._marks[name])
        self.conn.execute(f"ROLLBACK TO {name}")


class SqliteDatabase(SharedDatabase):
    """The SQLite store (implements :class:`gg.store.db.Database`)."""

    dialect = "sqlite"

    def __init__(self, path: Path | str):
        self.path = str(path)
        self._memory = self.path == ":memory:" or "mode=memory" in self.path
        self._trace: Callable[[str], None] | None = None  # every connection's (trace)
        self._write = self._connect(WRITE_CACHE_KIB)
        self._folds = {}
        self._edges = _Transactions(self._write, self._folds)
        self.writer = Writer(self._edges)
        self._local = threading.local()  # per thread: its read connection
        self._readers: list[sqlite3.Connection] = []
        # guards the list only: a worker thread's first read must not wait for a write unit
        self._readers_lock = threading.Lock()
        self.db = sqlite_utils.Database(self._write)

    def _connect(self, cache_kib: int) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        conn.row_factory = sqlite3.Row
        for pragma in _PRAGMAS:
            conn.execute("PRAGMA " + pragma)
        conn.execute(f"PRAGMA cache_size=-{cache_kib}")
        conn.set_trace_callback(self._trace)
        return conn

    @property
    def conn(self) -> sqlite3.Connection:
        """The write connection inside a transaction; otherwise this thread's reader."""
        loop_guard.check()
        if self._memory or self.writer.in_transaction():
            return self._write
        reader = getattr(self._local, "reader", None)
        if reader is None:
            reader = self._local.reader = self._connect(READ_CACHE_KIB)
            with self._readers_lock:
                self._readers.append(reader)
        return reader

    def migrate(self) -> list[int]:
        self._write.execute("CREATE TABLE IF NOT EXISTS _migrations "
                            "(number INTEGER PRIMARY KEY, name TEXT, at REAL)")
        done = {r[0] for r in self._write.execute("SELECT number FROM _migrations")}
        applied = []
        for migration in MIGRATIONS:
            if migration.number in done:
                continue
            with self.atomic():
                migration.step(self.db)
                self._write.execute(
                    "INSERT INTO _migrations (number, name, at) VALUES (?, ?, ?)",
                    (migration.number, migration.name, time.time()),
                )
            applied.append(migration.number)
        return applied

    # -- small helpers ------------------------------------------------------------------

    def one(self, sql: str, params: tuple | dict = ()) -> sqlite3.Row | None:
        refuse_nul(params)
        return self.conn.execute(sql, params).fetchone()

    def all(self, sql: str, params: tuple | dict = ()) -> list[sqlite3.Row]:
        refuse_nul(params)
        return self.conn.execute(sql, params).fetchall()

    def all_kept(self, table: str, sql: str, params: tuple = ()) -> list[sqlite3.Row]:
        """Rows of ``table``, a small table that seldom changes (the fleet-wide stop, the
        hooks, the groups), read once per write transaction however many of its units ask
        (a group commit's units would each read it, several times a flight): a statement of
        the transaction that writes to it (:meth:`run`), a savepoint rolled back, and the
        transaction's end forget what was kept. Outside a write transaction it is an
        ordinary read."""
        if not self.writer.in_transaction():
            return self.all(sql, params)
        kept = self._edges.kept
        key = (table, sql, params)
        rows = kept.get(key)
        if rows is None:
            rows = kept[key] = self.all(sql, params)
        return list(rows)

    def _held(self) -> Held:
        return self._edges.held

    def run(self, sql: str, params: tuple | dict = ()) -> sqlite3.Cursor:
        refuse_nul(params)
        loop_guard.check()
        if self.writer.in_transaction():
            kept = self._edges.kept
            if kept:
                for key in [k for k in kept if k[0] in sql]:
                    del kept[key]
            return self._write.execute(sql, params)
        with self.writer.lock:  # a statement on its own: the write connection, in turn
            return self._write.execute(sql, params)

    def tuples(self, sql: str, params: tuple | dict = ()) -> list[tuple]:
        """Rows as plain tuples (a long listing skips building a row object per line)."""
        refuse_nul(params)
        cursor = self.conn.cursor()
        cursor.row_factory = None
        return cursor.execute(sql, params).fetchall()

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
        """Every statement the write connection and every thread's reads run, to
        ``callback`` (None: stop); a reader made later traces too."""
        self._trace = callback
        self._write.set_trace_callback(callback)
        with self._readers_lock:
            for reader in self._readers:
                reader.set_trace_callback(callback)

    def close(self) -> None:
        self.writer.close()
        with self.writer.lock, self._readers_lock:
            for reader in self._readers:
                reader.close()
            self._readers.clear()
            self._write.close()


