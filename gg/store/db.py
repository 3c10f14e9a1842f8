"""The SQLite connection: WAL, fully synced commits, one write transaction per change.

Durability: ``journal_mode=WAL`` with ``synchronous=FULL`` makes SQLite fsync the WAL at
every commit, so a lease grant that was answered to a runner survives a crash of the
machine, not only of the process (with ``NORMAL`` the last commits can be lost on power
failure). ``BEGIN IMMEDIATE`` takes the write lock at the start of every change, so the
read-decide-write of a claim is one atomic compare-and-set.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import sqlite_utils

from gg.store.migrations import MIGRATIONS


class Database:
    def __init__(self, path: Path | str):
        self.path = str(path)
        self.conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self.conn.row_factory = sqlite3.Row
        for pragma in ("journal_mode=WAL", "synchronous=FULL", "busy_timeout=10000",
                       "foreign_keys=ON", "temp_store=MEMORY", "cache_size=-32000"):
            self.conn.execute("PRAGMA " + pragma)
        self._lock = threading.RLock()
        self._depth = 0
        self.db = sqlite_utils.Database(self.conn)

    # -- transactions -------------------------------------------------------------------

    @contextmanager
    def atomic(self, durable: bool = True) -> Iterator[None]:
        """One write transaction (re-entrant: inner blocks join the outer one).

        ``durable=False`` commits without the fsync (``synchronous=NORMAL`` for this one
        commit), for writes whose loss on a power cut is harmless, such as a check-in's
        ``last_seen_at``. Its WAL frames reach the disk with the next durable commit (whose
        fsync covers every earlier frame) or checkpoint; a crash of the process loses nothing.
        """
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            if not durable:
                self.conn.execute("PRAGMA synchronous=NORMAL")
            self.conn.execute("BEGIN IMMEDIATE")
            self._depth = 1
            try:
                yield
            except BaseException:
                self._depth = 0
                self.conn.execute("ROLLBACK")
                raise
            else:
                self._depth = 0
                self.conn.execute("COMMIT")
            finally:
                if not durable:
                    self.conn.execute("PRAGMA synchronous=FULL")

    def migrate(self) -> list[int]:
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS _migrations (number INTEGER PRIMARY KEY, name TEXT, at REAL)"
        )
        done = {r[0] for r in self.conn.execute("SELECT number FROM _migrations")}
        applied = []
        for number in sorted(MIGRATIONS):
            if number in done:
                continue
            name, fn = MIGRATIONS[number]
            with self.atomic():
                fn(self.db)
                self.conn.execute(
                    "INSERT INTO _migrations (number, name, at) VALUES (?, ?, ?)",
                    (number, name, time.time()),
                )
            applied.append(number)
        return applied

    # -- small helpers ------------------------------------------------------------------

    def one(self, sql: str, params: tuple | dict = ()) -> sqlite3.Row | None:
        return self.conn.execute(sql, params).fetchone()

    def all(self, sql: str, params: tuple | dict = ()) -> list[sqlite3.Row]:
        return self.conn.execute(sql, params).fetchall()

    def run(self, sql: str, params: tuple | dict = ()) -> sqlite3.Cursor:
        return self.conn.execute(sql, params)

    def insert(self, table: str, values: dict[str, Any]) -> sqlite3.Cursor:
        cols = ", ".join(f'"{k}"' for k in values)  # quoted: some columns are keywords
        marks = ", ".join(":" + k for k in values)
        return self.conn.execute(f"INSERT INTO {table} ({cols}) VALUES ({marks})", values)

    def update(self, table: str, key: str, key_value: Any, values: dict[str, Any]) -> int:
        if not values:
            return 0
        sets = ", ".join(f'"{k}" = :{k}' for k in values)
        params = dict(values)
        params["_key"] = key_value
        cur = self.conn.execute(f"UPDATE {table} SET {sets} WHERE {key} = :_key", params)
        return cur.rowcount

    def close(self) -> None:
        self.conn.close()


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def loads(text: str | None, default: Any = None) -> Any:
    if text is None or text == "":
        return default
    return json.loads(text)
