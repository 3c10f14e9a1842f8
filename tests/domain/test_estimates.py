"""The estimator plays the queue forward by the claim's rules, and says nothing it cannot know."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from gg.domain.durations import Summary
from gg.domain.estimates import (
    GATED,
    NOBODY,
    UNMEASURED,
    UNWARMED,
    History,
    PoolOutlook,
    Queue,
    expected_start,
    forecast,
    moved,
    next_opening,
    sentence,
)
from gg.domain.flights import Flight
from gg.domain.matching import Seat
from gg.domain.pool_planner import parse_active_hours
from gg.domain.pools import MEMBER_KIND
from gg.domain.runners import Runner

NOW = 1_800_000_000.0


def flight(fid: str, title: str, at: float = 0.0, **kw) -> Flight:
    return Flight(id=fid, command=[title], title=title, opened_by="p_1",
                  opened_at=NOW - 1000 + at, **kw)


def seat(rid: str, labels: dict | None = None, live: int = 0, workers: int = 1,
         **kw) -> Seat:
    runner = Runner(id=rid, name=rid, labels=dict(labels or {}), workers=workers, **kw)
    return Seat(runner, dict(runner.labels), live, online=True)


def summary(*seconds: float) -> Summary:
    s = Summary()
    for x in seconds:
        s = s.add(x, 200)
    return s


def history(**by_title: Summary) -> History:
    return History({(t, "", "shell"): s for t, s in by_title.items()})


def close(value: float, expected: float, within: float = 0.12) -> bool:
    return abs(value - expected) <= within * max(expected, 1.0)


def test_one_runner_two_kinds_each_waits_for_the_ones_ahead_to_fly():
    running = flight("f_run", "build", stage="flying", lease_runner="r_1",
                     lease_granted_at=NOW - 20)
    queue = Queue(ready=[flight("f_1", "test", 1), flight("f_2", "build", 2),
                         flight("f_3", "test", 3)], flying=[running])
    seen = history(build=summary(*[60.0] * 10), test=summary(*[10.0] * 10))
    out = forecast(queue, [seat("r_1", live=1)], seen, [], NOW)
    first, second, third = (out.estimates[f] for f in ("f_1", "f_2", "f_3"))
    assert close(first.at - NOW, 40) and close(second.at - NOW, 50) and close(third.at - NOW, 110)
    assert (third.ahead, third.runners) == (2, 1)
    assert sentence(third, NOW) == "expected to start in ~2 min (2 flights ahead on 1 runner)"
    assert all(e.low <= e.at <= e.high for e in (first, second, third))


def test_a_free_runner_takes_the_first_flight_now_even_without_history():
    queue = Queue(ready=[flight("f_1", "new"), flight("f_2", "new", 1)])
    out = forecast(queue, [seat("r_1")], History(), [], NOW)
    assert out.estimates["f_1"].at == NOW
    assert sentence(out.estimates["f_1"], NOW).startswith("expected to start in a few seconds")
    assert out.estimates["f_2"].at is None and out.estimates["f_2"].basis == UNMEASURED


def test_higher_priority_goes_first_and_two_runners_share_the_queue():
    queue = Queue(ready=[flight("f_old", "t", 1), flight("f_urgent", "t", 5, priority="high"),
                         flight("f_next", "t", 2)])
    seen = history(t=summary(*[30.0] * 5))
    out = forecast(queue, [seat("r_1"), seat("r_2")], seen, [], NOW)
    assert out.estimates["f_urgent"].at == NOW and out.estimates["f_old"].at == NOW
    assert close(out.estimates["f_next"].at - NOW, 30)
    assert out.estimates["f_next"].runners == 2


def test_a_flight_nobody_can_take_gets_no_time_only_the_reason():
    seen = history(t=summary(10.0))
    gpu = flight("f_gpu", "t", requires={"gpu": "yes"})
    cordoned = seat("r_c", {"gpu": "yes"}, admin_state="cordoned")
    est = expected_start(gpu, Queue(ready=[gpu]), [seat("r_1"), cordoned], seen, [], NOW)
    assert (est.at, est.low, est.high, est.basis) == (None, None, None, NOBODY)
    assert sentence(est, NOW) is None
    gated = flight("f_g", "t", stage="gated", gates=["g_1"])
    assert expected_start(gated, Queue(ready=[]), [seat("r_1")], seen, [], NOW).basis == GATED
    assert expected_start(flight("f_done", "t", stage="landed"), Queue(ready=[]),
                          [seat("r_1")], seen, [], NOW) is None


def test_a_drained_runner_is_not_counted_and_an_unmeasured_kind_borrows_its_neighbours():
    other = flight("f_o", "other", stage="flying", lease_runner="r_busy", lease_granted_at=NOW)
    queue = Queue(ready=[flight("f_1", "t")], flying=[other])
    seats = [seat("r_d", admin_state="drained"), seat("r_busy", live=1)]
    out = forecast(queue, seats, history(t=summary(*[30.0] * 3)), [], NOW)
    # "other" never finished here: the flights of its environment and agent stand in
    assert close(out.estimates["f_1"].at - NOW, 30) and out.estimates["f_1"].runners == 1
    elsewhere = History({("t", "prod", "shell"): summary(30.0)})
    assert forecast(queue, seats, elsewhere, [], NOW).estimates["f_1"].basis == UNMEASURED


def test_a_pool_warming_a_member_starts_the_flight_after_its_measured_warm_up():
    seen = history(t=summary(*[20.0] * 5))
    seen = History({("t", "ci", "shell"): summary(*[20.0] * 5)},
                   warmups={"ci-pool": summary(*[30.0] * 5)})
    pool = PoolOutlook("ci-pool", "ci", warming_since=(NOW - 10,))
    a = flight("f_1", "t", environment="ci", requires={"environment": "ci"})
    b = flight("f_2", "t", 1, environment="ci", requires={"environment": "ci"})
    out = forecast(Queue(ready=[a, b]), [], seen, [pool], NOW)
    assert close(out.estimates["f_1"].at - NOW, 20)
    # the same member takes the next one after its flight and a fresh warm-up
    assert close(out.estimates["f_2"].at - NOW, 20 + 20 + 30)
    unwarmed = forecast(Queue(ready=[a]), [], History(seen.durations), [pool], NOW)
    assert unwarmed.estimates["f_1"].basis == UNWARMED.format(pool="ci-pool")


def test_a_pool_outside_its_active_hours_starts_nothing_before_they_open():
    hours = parse_active_hours("08:00-20:00 UTC")
    evening = datetime(2027, 3, 3, 21, 0, tzinfo=timezone.utc).timestamp()
    morning = datetime(2027, 3, 4, 8, 0, tzinfo=timezone.utc).timestamp()
    assert next_opening(hours, evening) == morning
    assert next_opening(hours, morning + 60) == morning + 60
    seen = History({("t", "ci", "shell"): summary(20.0)}, warmups={"p": summary(*[30.0] * 3)})
    pool = PoolOutlook("p", "ci", later=1, active_hours=hours)
    a = Flight(id="f_1", command=["t"], title="t", opened_by="p_1", opened_at=evening - 5,
               environment="ci", requires={"environment": "ci"})
    est = expected_start(a, Queue(ready=[a]), [], seen, [pool], evening)
    assert close(est.at - morning, 30)


@pytest.mark.parametrize("elapsed", [0.0, 5.0, 50.0])
def test_a_running_flights_remaining_time_is_what_similar_flights_ran_beyond_its_age(elapsed):
    s = summary(*[10.0] * 5, *[60.0] * 5)
    mean, _ = s.remaining(elapsed)
    expected = {0.0: 35.0, 5.0: 30.0, 50.0: 10.0}[elapsed]
    assert close(mean, expected, 0.15)


def test_a_summary_stays_small_and_forgets_slowly():
    s = Summary()
    for i in range(5000):
        s = s.add(1.0 + (i % 1000), 200)
    assert len(s.weights) <= 200 and s.count < 201
    assert Summary.from_json(s.to_json()).weights.keys() == s.weights.keys()


def test_a_member_seat_warms_again_after_its_flight():
    seen = History({("t", "ci", "shell"): summary(*[20.0] * 5)},
                   warmups={"p": summary(*[30.0] * 5)})
    member = seat("r_m", {"environment": "ci"}, kind=MEMBER_KIND)
    pool = PoolOutlook("p", "ci", members=frozenset({"r_m"}))
    a = flight("f_1", "t", environment="ci", requires={"environment": "ci"})
    b = flight("f_2", "t", 1, environment="ci", requires={"environment": "ci"})
    out = forecast(Queue(ready=[a, b]), [member], seen, [pool], NOW)
    assert out.estimates["f_1"].at == NOW
    assert close(out.estimates["f_2"].at - NOW, 50)


def test_an_estimate_shown_again_is_new_only_when_it_moved_by_a_second_or_a_twentieth_of_the_wait():
    now = 1000.0
    assert moved(None, (now + 30, now + 20, now + 40), now)  # never shown: new
    near = (now + 10, now + 8, now + 12)  # ten seconds ahead: a second of slack
    assert not moved(near, (now + 10.9, now + 8, now + 12), now)
    assert moved(near, (now + 11.2, now + 8, now + 12), now)
    shown = (now + 30, now + 20, now + 40)  # half a minute ahead: ~1.5 s of slack
    assert not moved(shown, (now + 31.4, now + 20, now + 40), now)
    assert moved(shown, (now + 33, now + 20, now + 40), now)
    assert moved(shown, (now + 30, now + 17.5, now + 40), now)  # the range moved
    far = (now + 600, now + 500, now + 700)  # ten minutes ahead: 30 s of slack
    assert not moved(far, (now + 620, now + 520, now + 720), now)
    assert moved(far, (now + 640, now + 500, now + 700), now)
