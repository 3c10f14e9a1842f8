"""A real control plane on PostgreSQL (``gg server --database postgresql://…``) with real
runner processes: flights land, the store is the database (not the data dir), and a second
server process started on the same database finds the same organisation and history."""

from __future__ import annotations

import json
import os
import subprocess

import psycopg

from gg.launch import LocalServer, free_port, gg_argv

from support import wait_until


def test_flights_land_on_a_server_whose_store_is_postgresql(make_fleet, pg_cluster):
    url = pg_cluster.new_database(migrated=False)  # the server migrates an empty database
    fleet = make_fleet({"GG_DATABASE_URL": url})
    fleet.runner("r1", workers=2)
    fleet.wait_online("r1")
    api = fleet.api()
    ids = [api.open_flight({"command": ["sh", "-c", f"echo out {i}"]})["id"] for i in range(12)]
    waited = fleet.gg("fly", "--wait", "--", "sh", "-c", "echo waited; exit 3")
    assert waited.returncode == 3 and waited.stdout == "waited\n", waited.stderr

    def landed():
        rows = {f["id"]: f for f in api.flights(limit=100)}
        return rows if all(rows[i]["stage"] == "landed" for i in ids) else None

    wait_until(landed, timeout=60, what="12 flights to land")
    for i, flight_id in enumerate(ids):
        shown = api.flight(flight_id)
        assert len(shown["attempts"]) == 1
        assert "".join(f["body"]["text"] for f in shown["facts"]
                       if f["kind"] == "output") == f"out {i}\n"
    # the history is in the database, and the data dir holds no SQLite store
    assert not (fleet.server.data_dir / "gg.sqlite3").exists()
    with psycopg.connect(url) as conn:
        landed_rows = conn.execute("SELECT count(*) FROM flights WHERE stage = 'landed'").fetchone()
        grants = conn.execute("SELECT count(*), count(DISTINCT (flight_id, epoch)) FROM grants"
                              ).fetchone()
        owners = conn.execute("SELECT count(*) FROM people WHERE is_owner = 1").fetchone()
    assert landed_rows[0] == 12
    assert grants[0] == grants[1] == 13
    assert owners[0] == 1


def test_a_second_server_on_the_same_database_serves_the_same_fleet(make_fleet, pg_cluster,
                                                                    tmp_path):
    url = pg_cluster.new_database(migrated=False)
    fleet = make_fleet({"GG_DATABASE_URL": url})
    opened = fleet.api().open_flight({"command": ["echo", "queued"]})["id"]
    other = LocalServer(tmp_path / "other-data", free_port(), env={**fleet.env},
                        log=tmp_path / "other.log")
    other.start()
    try:
        # its own data dir has no owner token: the owner was made once, by the first server
        assert not (other.data_dir / "owner-token").exists()
        shown = subprocess.run(
            gg_argv("show", opened, "--json"), capture_output=True, text=True, timeout=60,
            env={**fleet.env, "GG_SERVER": other.url, "GG_TOKEN": fleet.server.owner_token(),
                 "GG_CONFIG_DIR": str(tmp_path / "cfg"), "PATH": "/usr/bin:/bin"})
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout)["stage"] == "ready"
    finally:
        other.stop()


def test_a_database_url_that_is_not_postgresql_is_refused_in_one_sentence(tmp_path):
    done = subprocess.run(gg_argv("server", "--data-dir", str(tmp_path), "--database",
                                  "mysql://nowhere/db", "--listen", f"127.0.0.1:{free_port()}"),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "--database takes a postgresql:// URL (without one the store is SQLite in "
        "--data-dir)"]


def test_a_database_that_does_not_answer_is_one_sentence_not_a_traceback(tmp_path):
    port = free_port()
    url = f"postgresql://gg:sekrit@127.0.0.1:{port}/nothing"
    done = subprocess.run(gg_argv("server", "--data-dir", str(tmp_path), "--listen",
                                  f"127.0.0.1:{free_port()}"),
                          env={**os.environ, "GG_DATABASE_URL": url},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 7, done.stderr
    lines = done.stderr.strip().splitlines()
    shown = f"postgresql://gg:***@127.0.0.1:{port}/nothing"  # never the password
    assert len(lines) == 1 and lines[0].startswith(f"cannot reach the database {shown}: "), lines
    assert "sekrit" not in done.stderr


def test_a_control_plane_moves_from_sqlite_to_postgresql_and_its_runner_carries_on(
        make_fleet, pg_cluster):
    fleet = make_fleet({"GG_DATABASE_URL": ""})  # SQLite in the data dir
    fleet.runner("r1")
    fleet.wait_online("r1")
    api = fleet.api()
    before = [api.open_flight({"command": ["echo", f"before {i}"]})["id"] for i in range(3)]
    wait_until(lambda: all(api.flight(f)["stage"] == "landed" for f in before),
               timeout=60, what="the first flights to land")
    url = pg_cluster.new_database(migrated=False)
    data_dir = str(fleet.server.data_dir)
    running = fleet.gg("server", "migrate", "--from-data-dir", data_dir, "--to", url)
    assert running.returncode == 6
    assert running.stderr.strip() == (f"a gg server is running on {data_dir}; stop it first, "
                                      "so that nothing is written after the copy")

    fleet.server.stop()  # the runner process keeps running, waiting for its server
    moved = fleet.gg("server", "migrate", "--from-data-dir", data_dir, "--to", url)
    assert moved.returncode == 0, moved.stderr
    assert moved.stdout.startswith("copied ") and url in moved.stdout
    assert "NUL" not in moved.stdout  # nothing was changed on the way
    again = fleet.gg("server", "migrate", "--from-data-dir", data_dir, "--to", url)
    assert again.returncode == 6
    assert again.stderr.strip() == (f"the database {url} is not empty; give an empty one (gg "
                                    "never writes over another store)")

    fleet.server.env = {**fleet.server.env, "GG_DATABASE_URL": url}
    fleet.server.start()  # same port, same owner token, the store now PostgreSQL
    fleet.wait_online("r1")
    after = api.open_flight({"command": ["echo", "after the move"]})["id"]
    wait_until(lambda: api.flight(after)["stage"] == "landed", timeout=60,
               what="a flight opened after the move to land on the same runner")
    shown = api.flight(after)
    assert shown["attempts"][0]["runner_name"] == "r1"
    for i, flight_id in enumerate(before):  # the history came along
        old = api.flight(flight_id)
        assert old["stage"] == "landed"
        assert "".join(f["body"]["text"] for f in old["facts"]
                       if f["kind"] == "output") == f"before {i}\n"
    assert [r["name"] for r in api.runners()] == ["r1"]
    events = api.events(limit=1000)
    assert len({e["seq"] for e in events}) == len(events)  # new events continue the sequence


def test_gg_server_migrate_says_what_it_changed_and_a_failed_copy_leaves_nothing(tmp_path,
                                                                                 pg_cluster):
    """A store written before gg refused U+0000 may hold it in a title or a name: the move
    copies it as U+FFFD and says where. A copy that fails all the same is one sentence, exit
    1, and the database is empty again, so the next try is not refused as 'not empty'."""
    import sqlite3

    from gg.store import open_store

    def store_with(directory, *keys):
        directory.mkdir()
        open_store(directory).close()
        with sqlite3.connect(directory / "gg.sqlite3") as raw:
            raw.executemany("INSERT INTO attributes (key, allowed, set_at, set_by) "
                            "VALUES (?, '[]', 1.0, 'ops')", [(k,) for k in keys])
        return str(directory)

    def migrate(data_dir, url):
        return subprocess.run(gg_argv("server", "migrate", "--from-data-dir", data_dir,
                                      "--to", url), capture_output=True, text=True, timeout=120)

    url = pg_cluster.new_database(migrated=False)
    clashing = store_with(tmp_path / "clashing", "zone\x00", "zone\ufffd")
    failed = migrate(clashing, url)
    assert failed.returncode == 1, failed.stderr
    lines = failed.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"the copy into {url} failed: "), lines
    assert lines[0].endswith("nothing was kept there (it is empty again) and the SQLite store "
                             "is as it was")

    fine = store_with(tmp_path / "fine", "zone\x00b")
    moved = migrate(fine, url)  # the same database: it was left empty
    assert moved.returncode == 0, moved.stderr
    assert moved.stdout.splitlines()[0] == (
        "1 text value held a NUL character (U+0000), which PostgreSQL's text cannot hold: "
        "each was copied with U+FFFD in its place: attributes.key (1)")
    with psycopg.connect(url) as pg:
        assert pg.execute("SELECT key FROM attributes").fetchall() == [("zone\ufffdb",)]
