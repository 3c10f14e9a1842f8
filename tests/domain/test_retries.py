"""The retry rules (gg.domain.retries): whether an attempt is retried, the settings a flight
gets, the delay's sentence, and --retry-elsewhere's rule, without a server."""

from __future__ import annotations

import pytest

from gg.domain.flights import Flight
from gg.domain.matching import assign, elsewhere, seat
from gg.domain.retries import (
    Decision,
    Pending,
    Retry,
    clock,
    decide,
    due,
    kind_of,
    settle,
    waiting,
)
from gg.domain.runners import Runner
from gg.domain.waiting import RETRY_DELAY, Context, why_waiting

NOW = 1_000_000.0
THREE = Retry(retries=3, on=("failed",), delay=None, elsewhere=False)


def _decide(retry, retried=0, *, exit_code=1, reason="exit 1", outcome="failed", now=NOW):
    return decide(retry, retried, outcome=outcome, exit_code=exit_code, reason=reason,
                  runner_id="r_1", now=now)


def test_a_failure_with_retries_left_is_retried_and_says_which_retry_of_how_many_and_why():
    d = _decide(THREE, 1)
    assert d == Decision(2, 3, "after exit 1")
    assert d.text == "retry 2 of 3 after exit 1"


def test_no_retry_once_the_retries_are_used_up_or_for_a_landing_or_without_retries():
    assert _decide(THREE, 3) is None
    assert _decide(THREE, 0, outcome="landed", exit_code=0, reason=None) is None
    assert _decide(THREE, 0, outcome="returned") is None
    assert _decide(None) is None
    assert _decide(Retry(retries=0)) is None


def test_retry_on_timed_out_retries_a_timeout_but_not_a_failure_and_the_default_the_reverse():
    on_timeouts = Retry(retries=2, on=("timed-out",))
    timed_out = dict(exit_code=None, reason="timed out after 2s")
    assert _decide(on_timeouts, **timed_out).text == "retry 1 of 2 after timing out"
    assert _decide(on_timeouts) is None
    assert _decide(THREE, **timed_out) is None
    both = Retry(retries=2, on=("failed", "timed-out"))
    assert _decide(both, **timed_out) is not None and _decide(both) is not None
    assert kind_of("timed out after 1m") == "timed-out" and kind_of("exit 3") == "failed"


def test_a_failure_without_an_exit_code_says_its_reason():
    assert _decide(THREE, exit_code=None, reason="no such agent").cause == \
        "after failing (no such agent)"


def test_a_delay_makes_the_retry_due_at_its_end_and_elsewhere_names_the_runner_to_avoid():
    d = _decide(Retry(retries=1, delay=20.0, elsewhere=True))
    assert (d.offer_at, d.avoid) == (NOW + 20.0, "r_1")
    assert not due(d.offer_at, NOW + 19.9) and due(d.offer_at, NOW + 20.0)
    assert due(None, NOW)


def test_a_flight_gets_what_it_asked_else_its_environments_default_else_none():
    default = Retry(retries=2, on=("timed-out",), delay=30.0)
    assert settle(None, default) == Retry(retries=2, on=("timed-out",), delay=30.0,
                                          elsewhere=False)
    assert settle(Retry(retries=5), default) == Retry(retries=5, on=("timed-out",),
                                                      delay=30.0, elsewhere=False)
    assert settle(Retry(retries=0), default) is None  # --retries 0 turns a default off
    assert settle(Retry(retries=1), None) == Retry(retries=1, on=("failed",), delay=None,
                                                   elsewhere=False)
    assert settle(None, None) is None


@pytest.mark.parametrize("value,said", [
    (Retry(retries=11), "--retries is a whole number from 0 to 10 (got 11)"),
    (Retry(retries=-1), "--retries is a whole number from 0 to 10 (got -1)"),
    (Retry(retries=True), "--retries is a whole number from 0 to 10 (got True)"),
    (Retry(on=()), "--retry-on names at least one of failed, timed-out"),
    (Retry(on=("sometimes",)), "--retry-on takes failed and timed-out (comma separated), "
                               "not 'sometimes'"),
    (Retry(delay=0), "--retry-delay must be longer than 0s (got 0)"),
    (Retry(delay=86401.0), "--retry-delay is at most one day (got 86401s)"),
])
def test_a_bad_setting_is_one_sentence(value, said):
    assert value.problem() == said


def test_the_delay_sentence_names_the_time_how_long_until_then_and_why():
    pending = Pending(2, 3, "after exit 1", NOW + 20.0)
    sentence, remedy = waiting(pending, NOW, "f_1")
    assert sentence == (f"waiting: retry 2 of 3 is offered at {clock(NOW + 20.0)} (in 20s), "
                        "after exit 1")
    assert clock(0.0) == "00:00:00 UTC"
    assert remedy == "wait: it is offered then (or cancel it: gg cancel f_1)"
    assert waiting(pending, NOW + 20.0) is None  # due: no longer a reason to wait
    assert waiting(None, NOW) is None


def _seat(name: str, **kw):
    runner = Runner(id=f"r_{name}", name=name, labels={}, last_seen_at=NOW, workers=1, **kw)
    return seat(runner, NOW, 60.0, 0)


def _flight(**kw) -> Flight:
    return Flight(id="f_1", command=["true"], opened_by="p_1", opened_at=0.0, epoch=1, **kw)


def test_the_delay_is_the_waiting_sentence_before_any_runner_rung():
    f = _flight()
    ctx = Context(retry=waiting(Pending(1, 1, "after exit 1", NOW + 5), NOW, f.id))
    w = why_waiting(f, [_seat("a")], ctx)
    assert w.code == RETRY_DELAY and w.sentence.startswith("waiting: retry 1 of 1 is offered")


def test_retry_elsewhere_keeps_the_failed_runner_only_while_another_could_take_it():
    f = _flight()
    a, b = _seat("a"), _seat("b")
    assert elsewhere(f, "r_a", [a, b])
    assert [x.seat.runner.id for x in assign([f], [a, b], avoid={"f_1": "r_a"})] == ["r_b"]
    assert assign([f], [a], avoid={"f_1": "r_a"}) == []  # b parks elsewhere: it waits for b
    busy_b = seat(b.runner, NOW, 60.0, 1)  # b busy: still b's
    assert elsewhere(f, "r_a", [a, busy_b])
    offline_b = seat(Runner(id="r_b", name="b", labels={}, last_seen_at=0.0, workers=1), NOW,
                     60.0, 0)
    assert not elsewhere(f, "r_a", [a, offline_b])  # nobody else could: a may take it again
    assert not elsewhere(f, None, [a, b])
    # the waiting sentence reads the same rule: the free runner it names is not the avoided one
    w = why_waiting(f, [a, busy_b], Context(elsewhere_from="r_a"))
    assert "runner a can take it" not in w.sentence, w.sentence
