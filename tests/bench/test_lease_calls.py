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
