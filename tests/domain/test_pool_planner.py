"""The pool planner: active hours on the wall clock, the plan's rules, and its invariants."""

from __future__ import annotations

import itertools
import random
import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from gg.domain.pool_planner import (
    LIMITED,
    WARMING,
    ActiveHours,
    Member,
    PoolSpec,
    Remove,
    Replace,
    Reset,
    Roll,
    Start,
    parse_active_hours,
    plan_pool,
)

D = "sha256:" + "a" * 64
OLD = "sha256:" + "b" * 64
BERLIN = ZoneInfo("Europe/Berlin")
NOW = datetime(2024, 6, 3, 12, 0, tzinfo=UTC).timestamp()
INSIDE = parse_active_hours("08:00-20:00 UTC")  # contains NOW
OUTSIDE = parse_active_hours("20:00-08:00 UTC")  # does not contain NOW

WARMING_RE = re.compile(r"^waiting: pool (\S+) is warming a machine for it$")
LIMITED_RE = re.compile(r"^waiting: pool (\S+)'s limits allow no more machines now \((.+)\)$")


def berlin(y, mo, d, h, mi, fold=0) -> float:
    return datetime(y, mo, d, h, mi, tzinfo=BERLIN, fold=fold).timestamp()


def pool(**kw) -> PoolSpec:
    base: dict = {"name": "ui-pool", "environment": "ui", "size": 6, "warm": 2,
                  "pool_max": 4, "active_hours": None, "digest": D}
    base.update(kw)
    return PoolSpec(**base)


def m(member_id: str, state: str, **kw) -> Member:
    kw.setdefault("digest", D)
    return Member(member_id, state, **kw)


# --------------------------------------------------------------------------- active hours


def test_parse_active_hours_reads_window_and_zone():
    hours = parse_active_hours("08:00-20:00 Europe/Berlin")
    assert hours == ActiveHours(480, 1200, "Europe/Berlin")
    assert str(hours) == "08:00-20:00 Europe/Berlin"
    assert parse_active_hours(" 8:05 - 17:30  UTC ") == ActiveHours(485, 1050, "UTC")
    assert parse_active_hours("22:00-06:00 UTC") == ActiveHours(1320, 360, "UTC")
    always = parse_active_hours("00:00-24:00 UTC")
    assert str(always) == "00:00-24:00 UTC"
    assert all(always.contains(NOW + 60 * i) for i in range(1440))


@pytest.mark.parametrize(
    "text, words",
    [
        ("", "is not a window"),
        ("always", "is not a window"),
        ("8-20 Europe/Berlin", "is not a window"),
        ("08:00-20:00", "names no time zone"),
        ("25:00-26:00 UTC", "not a time of day"),
        ("08:60-09:00 UTC", "not a time of day"),
        ("24:00-08:00 UTC", "not a time of day"),
        ("08:00-24:30 UTC", "not a time of day"),
        ("08:00-08:00 UTC", "start and end at the same time"),
        ("00:00-24:00x UTC", "is not a window"),
        ("08:00-20:00 Mars/Olympus", "is not a time zone"),
        ("08:00-20:00 ../../etc/passwd", "is not a time zone"),
        ("08:00-20:00 /etc/localtime", "is not a time zone"),
        ("08:00-20:00 Europe", "is not a time zone"),
    ],
)
def test_parse_active_hours_refuses_with_one_plain_sentence(text, words):
    with pytest.raises(ValueError) as caught:
        parse_active_hours(text)
    message = str(caught.value)
    assert words in message
    assert "\n" not in message and "Traceback" not in message


def test_active_hours_are_validated_when_built_directly():
    with pytest.raises(ValueError, match="is not a time zone"):
        ActiveHours(480, 1200, "Nowhere/Town")
    with pytest.raises(ValueError, match="outside a day"):
        ActiveHours(1440, 60, "UTC")


def _days(start: datetime, count: int):
    return [start + timedelta(days=i) for i in range(count)]


SPRING_WEEK = _days(datetime(2024, 3, 27), 7)  # Berlin springs forward on Sunday 31 March
AUTUMN_WEEK = _days(datetime(2024, 10, 23), 7)  # and falls back on Sunday 27 October


@pytest.mark.parametrize("day", SPRING_WEEK + AUTUMN_WEEK, ids=lambda d: d.date().isoformat())
def test_day_window_edges_hold_on_the_wall_clock_through_dst_weeks(day):
    hours = parse_active_hours("08:00-20:00 Europe/Berlin")
    y, mo, d = day.year, day.month, day.day
    assert not hours.contains(berlin(y, mo, d, 7, 59))  # a minute before the start
    assert hours.contains(berlin(y, mo, d, 8, 0))  # at the start
    assert hours.contains(berlin(y, mo, d, 8, 0) + 59.9)
    assert hours.contains(berlin(y, mo, d, 19, 59))  # a minute before the end
    assert hours.contains(berlin(y, mo, d, 19, 59) + 59.9)
    assert not hours.contains(berlin(y, mo, d, 20, 0))  # at the end


@pytest.mark.parametrize("day", SPRING_WEEK + AUTUMN_WEEK, ids=lambda d: d.date().isoformat())
def test_midnight_window_edges_hold_through_dst_weeks(day):
    hours = parse_active_hours("22:00-06:00 Europe/Berlin")
    y, mo, d = day.year, day.month, day.day
    table = [((21, 59), False), ((22, 0), True), ((23, 59), True), ((0, 0), True),
             ((1, 30), True), ((5, 59), True), ((6, 0), False), ((12, 0), False)]
    for (h, mi), inside in table:
        assert hours.contains(berlin(y, mo, d, h, mi)) is inside, (h, mi)


@pytest.mark.parametrize("day", SPRING_WEEK + AUTUMN_WEEK, ids=lambda d: d.date().isoformat())
def test_every_day_of_a_dst_week_opens_twelve_wall_clock_hours(day):
    hours = parse_active_hours("08:00-20:00 Europe/Berlin")
    midnight = datetime(day.year, day.month, day.day, tzinfo=BERLIN).timestamp()
    inside = sum(hours.contains(midnight + 60 * i) for i in range(25 * 60))
    assert inside == 12 * 60


def test_window_follows_the_zone_not_utc_across_the_spring_change():
    hours = parse_active_hours("08:00-20:00 Europe/Berlin")
    assert not hours.contains(datetime(2024, 3, 30, 6, 30, tzinfo=UTC).timestamp())
    assert hours.contains(datetime(2024, 4, 1, 6, 30, tzinfo=UTC).timestamp())
    # 06:30 UTC reads 07:30 on Saturday (CET) and 08:30 on Monday (CEST).


def test_window_in_the_skipped_spring_hour_opens_when_the_clock_jumps():
    hours = parse_active_hours("02:30-03:30 Europe/Berlin")
    before = berlin(2024, 3, 31, 1, 59)
    assert not hours.contains(before)
    assert hours.contains(before + 60)  # the clock reads 03:00 CEST
    assert hours.contains(berlin(2024, 3, 31, 3, 29))
    assert not hours.contains(berlin(2024, 3, 31, 3, 30))
    whole = parse_active_hours("02:00-04:00 Europe/Berlin")
    midnight = berlin(2024, 3, 31, 0, 0)
    assert sum(whole.contains(midnight + 60 * i) for i in range(6 * 60)) == 60


def test_window_in_the_repeated_autumn_hour_is_open_both_times():
    hours = parse_active_hours("02:00-02:30 Europe/Berlin")
    assert hours.contains(berlin(2024, 10, 27, 2, 15, fold=0))
    assert hours.contains(berlin(2024, 10, 27, 2, 15, fold=1))
    assert not hours.contains(berlin(2024, 10, 27, 2, 45, fold=0))
    assert not hours.contains(berlin(2024, 10, 27, 2, 45, fold=1))
    midnight = berlin(2024, 10, 27, 0, 0)
    assert sum(hours.contains(midnight + 60 * i) for i in range(6 * 60)) == 60


# --------------------------------------------------------------------------- the rules, by case


def test_empty_pool_starts_its_warm_members():
    plan = plan_pool(pool(), [], 0, NOW)
    assert plan.actions == (Start(2, D),)
    assert plan.live_after == 2 and plan.warming == 2
    assert plan.waiting_reason is None and plan.waiting is None


def test_waiting_flights_start_a_machine_each_plus_warm_up_to_pool_max():
    plan = plan_pool(pool(warm=1), [], 2, NOW)
    assert plan.actions == (Start(3, D),)
    assert plan.waiting == (WARMING, "waiting: pool ui-pool is warming a machine for it")
    plan = plan_pool(pool(warm=1), [m("a", "ready")], 1, NOW)
    assert plan.actions == (Start(1, D),)
    plan = plan_pool(pool(), [], 3, NOW)
    assert plan.actions == (Start(4, D),)
    assert plan.limit == "pool-max 4 reached"
    assert plan.waiting_code == WARMING


def test_full_pool_says_which_limit_holds_the_flight_back():
    busy = [m(f"m{i}", "busy", leased=True) for i in range(4)]
    plan = plan_pool(pool(), busy, 1, NOW)
    assert plan.actions == ()
    assert plan.waiting_reason == (
        "waiting: pool ui-pool's limits allow no more machines now (pool-max 4 reached)")
    plan = plan_pool(pool(size=3), busy[:3], 1, NOW)
    assert plan.waiting_reason == (
        "waiting: pool ui-pool's limits allow no more machines now (size 3 reached)")


def test_no_pinned_digest_starts_nothing_and_says_so():
    plan = plan_pool(pool(digest=None), [], 1, NOW)
    assert plan.actions == ()
    assert plan.waiting_reason == (
        "waiting: pool ui-pool's limits allow no more machines now (no image digest pinned yet)")


def test_outside_active_hours_removes_idle_members_keeps_busy_and_starts_nothing():
    hours = parse_active_hours("08:00-20:00 Europe/Berlin")
    late = berlin(2024, 6, 3, 20, 0)
    members = [m("a", "ready"), m("b", "dirty"), m("c", "busy", leased=True),
               m("d", "starting"), m("e", "stopped"), m("f", "ready", digest=OLD)]
    plan = plan_pool(pool(active_hours=hours), members, 2, late)
    why = "outside active hours 08:00-20:00 Europe/Berlin"
    assert plan.actions == (Remove("a", why), Remove("b", why), Remove("e", "stopped"),
                            Remove("f", why))
    assert not plan.in_hours
    assert plan.waiting_reason == (
        "waiting: pool ui-pool's limits allow no more machines now "
        "(outside active hours 08:00-20:00 Europe/Berlin)")
    assert plan_pool(pool(active_hours=hours), [], 2, late - 60).actions == (Start(4, D),)


def test_dirty_members_are_reset_and_busy_members_left_alone():
    members = [m("a", "dirty"), m("b", "busy", leased=True), m("c", "busy"),
               m("d", "ready", flight_ended=True), m("e", "busy", leased=True, flight_ended=True)]
    plan = plan_pool(pool(warm=0, pool_max=6), members, 0, NOW)
    assert plan.actions == (Reset("a", D), Reset("c", D), Reset("d", D))


def test_new_digest_rolls_idle_members_only():
    members = [m("a", "ready", digest=OLD), m("b", "busy", digest=OLD, leased=True),
               m("c", "dirty", digest=OLD), m("d", "ready")]
    plan = plan_pool(pool(warm=1), members, 0, NOW)
    assert plan.actions == (Roll("a", D), Reset("c", D))


def test_member_with_credential_ending_soon_is_replaced_once_idle():
    members = [m("a", "ready", credential_expires_at=NOW + 600),
               m("b", "ready", credential_expires_at=NOW + 7200),
               m("c", "busy", leased=True, credential_expires_at=NOW + 60),
               m("d", "ready", credential_expires_at=NOW - 1)]
    plan = plan_pool(pool(warm=3), members, 0, NOW)
    assert plan.actions == (Replace("a", D), Replace("d", D))
    assert plan_pool(pool(warm=3), members, 0, NOW, credential_margin=60).actions == (
        Replace("d", D),)


def test_stopped_and_offline_idle_members_are_removed_and_refilled():
    members = [m("a", "stopped"), m("b", "ready", online=False), m("c", "stopped", leased=True)]
    plan = plan_pool(pool(), members, 0, NOW)
    assert plan.actions == (Remove("a", "stopped"), Remove("b", "offline while idle"),
                            Start(2, D))


def test_starting_and_resetting_members_count_as_warming():
    members = [m("a", "starting"), m("b", "resetting")]
    plan = plan_pool(pool(warm=1), members, 1, NOW)
    assert plan.actions == () and plan.warming == 2
    assert plan.waiting_reason == "waiting: pool ui-pool is warming a machine for it"


def test_ready_member_means_no_pool_reason():
    plan = plan_pool(pool(warm=0), [m("a", "ready")], 1, NOW)
    assert plan.actions == ()
    assert plan.waiting_reason is None and plan.waiting_code is None


def test_lowered_bounds_shrink_idle_members_dirty_first():
    members = [m("a", "ready"), m("b", "ready"), m("c", "dirty"), m("d", "ready", digest=OLD),
               m("e", "busy", leased=True)]
    plan = plan_pool(pool(size=3), members, 0, NOW)
    assert plan.actions == (Remove("c", "beyond size 3"), Remove("d", "beyond size 3"))
    assert plan.live_after == 3
    plan = plan_pool(pool(pool_max=2), members, 0, NOW)
    assert plan.actions == (Remove("a", "beyond pool-max 2"), Remove("c", "beyond pool-max 2"),
                            Remove("d", "beyond pool-max 2"))


def test_busy_members_beyond_lowered_bounds_finish_their_work():
    members = [m(f"m{i}", "busy", leased=True) for i in range(5)]
    plan = plan_pool(pool(pool_max=3), members, 2, NOW)
    assert plan.actions == () and plan.live_after == 5
    assert plan.waiting_code == LIMITED


def test_actions_come_in_a_stable_order_whatever_the_input_order():
    members = [m("z", "stopped"), m("y", "dirty"), m("x", "ready", digest=OLD), m("w", "stopped")]
    plan = plan_pool(pool(), members, 1, NOW)
    assert [a.as_dict()["action"] for a in plan.actions] == [
        "remove", "remove", "roll", "reset", "start"]
    for order in itertools.permutations(members):
        assert plan_pool(pool(), list(order), 1, NOW) == plan


def test_actions_have_a_plain_wire_shape():
    assert Reset("a", D).as_dict() == {"action": "reset", "member_id": "a", "digest": D}
    assert Start(2, D).as_dict() == {"action": "start", "count": 2, "digest": D}
    assert Remove("a", "stopped").as_dict() == {"action": "remove", "member_id": "a",
                                                 "why": "stopped"}


def test_bad_inputs_are_refused_with_a_sentence():
    with pytest.raises(ValueError, match="lists a member twice"):
        plan_pool(pool(), [m("a", "ready"), m("a", "busy")], 0, NOW)
    with pytest.raises(ValueError, match="a member is one of"):
        Member("a", "sleeping", D)
    with pytest.raises(ValueError, match="must not be negative"):
        pool(warm=-1)


# --------------------------------------------------------------------------- invariants

KINDS = list(itertools.product(
    ("starting", "ready", "busy", "dirty", "resetting", "stopped"),
    (False, True),  # leased
    (False, True),  # flight ended
    (D, OLD, None),  # digest
    (None, NOW + 60, NOW + 36000),  # credential ends
    (True, False),  # online
))


def _members(rng: random.Random, count: int) -> list[Member]:
    out = []
    for i in range(count):
        state, leased, ended, digest, expires, online = rng.choice(KINDS)
        out.append(Member(f"m{i:02d}", state, digest, leased, ended, expires, online))
    return out


def _is_dirty_idle(x: Member) -> bool:
    return (not x.leased and x.state not in ("stopped", "starting", "resetting")
            and (x.state in ("busy", "dirty") or x.flight_ended))


def check_invariants(spec: PoolSpec, members: list[Member], waiting: int, now: float) -> None:
    plan = plan_pool(spec, members, waiting, now)
    by_id = {x.id: x for x in members}
    touched = [a.member_id for a in plan.actions if not isinstance(a, Start)]
    starts = [a for a in plan.actions if isinstance(a, Start)]
    removed = {a.member_id for a in plan.actions if isinstance(a, Remove)}
    started = sum(a.count for a in starts)
    cap = min(spec.size, spec.pool_max)
    live_before = sum(1 for x in members if x.state != "stopped")
    live_after = sum(1 for x in members if x.state != "stopped" and x.id not in removed) + started
    in_hours = spec.active_hours is None or spec.active_hours.contains(now)
    context = (spec, members, waiting, plan)

    assert len(touched) == len(set(touched)), context  # one action per member at most
    assert len(starts) <= 1 and all(s.count > 0 for s in starts), context
    assert plan.live_after == live_after and plan.live_before == live_before, context
    assert all(not by_id[i].leased for i in touched), context  # leased: never touched
    for x in members:
        if x.state == "stopped" and not x.leased:
            assert Remove(x.id, "stopped") in plan.actions, context
        if x.state in ("starting", "resetting"):
            assert x.id not in touched, context
    if started:
        assert in_hours and spec.digest is not None, context
        assert live_after <= spec.pool_max and live_after <= spec.size, context
    assert live_after <= max(cap, live_before), context  # a plan never grows past the cap
    if live_after > cap:  # only members nobody may touch are left over the cap
        survivors = [x for x in members if x.state != "stopped" and x.id not in removed]
        assert all(x.leased or x.state in ("starting", "resetting") for x in survivors), context
    if not in_hours:
        assert all(isinstance(a, Remove) for a in plan.actions), context
    for a in plan.actions:
        if isinstance(a, (Reset, Roll, Replace, Start)):
            assert a.digest == spec.digest, context
        if isinstance(a, Roll):
            assert by_id[a.member_id].digest != spec.digest, context
    whys = {a.member_id: a.why for a in plan.actions if isinstance(a, Remove)}
    beyond = [i for i, why in whys.items() if why.startswith("beyond ")]
    before_shrink = live_before - sum(
        1 for i in removed if by_id[i].state != "stopped" and i not in beyond)
    assert len(beyond) <= max(0, before_shrink - cap), context  # shrink only what is over
    for x in members:
        if _is_dirty_idle(x):  # every dirty idle member is reset, or removed when it must go
            if in_hours and spec.digest is not None and x.id not in beyond:
                assert Reset(x.id, spec.digest) in plan.actions, context
            else:
                assert x.id in removed, context
    demand = spec.warm + waiting
    if plan.limit is None:
        assert plan.ready + plan.warming >= demand, context
    if waiting == 0:
        assert plan.waiting_reason is None and plan.waiting_code is None, context
    if plan.waiting_reason is not None:
        warming = WARMING_RE.match(plan.waiting_reason)
        limited = LIMITED_RE.match(plan.waiting_reason)
        assert (warming and plan.waiting_code == WARMING) or (
            limited and plan.waiting_code == LIMITED), context
        assert (warming or limited).group(1) == spec.name
        if limited:
            assert limited.group(2) == plan.limit and not started, context
    elif waiting:
        assert plan.ready >= waiting, context
    shuffled = list(members)
    random.Random(len(members)).shuffle(shuffled)
    assert plan_pool(spec, shuffled, waiting, now) == plan, context


def test_invariants_hold_over_many_pools_and_member_mixes():
    rng = random.Random(20240331)
    for size, warm, pool_max, waiting, hours, digest in itertools.product(
        range(5), range(4), range(5), range(4), (None, INSIDE, OUTSIDE), (D, None)
    ):
        spec = pool(size=size, warm=warm, pool_max=pool_max, active_hours=hours, digest=digest)
        for count in (0, 1, 3, 7):
            check_invariants(spec, _members(rng, count), waiting, NOW)


def test_invariants_hold_for_every_single_member_kind():
    for kind in KINDS:
        member = Member("solo", *kind)
        for size, pool_max, hours, waiting in itertools.product(
            (0, 1, 3), (0, 1, 3), (None, OUTSIDE), (0, 2)
        ):
            spec = pool(size=size, warm=1, pool_max=pool_max, active_hours=hours)
            check_invariants(spec, [member], waiting, NOW)


def test_warm_0_stops_idle_members_once_their_work_is_done():
    members = [m("a", "ready"), m("b", "ready"), m("c", "busy", leased=True)]
    plan = plan_pool(pool(warm=0), members, 0, NOW)
    assert plan.actions == (Remove("a", "idle beyond warm 0"), Remove("b", "idle beyond warm 0"))
    assert plan.live_after == 1


def test_idle_members_beyond_warm_and_the_waiting_flights_are_removed_highest_first():
    members = [m("a", "ready"), m("b", "ready"), m("c", "ready")]
    assert plan_pool(pool(warm=1), members, 1, NOW).actions == (
        Remove("c", "idle beyond warm 1"),)
    assert plan_pool(pool(warm=1), members, 2, NOW).actions == ()
