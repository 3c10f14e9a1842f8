"""The allowance's pure rule: a burst at once, then one token every period, never more than
the burst saved up."""

from __future__ import annotations

from gg.domain import allowance

BURST, EVERY = 2, 10.0


def test_a_burst_is_spent_at_once_then_one_token_comes_back_every_period():
    bucket = allowance.full(BURST, now=0.0)
    ok1, bucket = allowance.take(bucket, 0.0, burst=BURST, every=EVERY)
    ok2, bucket = allowance.take(bucket, 0.0, burst=BURST, every=EVERY)
    ok3, bucket = allowance.take(bucket, 1.0, burst=BURST, every=EVERY)
    assert (ok1, ok2, ok3) == (True, True, False)
    assert allowance.next_token_in(bucket, 1.0, burst=BURST, every=EVERY) == 9.0
    ok4, bucket = allowance.take(bucket, 10.0, burst=BURST, every=EVERY)
    ok5, bucket = allowance.take(bucket, 10.0, burst=BURST, every=EVERY)
    assert (ok4, ok5) == (True, False)


def test_an_idle_allowance_saves_up_no_more_than_its_burst():
    bucket = allowance.full(BURST, now=0.0)
    bucket = allowance.refilled(bucket, 1000.0, burst=BURST, every=EVERY)
    assert bucket.tokens == BURST
    taken = []
    for _ in range(3):
        ok, bucket = allowance.take(bucket, 1000.0, burst=BURST, every=EVERY)
        taken.append(ok)
    assert taken == [True, True, False]
