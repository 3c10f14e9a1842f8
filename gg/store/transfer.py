"""Moving a control plane from SQLite to PostgreSQL (``gg server migrate``).

Both stores are first brought to this version's schema by their own migrations; then every
table is copied row for row, columns by name, in ONE PostgreSQL transaction (a failure leaves
the target as empty as it was), and each identity sequence is set past the highest copied
key. Nothing is re-minted: token and credential hashes are copied as they are, so every
person's token and every runner's credential keeps working against the new store.

PostgreSQL's text cannot hold U+0000, which a store written before gg refused it may hold in a
text column (a title, a name): such a character is copied as U+FFFD and counted per column, so
the copy goes through and says what it changed. When the copy fails all the same, the tables
the target was given are dropped again: it is left as empty as it was, ready for another try.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from gg.store import Store

NUL, NUL_COPIED_AS = "\x00", "\ufffd"


class TargetNotEmpty(Exception):
    """The PostgreSQL database already holds tables."""


def user_tables(store: Store) -> list[str]:
    """The PostgreSQL store's tables in its current schema, the bookkeeping one included."""
    return [r[0] for r in store.db.all(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() "
        "AND table_type = 'BASE TABLE' ORDER BY table_name")]


def target_is_empty(url: str) -> bool:
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM information_schema.tables "
                           "WHERE table_schema = current_schema()").fetchone()
    assert row is not None, "count(*) answers one row"
    return row[0] == 0


@dataclass
class Copied:
    """What a copy did: the rows copied per table, and per ``table.column`` how many text
    values held U+0000 and were copied with U+FFFD in its place."""

    rows: dict[str, int] = field(default_factory=dict)
    nul_replaced: dict[str, int] = field(default_factory=dict)


def without_nul(table: str, columns: list[str], rows: list[tuple], copied: Copied) -> list[tuple]:
    """``rows`` with every U+0000 of their text replaced by U+FFFD, counted in ``copied``."""
    out = []
    for row in rows:
        if any(type(v) is str and NUL in v for v in row):
            values = list(row)
            for i, v in enumerate(values):
                if type(v) is str and NUL in v:
                    values[i] = v.replace(NUL, NUL_COPIED_AS)
                    where = f"{table}.{columns[i]}"
                    copied.nul_replaced[where] = copied.nul_replaced.get(where, 0) + 1
            row = tuple(values)
        out.append(row)
    return out


def copy_store(sqlite_path: Path, url: str) -> Copied:
    """Copy the SQLite store at ``sqlite_path`` into the empty PostgreSQL database at ``url``.
    TargetNotEmpty when the database holds any table; after any other failure the database
    is empty again (see the module)."""
    if not target_is_empty(url):
        raise TargetNotEmpty(url)
    try:
        return _copy(sqlite_path, url)
    except BaseException:
        _drop_tables(url)
        raise


def _drop_tables(url: str) -> None:
    """Every table of the target's schema, dropped: it held none before the copy began. A
    database that cannot be reached keeps them (the copy's own error is the one raised)."""
    import psycopg

    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
            tables = [r[0] for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = "
                "current_schema() AND table_type = 'BASE TABLE'")]
            if tables:
                conn.execute("DROP TABLE " + ", ".join(f'"{t}"' for t in tables) + " CASCADE")
    except psycopg.Error:
        pass


def _copy(sqlite_path: Path, url: str) -> Copied:
    from gg.store.postgres import PgDatabase

    source = Store(sqlite_path)
    target = Store(url, pool_size=1)
    try:
        tables = [t for t in user_tables(target) if t != "_migrations"]
        copied = Copied()
        pg = target.db
        assert isinstance(pg, PgDatabase)  # a postgresql:// URL makes one (Store)
        with pg.atomic():
            for table in tables:
                wanted = [r[0] for r in pg.all(
                    "SELECT column_name FROM information_schema.columns WHERE table_schema = "
                    "current_schema() AND table_name = ? ORDER BY ordinal_position", (table,))]
                have = {r[1] for r in source.db.all(f'PRAGMA table_info("{table}")')}
                columns = [c for c in wanted if c in have]
                pg.run(f'DELETE FROM "{table}"')  # rows a migration seeded: the source's win
                names = ", ".join(f'"{c}"' for c in columns)
                rows = without_nul(table, columns,
                                   source.db.tuples(f'SELECT {names} FROM "{table}"'), copied)
                if rows:
                    pg.copy_rows(table, columns, rows)
                copied.rows[table] = len(rows)
            for table, column in pg.all(
                    "SELECT table_name, column_name FROM information_schema.columns "
                    "WHERE table_schema = current_schema() AND is_identity = 'YES'"):
                pg.run(f"SELECT setval(pg_get_serial_sequence('\"{table}\"', '{column}'), "
                       f'(SELECT COALESCE(max("{column}"), 0) + 1 FROM "{table}"), false)')
        # Statistics of what was copied, before any server plans a statement on it: without
        # them the first claims' reads of the queue are planned as if every table were empty
        # (a scan of every flight), until autovacuum's analyse comes round.
        pg.run("ANALYZE")
        return copied
    finally:
        source.close()
        target.close()
