"""The benchmarks read the server's event-loop lag over one run as the difference of two
``/metrics`` readings of ``gg_event_loop_lag_seconds``, each percentile as the bucket it
falls in (bench/loop_lag.py)."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

_PATH = Path(__file__).resolve().parents[2] / "bench" / "loop_lag.py"
_spec = importlib.util.spec_from_file_location("bench_loop_lag", _PATH)
loop_lag = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(loop_lag)


def _metrics(counts: dict[str, int], total: float) -> str:
    """A /metrics text with the lag histogram's cumulative ``counts`` by ``le``."""
    lines = ["# HELP gg_event_loop_lag_seconds How much later than asked the loop woke.",
             "# TYPE gg_event_loop_lag_seconds histogram"]
    lines += [f'gg_event_loop_lag_seconds_bucket{{le="{le}"}} {n}.0' for le, n in counts.items()]
    lines += [f"gg_event_loop_lag_seconds_count {list(counts.values())[-1]}.0",
              f"gg_event_loop_lag_seconds_sum {total}",
              "gg_claims_parked 3.0"]
    return "\n".join(lines) + "\n"


def test_a_runs_lag_is_the_difference_of_two_readings_read_as_bucket_bounds():
    before = loop_lag.read(_metrics({"0.001": 90, "0.02": 100, "0.5": 100, "+Inf": 100}, 0.2))
    # the run: 98 wake-ups within 1 ms, one within 20 ms, one within 500 ms
    after = loop_lag.read(_metrics({"0.001": 188, "0.02": 199, "0.5": 200, "+Inf": 200}, 0.7))
    got = loop_lag.figures(loop_lag.between(before, after))
    assert got == {"p50_ms": 1.0, "p99_ms": 20.0, "max_ms": 500.0, "mean_ms": 5.0, "n": 100,
                   "later_than_target": 1}


def test_a_wake_up_past_the_last_bucket_is_shown_as_such_and_an_empty_run_as_nothing():
    past = loop_lag.read(_metrics({"0.001": 1, "10.0": 1, "+Inf": 2}, 12.0))
    got = loop_lag.figures(past)
    assert math.isinf(got["max_ms"]) and loop_lag.shown(got["max_ms"]) == "past the last bucket"
    assert got["later_than_target"] is None  # no 20 ms bucket in that reading
    assert loop_lag.figures(loop_lag.read("gg_claims_parked 0.0\n"))["p99_ms"] is None
    assert loop_lag.shown(None) == "–" and loop_lag.shown(20.0) == "≤ 20"


def test_replicas_readings_add_up_bucket_by_bucket():
    a = loop_lag.read(_metrics({"0.001": 3, "+Inf": 4}, 1.0))
    b = loop_lag.read(_metrics({"0.001": 1, "+Inf": 1}, 0.5))
    both = loop_lag.add(a, b)
    assert both["buckets"] == {0.001: 4.0, math.inf: 5.0} and both["count"] == 5.0
    assert both["sum"] == 1.5


def test_one_series_of_a_labelled_histogram_is_read_alone():
    text = "\n".join([
        *(f'gg_gc_pause_seconds_bucket{{generation="{g}",le="{le}"}} {n}.0'
          for g, counts in (("0", (5, 5)), ("2", (1, 3)))
          for le, n in zip(("0.1", "+Inf"), counts, strict=True)),
        'gg_gc_pause_seconds_count{generation="0"} 5.0',
        'gg_gc_pause_seconds_sum{generation="0"} 0.01',
        'gg_gc_pause_seconds_count{generation="2"} 3.0',
        'gg_gc_pause_seconds_sum{generation="2"} 0.9']) + "\n"
    got = loop_lag.read(text, "gg_gc_pause_seconds", 'generation="2"')
    assert got == {"buckets": {0.1: 1.0, math.inf: 3.0}, "sum": 0.9, "count": 3.0}
