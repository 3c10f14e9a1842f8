"""``bench/requests.py`` measures a request both ways, its head and body in one send and in
two, against a real control plane (the figures are the bench's, not asserted here: a test
never asserts a duration)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "requests.py"


def test_the_requests_bench_measures_both_ways_in_rounds():
    done = subprocess.run([sys.executable, str(BENCH), "--count", "20", "--rounds", "2",
                           "--json", "--no-write"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    for way in ("one send", "two sends"):
        assert len(result["rounds_seen"][way]["client_us"]) == 2
        assert result["ways"][way]["wall_us"] > 0
    assert "| one send |" in done.stderr and "| two sends |" in done.stderr


def test_a_count_of_nothing_is_one_sentence_and_runs_nothing():
    done = subprocess.run([sys.executable, str(BENCH), "--count", "0", "--no-write"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and done.stdout == ""
    assert done.stderr.strip() == "--count and --rounds take a whole number, 1 or more"
