"""The PostgreSQL connections: the same seam as :mod:`gg.store.db`, for many replicas.

Several ``gg server`` processes (replicas) share one database. Each has ONE write connection
served by the store's writer, which commits in groups (:class:`gg.store.writer.Writer`, the
same loop as SQLite's; :class:`_Transactions` gives it PostgreSQL's edges of a transaction)
and a pool of read connections.

No global write lock (docs/scale-out.md, "Isolation and locking"): writers of every replica
run side by side at READ COMMITTED, each statement seeing every commit before it. What a
read-decide-write needs is taken on the rows it decides about: a grant is a compare-and-set on
(stage, epoch) that skips a flight another writer holds (``FOR UPDATE SKIP LOCKED``), a
runner's seats and a concurrency key's count are decided under a per-object advisory lock
(:mod:`gg.store.row_locks`), an episode noted once is a compare-and-set on its row. A unit
that loses a deadlock or a lock wait is run again by the writer (:meth:`_Transactions.retryable`).

Durability: a group with a durable unit commits with ``synchronous_commit = on`` (the
commit returns once the WAL is flushed, and on a synchronous standby when the operator set
one up); a group of only ``durable=False`` units commits with it off.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Callable, cast

import psycopg
from psycopg.adapt import Dumper, Loader
from psycopg.pq import ExecStatus, Format, TransactionStatus
from psycopg.rows import tuple_row
from psycopg_pool import ConnectionPool

from gg.errors import DatabaseUnavailable
from gg.store import event_order, loop_guard, pg_statements
from gg.store.db import SharedDatabase, refuse_nul
from gg.store.dialect import ddl, split_script, translate
from gg.store.faults import database_away
from gg.store.held import Held, fold_all
from gg.store.migrations import MIGRATIONS
from gg.store.writer import Writer

if TYPE_CHECKING:
    import sqlite_utils

log = logging.getLogger("gg.store")

# gg's advisory lock keys (one bigint space per database, shared with anything else using
# advisory locks there: these are "gg" in ASCII, then a number).
MIGRATE_LOCK = 0x6767_0000_0002  # a replica migrating the schema at start

# A write transaction waits at most this long for a row or lock another replica's writer
# holds (a deadlock is found at once rather than after the database's deadlock_timeout);
# the unit that waited is run again (Writer's retries).
LOCK_WAIT = "2s"
_BEGIN_DURABLE = f"BEGIN; SET LOCAL lock_timeout TO '{LOCK_WAIT}'"
_BEGIN_QUICK = _BEGIN_DURABLE + "; SET LOCAL synchronous_commit TO OFF"
NOTES_A_STATEMENT = 500  # notifications sent by one statement at a commit
# A database found away is tried again (one new connection, ``SELECT 1``) at most this often;
# meanwhile every statement is refused at once (DatabaseUnavailable), never left waiting for
# a connection the pool cannot make, which held the server's event loop for the pool's timeout.
PROBE_EVERY = 1.0
PROBE_CONNECT_TIMEOUT = 2  # seconds (libpq's least)


class Row:
    """A row addressable by column name and by index, like ``sqlite3.Row``."""

    __slots__ = ("_index", "_values")

    def __init__(self, index: dict[str, int], values: tuple):
        self._index = index
        self._values = values

    def __getitem__(self, key):
        if isinstance(key, str):
            return self._values[self._index[key]]
        return self._values[key]

    def keys(self) -> list[str]:
        return list(self._index)

    def __iter__(self):
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Row({dict(zip(self._index, self._values, strict=True))!r})"


# What answers rows (psycopg's own test for a result set, without its description)
_ROWS = frozenset({ExecStatus.TUPLES_OK, ExecStatus.SINGLE_TUPLE,
                   getattr(ExecStatus, "TUPLES_CHUNK", ExecStatus.TUPLES_OK)})
# A result's column names -> their index, shared by every statement answering those columns
# (a few hundred shapes); bounded all the same, should a caller ever build its column list
_INDEXES: dict[tuple[bytes, ...], dict[str, int]] = {}
_INDEXES_KEPT = 1024


def _tuples(result):
    """What makes a row of ``result`` for :meth:`PgDatabase.tuples`: a plain tuple."""
    return tuple


def _answers_rows(result) -> bool:
    """Whether a statement's result holds rows (what ``cursor.description is not None``
    says, without building a column object for each column of each statement: psycopg's
    description does, and a ``SELECT *`` of flights read it twice, 8 % of a writer's time)."""
    return result is not None and bool(result.nfields or result.status in _ROWS)


def _row_factory(cursor):
    return _row_maker(cursor.pgresult)


def _row_maker(result):
    """What makes a row of ``result``: a :class:`Row`, its names read once a shape."""
    if not _answers_rows(result):
        return tuple
    names = tuple(result.fname(i) for i in range(result.nfields))
    index = _INDEXES.get(names)
    if index is None:
        index = {}
        for i, name in enumerate(names):  # a repeated name: the first column, as SQLite
            index.setdefault(name.decode("utf-8", "replace") if name else f"column_{i + 1}", i)
        if len(_INDEXES) >= _INDEXES_KEPT:
            _INDEXES.clear()
        _INDEXES[names] = index
    return lambda values: Row(index, values)


class Result:
    """What a statement answered, fetched whole: the connection is free again at once."""

    def __init__(self, rows: list, rowcount: int):
        self._rows = rows
        self.rowcount = rowcount
        self.lastrowid = None

    def fetchone(self):
        return self._rows.pop(0) if self._rows else None

    def fetchall(self) -> list:
        rows, self._rows = self._rows, []
        return rows

    def __iter__(self):
        return iter(self.fetchall())


class _BoolAsInteger(Dumper):
    """The schema keeps flags in INTEGER columns (as SQLite does): a Python bool goes as 0/1."""

    format = Format.TEXT
    oid = psycopg.adapters.types["int8"].oid

    def dump(self, obj: bool) -> bytes:
        return b"1" if obj else b"0"


class _Number(Loader):
    """``numeric`` (what ``sum`` of integers gives) as an int when whole, else a float: never
    a Decimal, which JSON cannot carry."""

    def load(self, data) -> int | float:
        text = bytes(data).decode()
        try:
            return int(text)
        except ValueError:
            return float(text)


def _configure(conn: psycopg.Connection) -> None:
    # gg prepares its statements itself (gg.store.pg_statements); psycopg's own preparing,
    # which lets every prepared statement go after a ROLLBACK, stays off
    conn.prepare_threshold = None
    conn.adapters.register_dumper(bool, _BoolAsInteger)
    conn.adapters.register_loader("numeric", _Number)


class PgDatabase(SharedDatabase):
    """The PostgreSQL store (implements :class:`gg.store.db.Database`)."""

    dialect = "postgresql"

    def __init__(self, url: str, *, pool_size: int = 8, hold_timeout: float = 10.0,
                 connect_timeout: float = 10.0):
        self.url = url
        self.path = url
        self._timeout = connect_timeout
        self._hold_ms = int(hold_timeout * 1000)
        self._write = self._connect()
        self._folds = {}
        self.writer = Writer(_Transactions(self))
        self._local = threading.local()  # the write transaction's kept rows, notifications, changes
        self._trace: Callable[[str], None] | None = None
        self._away = False  # the database was found away and has not answered since
        self._probed_at = float("-inf")
        self._probing = threading.Lock()
        self._pool = ConnectionPool(
            url, min_size=1, max_size=max(1, pool_size), open=True, timeout=connect_timeout,
            kwargs={"autocommit": True, "row_factory": _row_factory,
                    "connect_timeout": int(max(1, connect_timeout))},
            configure=_configure, name="gg-readers")

    def _connect(self) -> psycopg.Connection:
        """The write connection. Its transactions hold row locks other replicas may wait
        for, so one left idle past the hold timeout (a replica frozen mid-transaction) is ended
        by the database (``idle_in_transaction_session_timeout``), freeing them; the replica's
        commit then fails unanswered and its next transaction runs on a new connection."""
        conn = psycopg.connect(self.url, autocommit=True, row_factory=_row_factory,
                               connect_timeout=int(max(1, self._timeout)))
        _configure(conn)
        if self._hold_ms > 0:
            conn.execute("SELECT set_config('idle_in_transaction_session_timeout', %s, false)",
                         (str(self._hold_ms),))
        return conn

    def _writable(self) -> psycopg.Connection:
        """The write connection, made again when the last one broke (the database restarted
        or the network dropped): the next transaction simply starts on a new one."""
        if self._write.closed or self._write.broken:
            try:
                self._write.close()
            except Exception:  # noqa: BLE001
                pass
            self._write = self._connect()
        return self._write

    # -- the database away --------------------------------------------------------------

    def available(self) -> bool:
        """Whether the database answers (health): one new connection's ``SELECT 1``, tried
        at most once a PROBE_EVERY by one thread; meanwhile the last answer. Never waits
        longer than PROBE_CONNECT_TIMEOUT."""
        if time.monotonic() - self._probed_at < PROBE_EVERY or \
                not self._probing.acquire(blocking=False):
            return not self._away
        try:
            self._probed_at = time.monotonic()
            try:
                with psycopg.connect(self.url, autocommit=True,
                                     connect_timeout=PROBE_CONNECT_TIMEOUT) as conn:
                    conn.execute("SELECT 1")
            except psycopg.Error as exc:
                if not database_away(exc):
                    raise
                if not self._away:
                    log.warning("the database is unavailable: %s",
                                str(exc).strip().splitlines()[0] if str(exc).strip() else
                                type(exc).__name__)
                self._away = True
                return False
            if self._away:
                log.warning("the database answers again")
                self._away = False
                self._pool.check()  # its connections died with the database: new ones
            return True
        finally:
            self._probing.release()

    def _present(self) -> None:
        """Refuse at once while the database is away (until a probe finds it back)."""
        if self._away and not self.available():
            raise DatabaseUnavailable()

    def _found_away(self, exc: BaseException) -> bool:
        """After a failed statement: whether it failed because the database is away (then
        it is marked so, and the next statements are refused at once)."""
        if not database_away(exc):
            return False
        self._probed_at = float("-inf")
        return not self.available()

    @property
    def conn(self) -> "_Reader":
        """Statements on the write connection inside a transaction; otherwise on the pool."""
        return _Reader(self)

    # -- statements ---------------------------------------------------------------------

    def _execute(self, conn: psycopg.Connection, sql: str, params, *, rows=None) -> Result:
        if params:
            refuse_nul(params)
        text = translate(sql)
        if self._trace is not None:
            self._trace(text)
        if conn is self._write and not text.startswith("SELECT"):  # not a read: a change
            self._local.changed = getattr(self._local, "changed", 0) + 1
            kept = getattr(self._local, "kept", None)
            if kept:
                self._forget_kept(kept, text)
        if (params or ";" not in text) and rows in (None, tuple_row):
            # one statement: through libpq, prepared by gg (gg.store.pg_statements)
            fetched, count = pg_statements.of(conn).run(
                text, params, _row_maker if rows is None else _tuples)
            return Result(fetched, count)
        cursor = conn.cursor(row_factory=rows) if rows is not None else conn.cursor()
        with cursor:
            cursor.execute(text, params if params is not None else ())
            fetched = cursor.fetchall() if _answers_rows(cursor.pgresult) else []
            return Result(fetched, cursor.rowcount)

    def _read(self, sql: str, params, rows=None) -> Result:
        loop_guard.check()
        if self.in_transaction():
            return self._execute(self._write, sql, params, rows=rows)
        self._present()
        for attempt in (1, 2):
            try:
                with self._pool.connection() as conn:
                    try:
                        return self._execute(conn, sql, params, rows=rows)
                    except psycopg.errors.FeatureNotSupported as exc:
                        # A column another replica's migration added under a statement
                        # this connection prepared (a rolling upgrade): its prepared
                        # statements are let go (psycopg forgets them too) and the read is
                        # asked once more, prepared afresh.
                        if attempt == 2 or "cached plan" not in str(exc):
                            raise
                        conn.rollback()
                        conn.execute("DEALLOCATE ALL")
                        pg_statements.of(conn).forget()
            except psycopg.OperationalError as exc:
                if self._found_away(exc):
                    raise DatabaseUnavailable() from None
                if attempt == 2:
                    raise
                # the database dropped connections (it restarted): the pool's idle ones are
                # checked and the dead ones replaced, then the read runs once more
                self._pool.check()
        raise AssertionError("unreachable")

    def one(self, sql: str, params: tuple | dict = ()):
        return self._read(sql, params).fetchone()

    def all(self, sql: str, params: tuple | dict = ()) -> list:
        return self._read(sql, params).fetchall()

    def all_kept(self, table: str, sql: str, params: tuple = ()) -> list:
        """Rows of ``table``, a small table that seldom changes (the fleet-wide stop, the
        hooks, the groups), read once per write transaction however many of its units ask; a
        statement of its own that writes to it (or a savepoint rolled back) forgets what was
        kept. Another replica's change to it is seen by the next write transaction (a group
        lasts milliseconds), as a read at the transaction's start would have seen it.
        Outside a write transaction it is an ordinary read."""
        if not self.in_transaction():
            return self.all(sql, params)
        kept = self._local.kept
        key = (table, sql, params)
        rows = kept.get(key)
        if rows is None:
            rows = kept[key] = self._execute(self._write, sql, params).fetchall()
        return list(rows)

    @staticmethod
    def _forget_kept(kept: dict, text: str) -> None:
        for key in [k for k in kept if k[0] in text]:
            del kept[key]

    def tuples(self, sql: str, params: tuple | dict = ()) -> list[tuple]:
        """Rows as plain tuples (a long listing skips building a row object per line)."""
        return self._read(sql, params, rows=tuple_row).fetchall()

    def run(self, sql: str, params: tuple | dict = ()) -> Result:
        loop_guard.check()
        if self.in_transaction():
            return self._execute(self._write, sql, params)
        with self.atomic():  # a statement on its own: a transaction of its own, in turn
            return self._execute(self._write, sql, params)

    # -- transactions: the writer's, with these edges ---------------------------------------

    def _start(self, durable: bool) -> psycopg.Connection:
        """Begin a write transaction on the write connection. A connection found dead at
        BEGIN (the database restarted while it was idle) is made again at once: nothing was
        written on it, so nothing is lost by starting over."""
        self._present()
        try:
            conn = self._writable()
            try:
                self._begin(conn, durable)
            except psycopg.OperationalError:
                if not conn.broken:
                    raise
                conn = self._writable()
                self._begin(conn, durable)
        except psycopg.Error as exc:
            if self._found_away(exc):
                raise DatabaseUnavailable() from None
            raise
        return conn

    def _begin(self, conn: psycopg.Connection, durable: bool) -> None:
        """BEGIN, its lock wait bound and the commit's durability in one round trip."""
        self._local.kept = {}
        self._local.notes = []
        self._local.events = event_order.PendingEvents()
        self._local.held = Held()
        self._local.changed = 0
        begin = _BEGIN_DURABLE if durable else _BEGIN_QUICK
        if self._trace is not None:
            self._trace(begin)
        conn.execute(begin)

    def notify_at_commit(self, channel: str, payload: str) -> None:
        """A notification of this write transaction, sent with every other one it holds in
        one statement just before its COMMIT (one round trip a group commit, not one a
        wake-up); a savepoint rolled back takes back its own, as PostgreSQL's would."""
        self._local.notes.append((channel, payload))
        self._local.changed += 1

    def record_event(self, values: dict, then: event_order.Then | None = None) -> None:
        """An event of this write transaction, inserted as its last statement, in commit
        order (:mod:`gg.store.event_order`); ``then`` is handed its seq there. Outside a
        transaction, a transaction of its own."""
        if not self.in_transaction():
            with self.atomic():
                self.record_event(values, then)
            return
        self._local.events.add(values, then)
        self._local.changed += 1

    def _held(self) -> Held:
        return self._local.held

    def _last(self) -> None:
        """The transaction's held items and events, after every other statement of it: the
        events' turn taken, the held items folded under it (gg.store.held), the events' rows
        inserted (their seqs handed to whoever asked), up to the COMMIT. Its notifications
        so far go out first, so that the turn is held the less long."""
        events, held = self._local.events, self._local.held
        if not events and not held:
            return
        self._send_notes()
        conn = self._write
        turns = self.writer.turns
        waited = time.perf_counter()
        self._execute(conn, event_order.TAKE_TURN, (event_order.TURN_WAIT, event_order.EVENTS_TURN))
        turns.turn += time.perf_counter() - waited
        if held:
            fold_all(held, self._folds)
        while events:  # a step handed a seq may record another event
            rows, then = events.take()
            seqs = [r[0] for r in self._execute(conn, event_order.insert_statement(len(rows)),
                                                [v for row in rows for v in row]).fetchall()]
            for step, seq in zip(then, seqs, strict=True):
                if step is not None:
                    step(seq)

    def _send_notes(self) -> None:
        conn = self._write
        notes = list(dict.fromkeys(self._local.notes))  # PostgreSQL sends a repeated one once
        self._local.notes = []
        for at in range(0, len(notes), NOTES_A_STATEMENT):
            chunk = notes[at:at + NOTES_A_STATEMENT]
            text = "SELECT " + ", ".join(["pg_notify(%s, %s)"] * len(chunk))
            if self._trace is not None:
                self._trace(text)
            conn.execute(text, [value for note in chunk for value in note])

    def _edge(self, text: str, conn: psycopg.Connection | None = None) -> None:
        """A statement at a transaction's edge (a savepoint, COMMIT) on the write connection,
        traced as every other one is."""
        if self._trace is not None:
            self._trace(text)
        (conn or self._write).execute(text)

    def _commit(self) -> None:
        self._send_notes()
        self._local.kept = {}
        self._edge("COMMIT")

    def _rollback(self) -> None:
        conn = self._write
        if conn.closed or conn.broken:
            return
        if conn.info.transaction_status != TransactionStatus.IDLE:
            try:
                conn.execute("ROLLBACK")
            except psycopg.Error as exc:
                if database_away(exc):  # nothing to roll back: the transaction went with it
                    return
                log.exception("rolling back")

    # -- the schema -----------------------------------------------------------------------

    def migrate(self) -> list[int]:
        """Every migration not applied yet, in number order, under a session advisory lock:
        replicas starting together migrate once (the others wait, then find nothing to do)."""
        applied = []
        with self.writer.lock:
            conn = self._writable()
            conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATE_LOCK,))
            try:
                conn.execute("CREATE TABLE IF NOT EXISTS _migrations "
                             "(number BIGINT PRIMARY KEY, name TEXT, at DOUBLE PRECISION)")
                done = {r[0] for r in conn.execute("SELECT number FROM _migrations").fetchall()}
                for migration in MIGRATIONS:
                    if migration.number in done:
                        continue
                    with self.atomic():
                        # the adapter answers the two calls a migration makes (see
                        # gg.store.migrations), which is all a step is handed on SQLite too
                        migration.step(cast("sqlite_utils.Database", _Schema(self)))
                        self.run("INSERT INTO _migrations (number, name, at) VALUES (?, ?, ?)",
                                 (migration.number, migration.name, time.time()))
                    applied.append(migration.number)
            finally:
                if not (conn.closed or conn.broken):
                    conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATE_LOCK,))
        return applied

    # -- small helpers ------------------------------------------------------------------

    def copy_rows(self, table: str, columns: list[str], rows: list[tuple]) -> None:
        """``rows`` into ``table`` with COPY, inside the current transaction."""
        if not self.in_transaction():
            raise RuntimeError("copy_rows runs inside atomic()")
        names = ", ".join(f'"{c}"' for c in columns)
        self._local.changed += 1
        with self._write.cursor() as cursor:
            with cursor.copy(f'COPY "{table}" ({names}) FROM STDIN') as copy:
                for row in rows:
                    copy.write_row(row)

    def trace(self, callback: Callable[[str], None] | None) -> None:
        """Every statement this database runs (as PostgreSQL reads it), to ``callback``."""
        self._trace = callback

    def size(self) -> int:
        return self.one("SELECT pg_database_size(current_database())")[0]

    def close(self) -> None:
        self.writer.close()
        self._pool.close()
        with self.writer.lock:
            self._write.close()


class _Transactions:
    """PostgreSQL's edges of a write transaction (the writer's hooks): BEGIN, its held items
    and events in commit order last, COMMIT with the transaction's notifications, savepoints
    that take back the notifications, held events and items and kept rows of what they undo."""

    def __init__(self, db: PgDatabase):
        self._db = db
        # the mark of the savepoint of each name made last (the writer's thread alone uses it)
        self._marks: dict[str, tuple[int, int, int]] = {}

    def begin(self, durable: bool) -> None:
        self._db._start(durable)

    def last(self) -> None:
        self._db._last()

    def commit(self) -> None:
        self._db._commit()

    def rollback(self) -> None:
        self._db._rollback()

    def savepoint(self, name: str, *, release_first: bool = False) -> object:
        self._db._edge(f"RELEASE {name}; SAVEPOINT {name}" if release_first
                       else f"SAVEPOINT {name}")
        local = self._db._local
        mark = self._marks[name] = (len(local.notes), local.events.mark(), local.held.mark())
        return mark

    def release(self, name: str) -> None:
        self._db._edge(f"RELEASE {name}")

    def rollback_to(self, name: str, mark: object) -> None:
        self._undo_held(mark)
        conn = self._db._write
        if conn.closed or conn.broken:
            return
        self._db._edge(f"ROLLBACK TO {name}; RELEASE {name}", conn)

    def _undo_held(self, mark: object) -> None:
        """Take back the notifications, events, items and kept rows held since ``mark``."""
        local = self._db._local
        assert isinstance(mark, tuple)
        notes, events, held = mark
        del local.notes[notes:]
        local.events.undo(events)
        local.held.undo(held)
        local.kept = {}

    def changes(self) -> int | None:
        """What the transaction changed so far, counted: its statements other than reads on
        the write connection, the events, notifications and items it holds for its end. A
        unit's first block that begins before its unit changed anything takes no savepoint of
        its own (two round trips a unit fewer): the unit's stands for it."""
        local = self._db._local
        return local.changed + local.held.added

    def rewind(self, name: str) -> None:
        """Back to the savepoint ``name`` made last, keeping it: what was held since taken
        back with it."""
        self._undo_held(self._marks[name])
        self._db._edge(f"ROLLBACK TO {name}")

    def holds(self) -> bool:
        conn = self._db._write
        return not conn.broken and conn.info.transaction_status == TransactionStatus.INTRANS

    def retryable(self, exc: BaseException) -> bool:
        """A unit that lost to another replica's writer (a deadlock, a lock waited for past
        LOCK_WAIT, a serialisation failure): undone by its savepoint, it may simply run again."""
        return isinstance(exc, (psycopg.errors.DeadlockDetected,
                                psycopg.errors.LockNotAvailable,
                                psycopg.errors.SerializationFailure))


class _Reader:
    """``db.conn``: ``execute`` on the write connection inside a transaction, else the pool."""

    def __init__(self, db: PgDatabase):
        self._db = db

    def execute(self, sql: str, params: tuple | dict = ()) -> Result:
        return self._db._read(sql, params)


class _Schema:
    """What a migration is handed on PostgreSQL: ``executescript`` and ``execute`` with the
    schema's SQLite types translated (:func:`gg.store.dialect.ddl`)."""

    def __init__(self, db: PgDatabase):
        self._db = db

    def executescript(self, script: str) -> None:
        for statement in split_script(script):
            self._db.run(ddl(statement))

    def execute(self, sql: str, params: tuple | dict = ()) -> Result:
        return self._db.run(ddl(sql), params)


__all__ = ["PgDatabase", "Row", "MIGRATE_LOCK"]
