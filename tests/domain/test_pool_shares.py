"""Several maintainers, one pool: the plan split among the live ones (pure)."""

from __future__ import annotations

from gg.domain.pool_planner import PoolPlan, Remove, Reset, Start
from gg.domain.pool_shares import Seat, share_plan

D = "sha256:" + "1" * 64


def plan(*actions) -> PoolPlan:
    return PoolPlan(pool="ui-pool", digest=D, actions=tuple(actions), in_hours=True,
                    live_before=0, live_after=0, ready=0, warming=0, limit=None,
                    waiting_code=None, waiting_reason=None)


def test_starts_are_split_so_each_host_ends_with_as_few_members_as_the_others():
    owners = {"m_1": "r_a", "m_2": "r_a", "m_3": "r_b"}
    shares = share_plan(plan(Start(5, D)), owners, [Seat("r_b"), Seat("r_a")])
    assert shares.of("r_a") == (Start(2, D),)
    assert shares.of("r_b") == (Start(3, D),)
    assert dict(shares.holds) == {"r_a": 4, "r_b": 4} and shares.unplaced == 0


def test_the_split_is_the_same_whatever_order_the_maintainers_and_members_come_in():
    owners = {"m_2": "r_b", "m_1": "r_a"}
    one = share_plan(plan(Start(3, D)), owners, [Seat("r_a"), Seat("r_b"), Seat("r_c")])
    two = share_plan(plan(Start(3, D)), dict(reversed(owners.items())),
                     [Seat("r_c"), Seat("r_b"), Seat("r_a")])
    assert one == two
    assert [one.of(r) for r in ("r_a", "r_b", "r_c")] == [(Start(1, D),)] * 3


def test_a_member_action_goes_to_the_host_holding_it_and_an_orphans_to_the_first_live_one():
    owners = {"m_1": "r_b", "m_2": "r_gone", "m_3": None}
    shares = share_plan(plan(Remove("m_2", "its maintainer went silent"), Reset("m_1", D),
                             Remove("m_3", "stopped")), owners, [Seat("r_b"), Seat("r_a")])
    assert shares.of("r_a") == (Remove("m_2", "its maintainer went silent"),
                                Remove("m_3", "stopped"))
    assert shares.of("r_b") == (Reset("m_1", D),)


def test_a_full_host_gets_no_start_and_what_no_host_has_room_for_is_unplaced():
    owners = {"m_1": "r_a"}
    shares = share_plan(plan(Start(4, D)), owners, [Seat("r_a", capacity=2),
                                                    Seat("r_b", capacity=1)])
    assert shares.of("r_a") == (Start(1, D),) and shares.of("r_b") == (Start(1, D),)
    assert shares.unplaced == 2


def test_a_failing_host_gets_starts_only_when_the_healthy_ones_are_full():
    shares = share_plan(plan(Start(3, D)), {}, [Seat("r_a", failing=True),
                                                Seat("r_b", capacity=2)])
    assert shares.of("r_b") == (Start(2, D),) and shares.of("r_a") == (Start(1, D),)


def test_removed_members_free_room_on_their_host_before_the_starts_are_split():
    owners = {"m_1": "r_a", "m_2": "r_a"}
    shares = share_plan(plan(Remove("m_1", "stopped"), Start(2, D)), owners,
                        [Seat("r_a", capacity=2), Seat("r_b", capacity=1)])
    assert shares.of("r_a") == (Remove("m_1", "stopped"), Start(1, D))
    assert shares.of("r_b") == (Start(1, D),)


def test_with_no_live_maintainer_nothing_is_handed_out():
    shares = share_plan(plan(Start(2, D)), {}, [])
    assert dict(shares.actions) == {} and shares.unplaced == 2
