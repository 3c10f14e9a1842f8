"""A statement with parameters on a PostgreSQL connection, run through libpq by psycopg's own
adaptation, without a cursor.

psycopg's cursor does for each statement what gg's store does not need: a cursor object made
and closed, the query parsed for its placeholders again, the result described, and its wait
for the answer polled from Python. On the writer's ~40 statements a flight that was ~35 µs of
CPU each, and its wait was a poll loop where libpq's own blocking read (which lets go of the
interpreter's lock) is enough (docs/performance.md, "Statements through libpq").

What is kept of psycopg: its adapters (``Transformer``, the connection's dumpers and loaders,
gg's own among them), its ``pq`` wrapper of libpq, and its exceptions
(``error_from_result``), so that a statement fails exactly as it did through a cursor: a
lock not granted, a deadlock, a unique violation, a plan another replica's migration made
stale are the same classes. As psycopg does, a statement is prepared on the connection the
second time it is run with the same parameter types (its first run is parsed and planned
once, unnamed), and a connection keeps at most :data:`PREPARED_KEPT` of them, the oldest let
go first; psycopg's own preparing is off on gg's connections (it lets every prepared statement
go after any ``ROLLBACK``, a unit's savepoint rolled back included). A script of several
statements still goes through the cursor, as one simple query.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from functools import lru_cache
from typing import Any, Callable, NoReturn, cast

import psycopg
from psycopg.adapt import PyFormat, Transformer
from psycopg.errors import error_from_result
from psycopg.pq import ConnStatus, DiagnosticField, ExecStatus

PREPARED_KEPT = 256  # a connection's prepared statements, at most
_OK = frozenset({ExecStatus.COMMAND_OK, ExecStatus.TUPLES_OK, ExecStatus.EMPTY_QUERY})


@lru_cache(maxsize=4096)
def dollars(text: str) -> tuple[bytes, tuple[str, ...] | None, int]:
    """psycopg's placeholders (``%s``, ``%(name)s``, ``%%`` for a literal ``%``, as
    :func:`gg.store.dialect.translate` writes them) as libpq's ``$1, $2…``; the names in their
    order when the placeholders are named (a name used twice is one parameter), else None;
    and how many parameters the statement takes."""
    out: list[str] = []
    names: dict[str, int] = {}
    positional = 0
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c != "%":
            j = text.find("%", i)
            j = n if j < 0 else j
            out.append(text[i:j])
            i = j
            continue
        nxt = text[i + 1] if i + 1 < n else ""
        if nxt == "%":
            out.append("%")
            i += 2
        elif nxt == "s":
            positional += 1
            out.append(f"${positional}")
            i += 2
        elif nxt == "(":
            end = text.index(")s", i)
            name = text[i + 2:end]
            number = names.setdefault(name, len(names) + 1)
            out.append(f"${number}")
            i = end + 2
        else:
            raise ValueError(f"a lone % in a statement: {text!r}")
    if names and positional:
        raise ValueError(f"named and positional placeholders in one statement: {text!r}")
    return ("".join(out).encode(), (tuple(names) if names else None),
            len(names) if names else positional)


def _values(text: str, params, names: tuple[str, ...] | None, wanted: int):
    """``params`` in the order of the statement's parameters; a mismatch is refused as
    psycopg's cursor refuses it (ProgrammingError), before anything is sent."""
    if names is not None:
        if not isinstance(params, Mapping):
            raise psycopg.ProgrammingError(f"named placeholders need a mapping: {text!r}")
        missing = [name for name in names if name not in params]
        if missing:
            raise psycopg.ProgrammingError(f"no value for {', '.join(missing)}: {text!r}")
        return [params[name] for name in names]
    if isinstance(params, Mapping) and params:
        raise psycopg.ProgrammingError(f"a mapping for positional placeholders: {text!r}")
    if len(params) != wanted:
        raise psycopg.ProgrammingError(
            f"the statement takes {wanted} parameters, {len(params)} were given: {text!r}")
    return params


class Statements:
    """One connection's statements run through libpq: its adapters and its prepared
    statements (kept on the connection: :func:`of`)."""

    __slots__ = ("conn", "tx", "prepared", "seen", "numbered")

    def __init__(self, conn: psycopg.Connection):
        self.conn = conn
        self.tx = Transformer(conn)
        self.prepared: OrderedDict[tuple, bytes] = OrderedDict()  # (query, types) -> name
        self.seen: set[tuple] = set()  # run once, unnamed: prepared at the next run
        self.numbered = 0

    def forget(self) -> None:
        """The connection's prepared statements were let go (``DEALLOCATE ALL``)."""
        self.prepared.clear()
        self.seen.clear()

    def run(self, text: str, params, row_maker: Callable[[Any], Callable[[Any], Any]]
            ) -> tuple[list, int]:
        """``text`` (psycopg's placeholders) with ``params``: the rows it answered (each made
        by what ``row_maker`` gives for the result, from the row's values) and its row count."""
        query, names, wanted = dollars(text)
        values = _values(text, params, names, wanted)
        tx = self.tx
        dumped = tx.dump_sequence(values, [PyFormat.TEXT] * len(values))
        types = tx.types
        key = (query, types)
        pgconn = self.conn.pgconn
        name = self.prepared.get(key)
        if name is not None:
            self.prepared.move_to_end(key)
            result = pgconn.exec_prepared(name, cast(Any, dumped), tx.formats)
        elif key in self.seen:
            name = self._prepare(key, query, types)
            result = pgconn.exec_prepared(name, cast(Any, dumped), tx.formats)
        else:
            self.seen.add(key)
            if len(self.seen) > 4 * PREPARED_KEPT:
                self.seen.clear()
            result = pgconn.exec_params(query, dumped, types, tx.formats)
        if result.status not in _OK:
            self._failed(key if name is not None else None, result)
        if result.status != ExecStatus.TUPLES_OK:
            count = result.command_tuples
            return [], count if count is not None else -1
        tx.set_pgresult(result)
        count = result.ntuples
        return (tx.load_rows(0, count, row_maker(result)) if count else []), count

    def _prepare(self, key: tuple, query: bytes, types) -> bytes:
        if len(self.prepared) >= PREPARED_KEPT:
            _, old = self.prepared.popitem(last=False)
            self.conn.pgconn.exec_(b"DEALLOCATE " + old)
        self.numbered += 1
        name = b"gg_%d" % self.numbered
        result = self.conn.pgconn.prepare(name, query, types)
        if result.status != ExecStatus.COMMAND_OK:
            self._failed(None, result)
        self.prepared[key] = name
        return name

    def _failed(self, key: tuple | None, result) -> NoReturn:
        """Raise what psycopg's cursor would have raised for ``result``: the connection lost
        is an OperationalError (the store then makes another), a statement the database
        refused is the class of its SQLSTATE. A prepared statement (``key``) found gone or
        stale is prepared afresh next time; the caller still gets this run's error."""
        pgconn = self.conn.pgconn
        state = result.error_field(DiagnosticField.SQLSTATE)
        if pgconn.status == ConnStatus.BAD or state is None:
            message = (result.error_message or pgconn.error_message or b"").decode(
                "utf-8", "replace").strip()
            raise psycopg.OperationalError(message or "the connection to the database was lost")
        if key is not None and state in (b"26000", b"0A000"):  # gone; its plan is stale
            self.prepared.pop(key, None)
            self.seen.discard(key)
        raise error_from_result(result, encoding=self.conn.info.encoding)


def of(conn: psycopg.Connection) -> Statements:
    """The connection's :class:`Statements`, made the first time it is asked."""
    statements = getattr(conn, "_gg_statements", None)
    if statements is None:
        statements = Statements(conn)
        conn._gg_statements = statements  # type: ignore[attr-defined]
    return statements
