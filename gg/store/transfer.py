"""Moving a control plane from SQLite to PostgreSQL (``gg server migrate``).

Both stores are first brought to this version's schema by their own migrations; then every
table is copied row for row, columns by name, in ONE PostgreSQL transaction (a failure leaves
the target as empty as it was), and each identity sequence is set past the highest copied
key. Nothing is re-minted: token and credential hashes are copied as they are, so every
person's token and every runner's credential keeps working against the new store.
"""

from __future__ import annotations

from pathlib import Path

from gg.store import Store


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
    return row[0] == 0


def copy_store(sqlite_path: Path, url: str) -> dict[str, int]:
    """Copy the SQLite store at ``sqlite_path`` into the empty PostgreSQL database at ``url``;
    the rows copied per table. TargetNotEmpty when the database holds any table."""
    if not target_is_empty(url):
        raise TargetNotEmpty(url)
    source = Store(sqlite_path)
    target = Store(url, pool_size=1)
    try:
        tables = [t for t in user_tables(target) if t != "_migrations"]
        copied: dict[str, int] = {}
        pg = target.db
        with pg.atomic():
            for table in tables:
                wanted = [r[0] for r in pg.all(
                    "SELECT column_name FROM information_schema.columns WHERE table_schema = "
                    "current_schema() AND table_name = ? ORDER BY ordinal_position", (table,))]
                have = {r[1] for r in source.db.all(f'PRAGMA table_info("{table}")')}
                columns = [c for c in wanted if c in have]
                pg.run(f'DELETE FROM "{table}"')  # rows a migration seeded: the source's win
                names = ", ".join(f'"{c}"' for c in columns)
                rows = source.db.tuples(f'SELECT {names} FROM "{table}"')
                if rows:
                    pg.copy_rows(table, columns, rows)
                copied[table] = len(rows)
            for table, column in pg.all(
                    "SELECT table_name, column_name FROM information_schema.columns "
                    "WHERE table_schema = current_schema() AND is_identity = 'YES'"):
                pg.run(f"SELECT setval(pg_get_serial_sequence('\"{table}\"', '{column}'), "
                       f'(SELECT COALESCE(max("{column}"), 0) + 1 FROM "{table}"), false)')
        return copied
    finally:
        source.close()
        target.close()
