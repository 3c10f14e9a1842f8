"""All SQL lives here, behind :class:`Store`.

The control layer speaks only to the methods of :class:`Store` (rows in, domain objects
out, no rules). The store is SQLite in the data dir (:mod:`gg.store.sqlite`, the embedded
default) or, given a ``postgresql://`` URL, PostgreSQL (:mod:`gg.store.postgres`), which
several ``gg server`` replicas share: the same methods, the same SQL translated in one place
(:mod:`gg.store.dialect`), writers of every replica side by side, each decision taken under
the lock of the row or object it rests on (:mod:`gg.store.row_locks`, docs/scale-out.md).
"""

from __future__ import annotations

import os
from pathlib import Path

from gg.store import library  # noqa: F401  # first: sqlite_utils without numpy
from gg.store.approvals import ApprovalRows
from gg.store.artifacts import ArtifactRows
from gg.store.concurrency import ConcurrencyRows
from gg.store.consoles import ConsoleRows
from gg.store.db import Database
from gg.store.dependencies import DependencyRows
from gg.store.duties import DutyRows
from gg.store.estimates import DURATIONS, EstimateRows
from gg.store.events import EventRows
from gg.store.fleet import FleetRows
from gg.store.flights import FlightRows
from gg.store.gates import GateRows
from gg.store.groups import GroupRows
from gg.store.hooks import HookRows
from gg.store.id_tokens import SigningKeyRows
from gg.store.metrics import MetricRows
from gg.store.people import PeopleRows
from gg.store.placement import PlacementRows
from gg.store.pools import PoolRows
from gg.store.pull import PullRows
from gg.store.retention import RetentionRows
from gg.store.retries import RetryRows
from gg.store.row_locks import RowLockRows
from gg.store.runners import RunnerRows
from gg.store.secrets import SecretRows
from gg.store.sessions import SessionRows
from gg.store.sqlite import SqliteDatabase


def is_url(target: object) -> bool:
    """A PostgreSQL URL (rather than an SQLite file's path)."""
    return isinstance(target, str) and target.startswith(("postgresql://", "postgres://"))


class Store(PeopleRows, RunnerRows, FlightRows, EventRows, GateRows, FleetRows,
            PlacementRows, PoolRows, MetricRows, RetentionRows, HookRows, SessionRows,
            EstimateRows, ApprovalRows, GroupRows, PullRows, ConsoleRows, DutyRows,
            ConcurrencyRows, DependencyRows, SigningKeyRows, SecretRows, RetryRows,
            ArtifactRows, RowLockRows):
    """The store: SQLite at a path (the embedded default), PostgreSQL at a postgresql:// URL."""

    db: Database

    def __init__(self, target: Path | str, *, pool_size: int = 8, hold_timeout: float = 10.0):
        if is_url(target):
            from gg.store.postgres import PgDatabase

            self.db = PgDatabase(str(target), pool_size=pool_size, hold_timeout=hold_timeout)
        else:
            self.db = SqliteDatabase(target)
        self.db.fold_at_end(DURATIONS, self.fold_durations)
        self.db.migrate()

    @property
    def dialect(self) -> str:
        return self.db.dialect

    def atomic(self, durable: bool = True):
        return self.db.atomic(durable)

    def available(self) -> bool:
        """Whether the database answers now (``/v1/health``), within a second or two."""
        return self.db.available()

    def close(self) -> None:
        self.db.close()


def open_store(data_dir: Path | str, database_url: str = "", *, pool_size: int = 8,
               hold_timeout: float = 10.0) -> Store:
    """The store of a server whose data dir is ``data_dir``: the SQLite file in it, or the
    PostgreSQL database at ``database_url`` (the data dir then holds only the owner's token
    of a first start and the server's lock file)."""
    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    if database_url:
        store = Store(database_url, pool_size=pool_size, hold_timeout=hold_timeout)
    else:
        store = Store(data_dir / "gg.sqlite3")
    make_private(data_dir)
    return store


SERVER_LOCK = "server.lock"


def hold_data_dir(data_dir: Path | str, *, alone: bool = False):
    """An advisory lock on ``data_dir``'s lock file, held as long as the returned file stays
    open: shared by every running server, exclusive (``alone``) for maintenance that needs the
    store to itself. None when it is taken in a way that excludes ours."""
    import fcntl

    path = Path(data_dir) / SERVER_LOCK
    handle = open(path, "a+")
    os.chmod(path, 0o600)
    try:
        fcntl.flock(handle, (fcntl.LOCK_EX if alone else fcntl.LOCK_SH) | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    return handle


def make_private(data_dir: Path) -> None:
    """The data dir is 0700 and everything in it 0600 (directories 0700), also when an older
    version left it readable: it holds token hashes, credentials' digests and the owner token.
    SQLite gives its WAL and shared-memory files the database file's mode."""
    os.chmod(data_dir, 0o700)
    for root, dirs, files in os.walk(data_dir):
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o700, follow_symlinks=False)
        for name in files:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                os.chmod(path, 0o600)


__all__ = ["Store", "open_store", "hold_data_dir"]
