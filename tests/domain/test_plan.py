"""``gg plan``'s builder is pure and reads the claim's own blockers, so they never disagree."""

from __future__ import annotations

import itertools
import random

from gg.domain.flights import Flight
from gg.domain.matching import Seat, blockers, seat
from gg.domain.plan import ADMIN, ANYONE, OWNER, PlanFacts, build_plan
from gg.domain.runners import Runner
from gg.domain.waiting import Context, OpenGate, why_waiting

NOW = 1_000_000.0


def make_seat(name, labels=None, *, state="active", online=True, health="ok", workers=1,
              live=0, owner=None, reserved=False, refuted=frozenset()) -> Seat:
    r = Runner(id=f"r_{name}", name=name, labels=labels or {}, workers=workers,
               admin_state=state, last_seen_at=NOW - (1 if online else 100), health=health,
               owner=owner, reserved=reserved, ownership="claimed" if owner else "organisation")
    return seat(r, NOW, 45, live, refuted)


def flight(**kw) -> Flight:
    return Flight(id="f_1", command=["true"], opened_by=kw.pop("opened_by", "p_me"),
                  opened_at=NOW, **kw)


def marks(plan):
    return [(i.need, i.held) for i in plan.items]


def test_a_flight_missing_several_things_lists_each_with_who_and_how():
    seats = [make_seat("adas", {"environment": "ui"}, owner="p_ada", reserved=True),
             make_seat("old", {"environment": "ui"}, state="cordoned")]
    f = flight(environment="ui", requires={"environment": "ui", "gpu": "a100"}, stage="gated",
               gates=["g_1"])
    ctx = Context(open_gates=[OpenGate("g_1", "re-charting environment ui", "an admin")])
    plan = build_plan(f, seats, ctx, PlanFacts(now=NOW, people={"p_ada": "ada"},
                                               environment_meaning='os == "linux"'))
    assert marks(plan) == [
        ("gate g_1 is cleared (re-charting environment ui)", False),
        ("environment ui is charted and in force", True),
        ("a runner advertises environment=ui", True),
        ("a runner advertises gpu=a100", False),
        ("a runner that advertises environment=ui,gpu=a100 can take it now", False),
    ]
    gate, _, _, gpu, capacity = plan.items
    assert [(w.who, w.command) for w in gate.ways] == [(ADMIN, "gg gate clear g_1")]
    assert [(w.who, w.command) for w in gpu.ways] == [(ANYONE, "gg runner up --labels gpu=a100")]
    assert capacity.note == "no runner advertises everything it requires"
    assert plan.waiting.sentence == "waiting: gate g_1 is open (re-charting environment ui)"
    assert plan.startable is False


def test_the_nearest_runners_blockers_are_spelled_out_with_their_remedies():
    seats = [make_seat("adas", {"environment": "ui"}, owner="p_ada", reserved=True),
             make_seat("old", {"environment": "ui"}, state="cordoned", online=False)]
    plan = build_plan(flight(environment="ui", requires={"environment": "ui"}), seats, Context(),
                      PlanFacts(now=NOW, people={"p_ada": "ada"}, environment_meaning="true"))
    capacity = plan.items[-1]
    assert [(p.need, p.note, [(w.who, w.command) for w in p.ways]) for p in capacity.parts] == [
        ("runner adas is not reserved for another person", "reserved by ada",
         [(OWNER, "gg runner release adas"), (ADMIN, "gg runner release adas")]),
        ("runner old is active", "it is cordoned", [(ADMIN, "gg runner resume old")]),
        ("runner old is online", "it is not checking in",
         [(ANYONE, "gg runner up (on old's machine)")]),
    ]
    assert plan.waiting.sentence == ("waiting: a runner that could take it is reserved for "
                                     "another person")


def test_a_startable_flight_holds_everything():
    seats = [make_seat("r1", {"gpu": "a100"})]
    plan = build_plan(flight(requires={"gpu": "a100"}), seats)
    assert plan.startable and all(i.held for i in plan.items)
    assert plan.items[-1].note == "runner r1 will take it at its next claim"


def test_a_flight_that_is_not_waiting_says_what_it_is_doing():
    f = flight(stage="flying", lease_runner="r_r1", epoch=2)
    plan = build_plan(f, [], Context(runner_names={"r_r1": "r1"}))
    assert plan.items == [] and plan.state == ("it is flying on runner r1 (epoch 2); nothing "
                                               "more is needed")


def _scenarios():
    rng = random.Random(7)
    labels = [{}, {"environment": "ui"}, {"gpu": "a100"}, {"environment": "ui", "gpu": "a100"}]
    states = ["active", "active", "cordoned", "draining", "drained"]
    people = ["p_me", "p_other"]
    for _ in range(400):
        seats = []
        for i in range(rng.randint(0, 4)):
            lab = rng.choice(labels)
            refuted = frozenset({"environment=ui"}) if lab.get("environment") and rng.random() < .2 else frozenset()
            owner = rng.choice([None, *people])
            seats.append(make_seat(f"r{i}", lab, state=rng.choice(states),
                                   online=rng.random() < .8,
                                   health=rng.choice(["ok", "ok", "degraded: x"]),
                                   workers=rng.choice([1, 2]), live=rng.choice([0, 0, 1, 2]),
                                   owner=owner, reserved=bool(owner) and rng.random() < .5,
                                   refuted=refuted))
        target = rng.choice([None, None, *[s.runner.id for s in seats], "r_gone"])
        yield seats, flight(requires=rng.choice(labels), runner_target=target,
                            opened_by=rng.choice(people))


def test_plan_waiting_sentence_and_claim_agree_on_every_scenario():
    for seats, f in itertools.islice(_scenarios(), 400):
        claimable = any(not blockers(f, s) for s in seats)
        plan = build_plan(f, seats)
        waiting = why_waiting(f, seats)
        assert plan.startable == claimable
        assert (waiting.code == "offerable") == claimable, (waiting, f, seats)
        assert plan.waiting == waiting
        if not claimable:
            assert any(not i.held for i in plan.items), plan


def test_a_flight_sent_to_one_runner_reads_only_that_runners_seat():
    for seats, f in itertools.islice(_scenarios(), 400):
        if f.runner_target is None:
            continue
        alone = [s for s in seats if s.runner.id == f.runner_target]
        assert why_waiting(f, alone) == why_waiting(f, seats)


def test_a_gated_flight_with_an_idle_runner_asks_for_the_gate_not_for_a_runner():
    f = flight(environment="ui", requires={"environment": "ui"}, stage="gated", gates=["g_1"])
    ctx = Context(open_gates=[OpenGate("g_1", "re-charting environment ui", "an admin")])
    plan = build_plan(f, [make_seat("idle", {"environment": "ui"})], ctx, PlanFacts(now=NOW))
    assert not plan.startable
    capacity = plan.items[-1]
    assert (capacity.need, capacity.held) == ("a runner that advertises environment=ui can "
                                              "take it", True)
    assert "idle" in capacity.note
    ways = [w.command for item in plan.items for w in item.ways]
    assert not any(c and c.startswith("gg runner up") for c in ways)
    assert "gg gate clear g_1" in ways
