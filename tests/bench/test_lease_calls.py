"""``bench/lease_calls.py`` runs on a fresh machine's default store and reports, for each of
a runner's lease calls, its statements and its CPU (the figures are the bench's, not
asserted here: a test never asserts a duration)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "lease_calls.py"


def test_the_lease_calls_bench_reports_each_call_and_writes_nothing_when_told_not():
    done = subprocess.run([sys.executable, str(BENCH), "--flights", "5", "--json", "--no-write"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["store"] == "SQLite" and result["flights"] == 5
    assert list(result["calls"]) == ["claim", "started", "renewal", "hand-back"]
    for call in result["calls"].values():
        assert call["statements"] > 0 and call["cpu_ms"] > 0
    assert "| renewal |" in done.stderr  # the text on stderr, the JSON alone on stdout


def test_a_bad_flight_count_or_database_url_is_one_sentence_and_runs_nothing():
    for argv, said in ((["--flights", "0"], "--flights takes a number of at least 1"),
                       (["--history", "-1"], "--history takes a number of landed flights, 0 or more"),
                       (["--database", "mysql://db"], "--database takes a postgresql:// URL")):
        done = subprocess.run([sys.executable, str(BENCH), *argv, "--no-write"],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode != 0 and done.stderr.strip() == said and done.stdout == ""


def test_under_noise_the_listings_run_and_are_not_counted_as_the_calls_statements():
    runs = {}
    for noise in (False, True):
        done = subprocess.run([sys.executable, str(BENCH), "--flights", "20", "--json",
                               "--no-write"] + (["--noise"] if noise else []),
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        runs[noise] = json.loads(done.stdout)
    heard = runs[True]["noise"]
    assert heard["noise"] and heard["flights_listed"] >= 1 and heard["errors"] == 0
    assert "Noise ran" in done.stderr
    assert ({k: c["statements"] for k, c in runs[True]["calls"].items()}
            == {k: c["statements"] for k, c in runs[False]["calls"].items()})


def _history_run(*argv: str) -> dict:
    done = subprocess.run([sys.executable, str(BENCH), "--flights", "5", "--json", "--no-write",
                           *argv], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _check_history(plain: dict, past: dict) -> None:
    """The warm-up's 20 landed flights copied up to 100, each with its one grant, its facts
    (started, exit) and its events (opened, claimed, landed); the calls run the very
    statements they run on a new store."""
    assert plain["history"] == {}
    added = past["history"]["added"]
    assert past["history"]["copies"] == 4 and past["history"]["landed"] == 100
    assert added == {"flights": 80, "grants": 80, "facts": 160, "events": 240}, added
    assert ({k: c["statements"] for k, c in past["calls"].items()}
            == {k: c["statements"] for k, c in plain["calls"].items()})


def test_a_history_of_landed_flights_is_copied_in_before_the_calls_are_measured():
    _check_history(_history_run(), _history_run("--history", "100"))


def test_a_history_is_copied_in_on_postgresql_too(pg_cluster):
    url = pg_cluster.url("postgres")
    _check_history(_history_run("--database", url),
                   _history_run("--database", url, "--history", "100"))
