"""gg.store.pg_statements: PostgreSQL statements with parameters through libpq, prepared once a
connection by gg, failing as psycopg's cursor fails."""

from __future__ import annotations

import psycopg
import pytest

from gg.store import Store, pg_statements
from gg.store.pg_statements import dollars
from gg.store.postgres import _configure, _row_maker


def test_psycopg_placeholders_become_numbered_ones():
    assert dollars("SELECT * FROM t WHERE a = %s AND b = %s") == (
        b"SELECT * FROM t WHERE a = $1 AND b = $2", None, 2)
    # a name used twice is one parameter; a doubled % is a literal one
    assert dollars("UPDATE t SET a = %(a)s WHERE b = %(b)s OR a = %(a)s AND c LIKE 'x%%'") == (
        b"UPDATE t SET a = $1 WHERE b = $2 OR a = $1 AND c LIKE 'x%'", ("a", "b"), 2)
    with pytest.raises(ValueError):
        dollars("SELECT %s, %(a)s")


@pytest.fixture
def conn(pg_url):
    c = psycopg.connect(pg_url, autocommit=True)
    _configure(c)
    c.execute("CREATE TABLE things (id TEXT PRIMARY KEY, n BIGINT, x DOUBLE PRECISION, "
              "flag BIGINT)")
    yield c
    c.close()


def _prepared(conn) -> list[str]:
    return sorted(r[0] for r in conn.execute("SELECT name FROM pg_prepared_statements"))


def test_a_statement_is_prepared_at_its_second_run_and_read_by_name(conn):
    s = pg_statements.of(conn)
    insert = "INSERT INTO things (id, n, x, flag) VALUES (%s, %s, %s, %s)"
    assert s.run(insert, ("a", 1, 0.5, True), _row_maker) == ([], 1)
    assert _prepared(conn) == []  # once: parsed and planned unnamed
    s.run(insert, ("b", 2, 1.5, False), _row_maker)  # the same types again: prepared
    assert _prepared(conn) == ["gg_1"]
    s.run(insert, ("c", 3, None, False), _row_maker)  # a NULL's type is another statement
    assert _prepared(conn) == ["gg_1"]
    rows, count = s.run("SELECT * FROM things WHERE n >= %(least)s ORDER BY id", {"least": 1},
                        _row_maker)
    assert count == 3
    assert [(r["id"], r["n"], r["x"], r["flag"]) for r in rows] == [
        ("a", 1, 0.5, 1), ("b", 2, 1.5, 0), ("c", 3, None, 0)]  # a bool as 0/1 (gg's dumper)
    assert s.run("UPDATE things SET n = n + %s", (10,), _row_maker) == ([], 3)


def test_a_rollback_keeps_gg_s_prepared_statements(conn):
    """psycopg lets every statement it prepared go after any ROLLBACK (a savepoint rolled back
    too); its preparing is off on gg's connections, and gg's own stay prepared."""
    s = pg_statements.of(conn)
    for i in range(2):
        s.run("INSERT INTO things (id, n) VALUES (%s, %s)", (f"k{i}", i), _row_maker)
    for _ in range(8):  # past psycopg's own threshold, were its preparing on
        conn.execute("SELECT n FROM things WHERE id = %s", ("k0",))
    conn.execute("BEGIN")
    conn.execute("SAVEPOINT unit")
    s.run("INSERT INTO things (id, n) VALUES (%s, %s)", ("k9", 9), _row_maker)
    conn.execute("ROLLBACK TO SAVEPOINT unit")
    conn.execute("ROLLBACK")
    assert _prepared(conn) == ["gg_1"]
    assert s.run("INSERT INTO things (id, n) VALUES (%s, %s)", ("k3", 3), _row_maker) == ([], 1)


def test_a_refused_statement_fails_as_through_a_cursor(conn):
    s = pg_statements.of(conn)
    insert = "INSERT INTO things (id, n) VALUES (%s, %s)"
    s.run(insert, ("a", 1), _row_maker)
    for _ in range(2):  # unnamed, then prepared: the same class either way
        with pytest.raises(psycopg.errors.UniqueViolation):
            s.run(insert, ("a", 1), _row_maker)
    with pytest.raises(psycopg.errors.UndefinedTable):
        s.run("SELECT * FROM nothing WHERE id = %s", ("a",), _row_maker)


def test_parameters_that_do_not_fit_the_statement_are_refused_before_anything_is_sent(conn):
    s = pg_statements.of(conn)
    for text, params in (("SELECT * FROM things WHERE id = %s AND n = %s", ("a",)),
                         ("SELECT * FROM things WHERE id = %s", {"id": "a"}),
                         ("SELECT * FROM things WHERE id = %(id)s", ("a",)),
                         ("SELECT * FROM things WHERE id = %(id)s", {"n": 1})):
        with pytest.raises(psycopg.ProgrammingError):
            s.run(text, params, _row_maker)
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert s.seen == set() and not s.prepared


def test_a_connection_the_database_ended_is_an_operational_error(conn, pg_url):
    s = pg_statements.of(conn)
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))
    with pytest.raises(psycopg.OperationalError):
        s.run("SELECT * FROM things WHERE id = %s", ("a",), _row_maker)
    assert conn.broken


def test_a_connection_keeps_at_most_so_many_prepared_statements(conn, monkeypatch):
    monkeypatch.setattr(pg_statements, "PREPARED_KEPT", 3)
    s = pg_statements.of(conn)
    for i in range(5):  # five statements, each run twice: the oldest two let go
        for _ in range(2):
            s.run(f"SELECT {i} AS n, id FROM things WHERE id = %s", ("a",), _row_maker)
    assert _prepared(conn) == ["gg_3", "gg_4", "gg_5"]
    assert s.run("SELECT 0 AS n, id FROM things WHERE id = %s", ("a",), _row_maker) == ([], 0)


def test_the_store_s_statements_are_prepared_by_gg_not_by_psycopg(pg_url):
    store = Store(pg_url, pool_size=1)
    try:
        for i in range(3):
            store.db.run("INSERT INTO meta (key, value) VALUES (?, ?)", (f"k{i}", "v"))
            assert store.db.one("SELECT value FROM meta WHERE key = ?", (f"k{i}",))[0] == "v"
        with store.db.atomic():
            names = [r[0] for r in store.db.all("SELECT name FROM pg_prepared_statements")]
        assert names and all(n.startswith("gg_") for n in names), names
    finally:
        store.close()
