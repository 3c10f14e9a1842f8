"""A run of the queue may stop at the last flight a reader needs: the flights behind it in the
matcher's order cannot change the start of those ahead. Each queue below is played in full and
then once per flight, only as far as that flight; the answers must be the same."""

from __future__ import annotations

import random
from datetime import datetime, timezone

from gg.domain.durations import Summary
from gg.domain.estimates import NOBODY, UNMEASURED, UNWARMED, History, PoolOutlook, Queue, forecast
from gg.domain.flights import Flight
from gg.domain.groups import Group, Placement
from gg.domain.matching import Seat, order
from gg.domain.pool_planner import parse_active_hours
from gg.domain.pools import MEMBER_KIND
from gg.domain.runners import Runner

NOW = 1_800_000_000.0
GROUPS = {"default": Group("default"), "dc1": Group("dc1", {"site": "x"}),
          "lab": Group("lab", {"site": "y"}, exclusive=True),
          "old": Group("old", {"site": "x"}, draining=True)}
PLACEMENT = Placement(GROUPS)


def summary(*seconds: float) -> Summary:
    s = Summary()
    for x in seconds:
        s = s.add(x, 200)
    return s


def flight(fid: str, title: str, at: float, env: str = "ci", by: str = "p_1", **kw) -> Flight:
    return Flight(id=fid, command=[title], title=title, opened_by=by, opened_at=NOW - 500 + at,
                  environment=env, requires={"environment": env}, **kw)


def flying(fid: str, title: str, runner: str, age: float, env: str = "ci") -> Flight:
    return Flight(id=fid, command=[title], title=title, opened_by="p_1", opened_at=NOW - 900,
                  stage="flying", environment=env, requires={"environment": env},
                  lease_runner=runner, lease_granted_at=NOW - age)


def seat(rid: str, env: str = "ci", live: int = 0, workers: int = 1, group: str = "default",
         online: bool = True, **kw) -> Seat:
    runner = Runner(id=rid, name=rid, labels={"environment": env}, workers=workers,
                    group=group, last_seen_at=NOW, **kw)
    return Seat(runner, dict(runner.labels), live, online, GROUPS[group], PLACEMENT)


def durations(**by_title: Summary) -> dict:
    """Measured in ci only: what gpu runners fly is unknown."""
    return {(t, "ci", "shell"): s for t, s in by_title.items()}


def assert_each_flight_as_in_the_full_run(queue: Queue, seats, history, pools, now=NOW):
    full = forecast(queue, seats, history, pools, now)
    assert set(full.estimates) == {f.id for f in queue.ready}
    first = order(queue.ready, queue.served)[0].id if queue.ready else None
    for f in queue.ready:
        part = forecast(queue, seats, history, pools, now, needed=[f.id])
        assert part.get(f.id) == full.estimates[f.id], f.id
        assert part.played[-1] == f.id  # it stopped there
    if first is not None:  # the first in the matcher's order needs nothing else played
        assert forecast(queue, seats, history, pools, now, needed=[first]).played == [first]
    return full


def test_priorities_and_openers_turns_stop_at_the_flight_read():
    ready = [flight("f_low1", "unit", 1, priority="low"),
             flight("f_low2", "unit", 2, priority="low"),
             flight("f_a1", "unit", 3, by="p_a"), flight("f_a2", "build", 4, by="p_a"),
             flight("f_a3", "unit", 5, by="p_a"), flight("f_b1", "build", 6, by="p_b"),
             flight("f_hi", "unit", 7, priority="high", by="p_b"),
             flight("f_gpu", "unit", 8, env="gpu"), flight("f_b2", "unit", 9, by="p_b")]
    queue = Queue(ready, [flying("x_1", "build", "r_1", 20),
                          flying("x_g", "unit", "r_g", 5, "gpu")], served={"p_a": NOW - 5})
    seats = [seat("r_1", live=1), seat("r_2", workers=2), seat("r_g", env="gpu", live=1)]
    history = History(durations(unit=summary(10, 12, 14), build=summary(60, 70, 90)))
    full = assert_each_flight_as_in_the_full_run(queue, seats, history, [])
    assert full.estimates["f_hi"].at == NOW  # high priority first, on a free slot
    assert full.estimates["f_gpu"].basis == UNMEASURED  # r_g flies what gpu never measured
    assert full.estimates["f_low2"].known and full.estimates["f_low2"].ahead >= 6


def test_groups_placements_reservations_and_drains_stop_at_the_flight_read():
    ready = [flight("f_1", "unit", 1, group="dc1"), flight("f_2", "unit", 2, where={"site": "y"}),
             flight("f_3", "unit", 3), flight("f_4", "unit", 4, by="p_owner"),
             flight("f_5", "build", 5, runner_target="r_drained"),
             flight("f_6", "build", 6, runner_target="r_dc1"),
             flight("f_7", "unit", 7, group="old"), flight("f_8", "unit", 8),
             flight("f_9", "unit", 9, where={"site": "x"})]
    seats = [seat("r_dc1", group="dc1", live=1), seat("r_lab", group="lab"),
             seat("r_old", group="old"), seat("r_res", reserved=True, owner="p_owner"),
             seat("r_drained", admin_state="drained"), seat("r_cordoned", admin_state="cordoned"),
             seat("r_draining", admin_state="draining"), seat("r_off", online=False),
             seat("r_plain", live=1)]
    queue = Queue(ready, [flying("x_1", "unit", "r_dc1", 3), flying("x_2", "build", "r_plain", 30)])
    history = History(durations(unit=summary(10, 20, 30), build=summary(40, 50)))
    full = assert_each_flight_as_in_the_full_run(queue, seats, history, [])
    assert full.estimates["f_5"].basis == NOBODY  # sent to a drained runner
    assert full.estimates["f_7"].basis == NOBODY  # its group is draining
    assert full.estimates["f_2"].at == NOW  # the exclusive lab's own work
    assert full.estimates["f_4"].at == NOW  # the reserved runner's owner


def test_pools_warming_active_hours_and_unknown_warm_ups_stop_at_the_flight_read():
    evening = datetime(2027, 3, 3, 21, 0, tzinfo=timezone.utc).timestamp()
    hours = parse_active_hours("08:00-20:00 UTC")
    ready = [flight(f"f_{i}", "unit" if i % 3 else "build", i, env="ci" if i % 4 else "gpu")
             for i in range(12)]
    ready += [flight("f_new", "never-seen", 20), flight("f_arm", "unit", 21, env="arm"),
              flight("f_after", "unit", 22)]
    member = seat("r_m", kind=MEMBER_KIND, live=1)
    pools = [PoolOutlook("ci-pool", "ci", frozenset({"r_m"}), (evening - 10,)),
             PoolOutlook("gpu-pool", "gpu", later=2, active_hours=hours),
             PoolOutlook("cold", "arm", warming_since=(evening,))]
    queue = Queue(ready, [flying("x_m", "unit", "r_m", 4)])
    history = History({("unit", "ci", "shell"): summary(10, 15), ("build", "ci", "shell"):
                       summary(30, 45), ("unit", "gpu", "shell"): summary(10),
                       ("build", "gpu", "shell"): summary(20)},
                      warmups={"ci-pool": summary(30, 40), "gpu-pool": summary(60)})
    full = assert_each_flight_as_in_the_full_run(queue, [member, seat("r_1")], history, pools,
                                                 now=evening)
    gpu = [full.estimates[f.id] for f in ready if f.environment == "gpu"]
    assert all(e.at >= evening + 11 * 3600 for e in gpu)  # not before the pool's hours open
    assert full.estimates["f_arm"].basis == UNWARMED.format(pool="cold")
    assert full.estimates["f_after"].known and full.estimates["f_new"].known


def test_random_queues_stop_at_the_flight_read():
    rng = random.Random(17)
    for _ in range(60):
        seats = [seat(f"r_{i}", env=rng.choice(("ci", "gpu")), live=rng.choice((0, 1)),
                      workers=rng.choice((1, 2)), group=rng.choice(list(GROUPS)),
                      admin_state=rng.choice(("active", "active", "active", "draining")),
                      reserved=rng.random() < 0.2, owner="p_2")
                 for i in range(rng.randint(0, 6))]
        ready = []
        for i in range(rng.randint(1, 25)):
            kw = rng.choice(({}, {}, {"group": rng.choice(list(GROUPS))},
                             {"where": {"site": rng.choice("xy")}}))
            if seats and rng.random() < 0.1:
                kw["runner_target"] = rng.choice(seats).runner.id
            ready.append(flight(f"f_{i}", rng.choice(("unit", "build", "new")), rng.random() * 90,
                                env=rng.choice(("ci", "gpu")), by=rng.choice(("p_1", "p_2", "p_3")),
                                priority=rng.choice(("normal", "normal", "high", "low")), **kw))
        busy = [flying(f"x_{s.runner.id}", rng.choice(("unit", "build")), s.runner.id,
                       rng.uniform(0, 60), s.runner.labels["environment"]) for s in seats
                if s.live_leases]
        pools = [PoolOutlook("p", "ci", frozenset(s.runner.id for s in seats[:1]),
                             (NOW - 5,) * rng.randint(0, 2), rng.randint(0, 1),
                             parse_active_hours("08:00-20:00 UTC"))] if rng.random() < 0.5 else []
        history = History(durations(unit=summary(10, 12), build=summary(50, 80)),
                          warmups={"p": summary(30)} if rng.random() < 0.7 else {},
                          turnaround=summary(1, 2) if rng.random() < 0.5 else Summary())
        served = {"p_2": NOW - rng.uniform(0, 50)} if rng.random() < 0.5 else {}
        assert_each_flight_as_in_the_full_run(Queue(ready, busy, served), seats, history, pools,
                                              now=NOW + rng.uniform(0, 86400))
