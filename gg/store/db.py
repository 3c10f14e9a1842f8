"""What the store's row classes ask of a database: the :class:`Database` protocol.

Two stores implement it: SQLite in the data dir (:class:`gg.store.sqlite.SqliteDatabase`, the
embedded default) and PostgreSQL, shared by replicas (:class:`gg.store.postgres.PgDatabase`).
Both write through one group-commit writer (:mod:`gg.store.writer`) and take the same SQL,
SQLite's, translated for PostgreSQL in one place (:mod:`gg.store.dialect`). What only one of
them can do (SQLite's online backup, PostgreSQL's COPY and NOTIFY) is not part of it.
"""

from __future__ import annotations

import json
from concurrent.futures import Future
from typing import Any, Callable, ContextManager, Iterator, Protocol, Sequence

from gg.errors import BadRequest
from gg.store.held import Fold, Held
from gg.store.writer import Writer, WriteTurns

NUL_REFUSED = ("text with a NUL character (U+0000) is not accepted: remove it (a name, an id, "
               "a title or a reason never needs one)")


class Row(Protocol):
    """A row addressable by column name and by index (``sqlite3.Row``, or PostgreSQL's
    :class:`gg.store.postgres.Row`)."""

    def __getitem__(self, key: Any) -> Any: ...

    def keys(self) -> list[str]: ...

    def __iter__(self) -> Iterator[Any]: ...

    def __len__(self) -> int: ...


class Cursor(Protocol):
    """What a statement answered."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Database(Protocol):
    """A store's database, as the row classes (``gg/store/*.py``), :class:`gg.store.Store`
    and the control layer's writer calls use it. Statements are SQLite's, with ``?`` or
    ``:name`` placeholders; a text parameter holding U+0000 is refused (:func:`refuse_nul`)."""

    dialect: str  # "sqlite" or "postgresql"
    path: str  # the SQLite file, or the PostgreSQL URL
    writer: Writer  # the group-commit writer (its ``before_commit`` step is the control's)

    def one(self, sql: str, params: tuple | dict = ()) -> Row | None: ...

    def all(self, sql: str, params: tuple | dict = ()) -> Sequence[Row]: ...

    def all_in(self, sql: str, ids: Sequence[str]) -> list[Row]: ...

    def all_kept(self, table: str, sql: str, params: tuple = ()) -> Sequence[Row]:
        """Rows of ``table``, a small table that seldom changes, which a store may keep for
        the rest of a write transaction."""

    def tuples(self, sql: str, params: tuple | dict = ()) -> list[tuple]: ...

    def run(self, sql: str, params: tuple | dict = ()) -> Cursor:
        """A statement that writes: inside the current transaction, else one of its own."""

    def insert(self, table: str, values: dict[str, Any], *,
               returning: str | None = None) -> Cursor: ...

    def update(self, table: str, key: str, key_value: Any, values: dict[str, Any]) -> int: ...

    def record_event(self, values: dict[str, Any],
                     then: Callable[[int], None] | None = None) -> None:
        """An event row, its seq handed to ``then`` in the same transaction: on PostgreSQL
        inserted at the transaction's end, in commit order (gg.store.event_order)."""

    def hold(self, kind: str, item: Any) -> None:
        """``item`` for ``kind``'s fold at the end of the write transaction (gg.store.held);
        outside a transaction, a transaction of its own."""

    def fold_at_end(self, kind: str, fold: Fold) -> None:
        """What folds ``kind``'s held items (registered once, by the store)."""

    @property
    def conn(self) -> Any:
        """Something with ``execute(sql, params)``: the write connection inside a
        transaction, otherwise a reader (on SQLite a ``sqlite3.Connection``)."""

    def atomic(self, durable: bool = True) -> ContextManager[None]: ...

    def submit(self, unit: Callable[[], Any], *, durable: bool = True) -> Future: ...

    def in_transaction(self) -> bool: ...

    def after_commit(self, fn: Callable[[], None]) -> None: ...

    @property
    def turns(self) -> WriteTurns: ...

    def migrate(self) -> list[int]: ...

    def available(self) -> bool: ...

    def size(self) -> int: ...

    def trace(self, callback: Callable[[str], None] | None) -> None: ...

    def close(self) -> None: ...


IN_CHUNK = 400  # ids in one IN (...) list: twice that stays under SQLite's 999 variables


class SharedDatabase:
    """What both stores do the same way, written once: their transactions are their
    writer's, and ``insert`` and ``update`` by column name are statements for their ``run``."""

    writer: Writer
    _folds: dict[str, Fold]

    def atomic(self, durable: bool = True) -> ContextManager[None]:
        """One write transaction (:meth:`gg.store.writer.Writer.atomic`), serialised with
        every other writer (of every replica, on PostgreSQL). ``durable=False`` commits
        without the durable flush, for writes whose loss on a power cut is harmless, such as
        a check-in's ``last_seen_at`` (on SQLite ``synchronous=NORMAL`` for that commit: its
        WAL frames reach the disk with the next durable commit or checkpoint; a crash of the
        process loses nothing)."""
        return self.writer.atomic(durable)

    def submit(self, unit: Callable[[], Any], *, durable: bool = True) -> Future:
        """``unit`` in the writer's next group commit (:meth:`gg.store.writer.Writer.submit`)."""
        return self.writer.submit(unit, durable=durable)

    @property
    def turns(self) -> WriteTurns:
        return self.writer.turns

    def in_transaction(self) -> bool:
        return self.writer.in_transaction()

    def after_commit(self, fn: Callable[[], None]) -> None:
        """``fn`` once this thread's write is committed (:meth:`gg.store.writer.Writer.after_commit`)."""
        self.writer.after_commit(fn)

    def run(self, sql: str, params: tuple | dict = ()) -> Cursor:
        raise NotImplementedError

    def all(self, sql: str, params: tuple | dict = ()) -> Sequence[Row]:
        raise NotImplementedError

    def all_in(self, sql: str, ids: Sequence[str]) -> list[Row]:
        """``sql`` with ``{ids}`` where an ``IN (...)`` list of ``ids`` goes (as often as it
        is written), run over ``ids`` IN_CHUNK at a time: its rows, chunk after chunk."""
        out: list[Row] = []
        times = sql.count("{ids}")
        for start in range(0, len(ids), IN_CHUNK):
            chunk = tuple(ids[start:start + IN_CHUNK])
            out.extend(self.all(sql.format(ids=",".join("?" * len(chunk))), chunk * times))
        return out

    def insert(self, table: str, values: dict[str, Any], *,
               returning: str | None = None) -> Cursor:
        cols = ", ".join(f'"{k}"' for k in values)  # quoted: some columns are keywords
        marks = ", ".join(":" + k for k in values)
        tail = f" RETURNING {returning}" if returning else ""
        return self.run(f"INSERT INTO {table} ({cols}) VALUES ({marks}){tail}", values)

    def record_event(self, values: dict[str, Any],
                     then: Callable[[int], None] | None = None) -> None:
        """An event row inserted at once (one writer: seq order is commit order), its seq
        handed to ``then``."""
        seq = self.insert("events", values, returning="seq").fetchall()[0][0]
        if then is not None:
            then(seq)

    def hold(self, kind: str, item: Any) -> None:
        if not self.in_transaction():
            with self.atomic():
                self.hold(kind, item)
            return
        self._held().add(kind, item)

    def fold_at_end(self, kind: str, fold: Fold) -> None:
        self._folds[kind] = fold

    def _held(self) -> Held:
        """This thread's write transaction's held items."""
        raise NotImplementedError

    def update(self, table: str, key: str, key_value: Any, values: dict[str, Any]) -> int:
        if not values:
            return 0
        sets = ", ".join(f'"{k}" = :{k}' for k in values)
        params = dict(values)
        params["_key"] = key_value
        return self.run(f"UPDATE {table} SET {sets} WHERE {key} = :_key", params).rowcount


def refuse_nul(params: tuple | list | dict) -> None:
    """Refuse a statement whose text holds U+0000, on both stores. PostgreSQL's text cannot
    hold it (psycopg will not send it), so without this the same request would be stored or
    looked up on SQLite and crash on PostgreSQL; refused on both, it means the same on both:
    400, whatever the route. JSON columns (fact and event bodies, commands) are kept escaped,
    so a flight's output may still carry a NUL byte."""
    for value in params.values() if isinstance(params, dict) else params:
        if type(value) is str and "\x00" in value:
            raise BadRequest(NUL_REFUSED)


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


# The JSON most columns hold for a row that set nothing (a runner's labels, policy, agents...):
# built without the parser, a fresh value each time as the parser would give. A claim reads
# a runner row of nine JSON columns and several flight rows, so this is most of the parses.
_EMPTY: dict[str, type] = {"{}": dict, "[]": list}


def loads(text: str | None, default: Any = None) -> Any:
    if text is None or text == "":
        return default
    if type(text) is str:
        empty = _EMPTY.get(text)
        if empty is not None:
            return empty()
    return json.loads(text)
