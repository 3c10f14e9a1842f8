"""``bench/throughput.py --history N`` measures on a store that has run for months: after the
warm-up its landed flights are copied until the store holds N, and the measured flights still
land once each (the figures are the bench's, not asserted here: a test never asserts a
duration). It runs with ``--settle 0``: on a busy machine (CI shares two cores with the rest
of the suite) the load average never falls under 2, and waiting for it would outlast the
test's bound."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "throughput.py"


def test_the_throughput_bench_measures_on_a_store_with_a_history():
    done = subprocess.run([sys.executable, str(BENCH), "--runners", "2", "--flights", "6",
                           "--repeats", "1", "--openers", "1", "--history", "300", "--json",
                           "--no-write", "--settle", "0"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["history"]["landed"] >= 300 and result["history"]["added"]["flights"] >= 280
    assert result["sizes"]["2"]["per_second"]["n"] == 1  # the run's flights all landed, once
    assert "The store held" in done.stderr


def test_a_negative_history_is_one_sentence_and_runs_nothing():
    done = subprocess.run([sys.executable, str(BENCH), "--history", "-1", "--no-write"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and done.stdout == ""
    assert done.stderr.strip() == "--history takes a number of landed flights, 0 or more"


def test_a_negative_settle_is_one_sentence_and_runs_nothing():
    done = subprocess.run([sys.executable, str(BENCH), "--settle", "-1", "--no-write"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and done.stdout == ""
    assert done.stderr.strip() == "--settle takes a number of seconds, 0 or more"
