"""A scaled pool: desired from demand, step, cool-down, idle-after shrink, bounds, and the
plan that carries the decision out."""

from __future__ import annotations

import pytest

from gg.domain.pool_planner import WARMING, Member, PoolSpec, Remove, Reset, Start, plan_pool
from gg.domain.pool_scaling import Decision, Demand, Scale, Scaled, decide

D = "sha256:" + "a" * 64
NOW = 1_700_000_000.0


def scale(**kw) -> Scale:
    base: dict = {"min": 0, "max": 6, "idle_after": 60.0}
    base.update(kw)
    return Scale(**base)


def pool(sc: Scale | None = None, **kw) -> PoolSpec:
    base: dict = {"name": "ui-pool", "environment": "ui", "size": 8, "warm": 2,
                  "pool_max": 8, "digest": D, "scale": sc or scale()}
    base.update(kw)
    return PoolSpec(**base)


def ready(member_id: str, idle_for: float) -> Member:
    return Member(member_id, "ready", digest=D, idle_since=NOW - idle_for)


def busy(member_id: str) -> Member:
    return Member(member_id, "busy", digest=D, leased=True)


# --------------------------------------------------------------------------- the rule


def test_waiting_flights_grow_desired_counting_members_already_starting():
    got = decide("ui-pool", scale(), 8, Scaled(2, NOW - 100),
                 Demand(waiting=9, starting=2, live=2), NOW)
    assert got == Decision(2, 6, "scaled ui-pool from 2 to 6: 9 flights waiting, 2 starting")


def test_members_already_starting_cover_the_demand_so_desired_stays():
    got = decide("ui-pool", scale(), 8, Scaled(4, NOW), Demand(waiting=3, starting=4, live=4),
                 NOW)
    assert (got.desired, got.changed) == (4, False)


def test_desired_but_not_started_members_count_as_starting():
    got = decide("ui-pool", scale(), 8, Scaled(5, NOW), Demand(waiting=5, starting=0, live=0),
                 NOW)
    assert (got.desired, got.changed) == (5, False)


def test_step_grows_at_most_step_members_per_decision():
    got = decide("ui-pool", scale(step=2), 8, Scaled(0, None), Demand(waiting=60, starting=0,
                                                                      live=0), NOW)
    assert got.desired == 2
    assert got.reason == "scaled ui-pool from 0 to 2: 60 flights waiting, 0 starting"


def test_cool_down_holds_a_grow_back_until_it_has_passed():
    sc = scale(cool_down=30.0)
    demand = Demand(waiting=5, starting=0, live=1)
    held = decide("ui-pool", sc, 8, Scaled(1, NOW - 10), demand, NOW)
    assert (held.desired, held.changed, held.cooling_until) == (1, False, NOW + 20)
    went = decide("ui-pool", sc, 8, Scaled(1, NOW - 30), demand, NOW)
    assert went.desired == 6


def test_idle_members_go_only_after_idle_after_and_never_below_min():
    sc = scale(min=1, idle_after=60.0)
    young = Demand(waiting=0, starting=0, live=3,
                   idle_since=(("m1", NOW - 59), ("m2", NOW - 10), ("m3", NOW - 5)))
    assert decide("ui-pool", sc, 8, Scaled(3, NOW - 600), young, NOW).changed is False
    old = Demand(waiting=0, starting=0, live=3,
                 idle_since=(("m1", NOW - 200), ("m2", NOW - 300), ("m3", NOW - 100)))
    got = decide("ui-pool", sc, 8, Scaled(3, NOW - 600), old, NOW)
    assert got.desired == 1
    assert got.going == ("m2", "m1")  # longest idle first, min 1 keeps one
    assert got.reason == ("scaled ui-pool from 3 to 1: 2 members idle for 60 s or more, "
                          "no flight waiting")


def test_shrink_takes_step_members_at_a_time_down_to_zero():
    idle = tuple((f"m{i}", NOW - 120) for i in range(4))
    got = decide("ui-pool", scale(step=3), 8, Scaled(4, None),
                 Demand(waiting=0, starting=0, live=4, idle_since=idle), NOW)
    assert (got.previous, got.desired, len(got.going)) == (4, 1, 3)
    rest = decide("ui-pool", scale(step=3), 8, Scaled(1, NOW),
                  Demand(waiting=0, starting=0, live=1, idle_since=idle[3:]), NOW)
    assert rest.desired == 0


def test_cool_down_also_holds_a_shrink_back():
    idle = (("m1", NOW - 600),)
    got = decide("ui-pool", scale(cool_down=120.0), 8, Scaled(1, NOW - 60),
                 Demand(waiting=0, starting=0, live=1, idle_since=idle), NOW)
    assert (got.desired, got.changed) == (1, False)


def test_bounds_cap_desired_and_a_lowered_max_is_followed_at_once():
    capped = decide("ui-pool", scale(max=10), 4, Scaled(0, NOW),
                    Demand(waiting=60, starting=0, live=0), NOW)
    assert capped.desired == 4
    lowered = decide("ui-pool", scale(max=3, cool_down=600.0), 8, Scaled(6, NOW),
                     Demand(waiting=0, starting=0, live=6), NOW)
    assert lowered == Decision(6, 3, "scaled ui-pool from 6 to 3: max 3")
    raised_min = decide("ui-pool", scale(min=2), 8, Scaled(0, NOW),
                        Demand(waiting=0, starting=0, live=0), NOW)
    assert raised_min == Decision(0, 2, "scaled ui-pool from 0 to 2: min 2")


def test_first_decision_starts_from_the_members_the_pool_holds():
    got = decide("ui-pool", scale(min=1), 8, None, Demand(waiting=0, starting=0, live=3), NOW)
    assert (got.previous, got.desired, got.changed) == (3, 3, False)


@pytest.mark.parametrize("kw", [{"min": 3, "max": 2}, {"min": -1}, {"max": 0},
                                {"step": 0}, {"idle_after": -1.0}, {"cool_down": -5.0}])
def test_a_scale_that_cannot_be_is_refused_with_a_sentence(kw):
    with pytest.raises(ValueError, match="scale: "):
        scale(**kw)


# --------------------------------------------------------------------------- the plan


def test_a_burst_on_an_empty_pool_starts_up_to_max_and_says_it_is_warming():
    plan = plan_pool(pool(), [], 60, NOW, scaled=Scaled(0, None))
    assert plan.actions == (Start(6, D),)
    assert plan.desired == 6
    assert plan.scaling is not None
    assert plan.scaling.reason == "scaled ui-pool from 0 to 6: 60 flights waiting, 0 starting"
    assert plan.waiting_code == WARMING


def test_warm_is_not_used_by_a_scaled_pool():
    plan = plan_pool(pool(scale(min=0), warm=3), [], 0, NOW, scaled=Scaled(0, None))
    assert plan.actions == ()
    assert plan.desired == 0


def test_a_full_scaled_pool_says_its_scale_max_holds_flights_back():
    members = [busy(f"m{i}") for i in range(6)]
    plan = plan_pool(pool(), members, 10, NOW, scaled=Scaled(6, NOW - 5))
    assert plan.actions == ()
    assert plan.limit == "scale max 6 reached"
    assert plan.waiting_reason == ("waiting: pool ui-pool's limits allow no more machines now "
                                   "(scale max 6 reached)")
    assert plan.busy == 6


def test_shrink_removes_only_long_idle_members_never_a_flying_one():
    members = [busy("m0"), busy("m1"), ready("m2", 600), ready("m3", 10),
               Member("m4", "dirty", digest=D, flight_ended=True)]
    plan = plan_pool(pool(), members, 0, NOW, scaled=Scaled(5, NOW - 900))
    assert plan.scaling is not None
    assert plan.scaling.reason == ("scaled ui-pool from 5 to 4: 1 member idle for 60 s or "
                                   "more, no flight waiting")
    assert plan.actions == (Remove("m2", "idle beyond desired"), Reset("m4", D))
    assert plan.live_after == 4


def test_an_idle_pool_shrinks_to_zero_after_idle_after():
    members = [ready(f"m{i}", 61) for i in range(6)]
    plan = plan_pool(pool(), members, 0, NOW, scaled=Scaled(6, NOW - 900))
    assert plan.desired == 0
    assert [a.member_id for a in plan.actions if isinstance(a, Remove)] == \
        [f"m{i}" for i in range(6)]
    assert plan.live_after == 0


def test_a_member_gone_mid_flight_is_replaced_without_a_scaling_decision():
    members = [Member("m0", "stopped", digest=D), busy("m1"), busy("m2")]
    plan = plan_pool(pool(), members, 1, NOW, scaled=Scaled(3, NOW - 900))
    assert plan.actions == (Remove("m0", "stopped"), Start(1, D))
    assert plan.scaling is not None and plan.scaling.changed is False


def test_outside_active_hours_a_scaled_pool_decides_nothing_and_starts_nothing():
    from gg.domain.pool_planner import parse_active_hours

    closed = parse_active_hours("00:00-00:01 UTC")
    plan = plan_pool(pool(active_hours=closed), [], 9, NOW + 3600, scaled=Scaled(2, None))
    assert plan.started == 0
    assert plan.scaling is not None and plan.scaling.changed is False


def test_a_flight_held_back_by_the_cool_down_says_so():
    members = [busy("m0")]
    plan = plan_pool(pool(scale(cool_down=30.0)), members, 3, NOW, scaled=Scaled(1, NOW - 10))
    assert plan.actions == ()
    assert plan.waiting_reason == ("waiting: pool ui-pool's limits allow no more machines now "
                                   "(cool-down 30 s after the last scaling)")
