"""``gg server vacuum``: compacts the store's file while no server runs on it (and ``gg server
migrate``: moves that file's control plane into PostgreSQL, also only while none runs).

Pruning frees pages inside the SQLite file but does not shrink it. ``VACUUM`` rewrites the
file without its free pages, in place and in one transaction (a crash leaves the old file
whole). It needs the store to itself: every running ``gg server`` holds a shared lock on
``server.lock`` in its data directory for as long as it lives, and vacuuming takes that lock
exclusively without waiting, so it refuses while any server runs there (the lock goes with
the process, also when it is killed).
"""

from __future__ import annotations

from pathlib import Path

from gg.store import Store, hold_data_dir
from gg.store.transfer import Copied, TargetNotEmpty, copy_store

STORE_FILE = "gg.sqlite3"


class ServerRunning(Exception):
    pass


def move(data_dir: Path, url: str) -> Copied:
    """Copy the stopped server's SQLite store at ``data_dir`` into the empty PostgreSQL
    database at ``url`` (gg.store.transfer); what it copied. FileNotFoundError
    without a store, ServerRunning while a server runs on it, TargetNotEmpty for a database
    that holds tables already. The SQLite file stays as it was (a way back)."""
    if not (data_dir / STORE_FILE).is_file():
        raise FileNotFoundError(str(data_dir / STORE_FILE))
    lock = hold_data_dir(data_dir, alone=True)
    if lock is None:
        raise ServerRunning(str(data_dir))
    try:
        return copy_store(data_dir / STORE_FILE, url)
    finally:
        lock.close()


def vacuum(data_dir: Path) -> tuple[int, int]:
    """The store's size in bytes before and after compacting it. FileNotFoundError when
    ``data_dir`` holds no store; ServerRunning when a server runs on it."""
    if not (data_dir / STORE_FILE).is_file():
        raise FileNotFoundError(str(data_dir / STORE_FILE))
    lock = hold_data_dir(data_dir, alone=True)
    if lock is None:
        raise ServerRunning(str(data_dir))
    try:
        store = Store(data_dir / STORE_FILE)
        try:
            before = store.database_bytes()
            store.vacuum()
            return before, store.database_bytes()
        finally:
            store.close()
    finally:
        lock.close()


def backup(data_dir: Path, to: Path) -> int:
    """Copy the store at ``data_dir`` to the file ``to`` with SQLite's online backup (a
    running server keeps serving; the copy is one consistent snapshot); its size in bytes."""
    if not (data_dir / STORE_FILE).is_file():
        raise FileNotFoundError(str(data_dir / STORE_FILE))
    store = Store(data_dir / STORE_FILE)
    try:
        return store.backup_to(to)
    finally:
        store.close()


__all__ = ["STORE_FILE", "ServerRunning", "TargetNotEmpty", "backup", "move", "vacuum"]
