"""The placement contract of runner groups is part of the one matching rule (SPEC 17): the
claim's blockers, the waiting sentence, ``gg plan`` and a group's demand read it alike."""

from __future__ import annotations

import pytest

from gg.domain import groups as rules
from gg.domain.flights import Flight
from gg.domain.groups import Attribute, Group, Placement
from gg.domain.matching import Block, assign, blockers, placement_blocks, seat
from gg.domain.plan import build_plan
from gg.domain.runners import Runner
from gg.domain.waiting import Context, why_waiting

NOW = 1_000_000.0

DC1 = Group("dc1", attributes={"site": "dc1"})
DC2 = Group("dc2", attributes={"site": "dc2"}, bindings=("prod", "github.com/acme/"))
LAB = Group("gpu-lab", attributes={"site": "dc1", "gpu": "a100"}, exclusive=True)
FLEET = Placement({g.name: g for g in (Group("default"), DC1, DC2, LAB)})


def make_seat(name, group="default", placement=FLEET, labels=None, live=0):
    r = Runner(id=f"r_{name}", name=name, labels=labels or {}, group=group,
               last_seen_at=NOW - 1)
    return seat(r, NOW, 45, live, frozenset(), placement)


def flight(**kw) -> Flight:
    return Flight(id="f_1", command=["true"], opened_by="p_me", opened_at=NOW, **kw)


def test_a_flight_naming_a_group_goes_only_to_that_groups_runners():
    f = flight(group="dc1")
    assert placement_blocks(f, DC1, FLEET) == []
    assert placement_blocks(f, Group("default"), FLEET) == [Block.GROUP]
    plan = assign([f], [make_seat("a"), make_seat("b", "dc1")])
    assert [a.seat.runner.name for a in plan] == ["b"]


def test_where_selects_groups_by_their_attributes():
    f = flight(where={"site": "dc1"})
    assert placement_blocks(f, DC1, FLEET) == []
    assert placement_blocks(f, DC2, FLEET) == [Block.WHERE]
    assert placement_blocks(f, Group("default"), FLEET) == [Block.WHERE]


def test_bound_environment_and_repository_prefix_go_only_to_bound_groups():
    prod = flight(environment="prod", requires={"environment": "prod"})
    assert placement_blocks(prod, DC2, FLEET) == []
    assert placement_blocks(prod, DC1, FLEET) == [Block.BINDING]
    repo = flight(repo="https://github.com/acme/widgets")
    assert placement_blocks(repo, DC2, FLEET) == []
    assert placement_blocks(repo, Group("default"), FLEET) == [Block.BINDING]
    other = flight(repo="https://github.com/other/widgets")
    assert placement_blocks(other, Group("default"), FLEET) == []


def test_an_exclusive_group_takes_only_work_that_names_it_or_selects_its_attributes():
    assert placement_blocks(flight(), LAB, FLEET) == [Block.EXCLUSIVE]
    assert placement_blocks(flight(group="gpu-lab"), LAB, FLEET) == []
    assert placement_blocks(flight(where={"gpu": "a100"}), LAB, FLEET) == []
    # selecting an attribute it shares with another group still selects it
    assert placement_blocks(flight(where={"site": "dc1"}), LAB, FLEET) == []
    bound = Placement({"lab": Group("lab", bindings=("ml",), exclusive=True)})
    assert placement_blocks(flight(environment="ml"), bound.group("lab"), bound) == []


def test_exclusive_starvation_reads_as_a_waiting_sentence_not_an_error():
    only_lab = [make_seat("gpu1", "gpu-lab")]
    f = flight()
    assert Block.EXCLUSIVE in blockers(f, only_lab[0])
    assert assign([f], only_lab) == []
    w = why_waiting(f, only_lab)
    assert w.code == "exclusive"
    assert w.sentence == ("waiting: only runners of exclusive group gpu-lab could take it, "
                          "and it does not name that group")
    assert "--group gpu-lab" in w.remedy
    plan = build_plan(f, only_lab)
    assert not plan.startable and plan.waiting == w


def test_group_and_binding_sentences_each_carry_a_remedy():
    seats = [make_seat("a"), make_seat("b", "dc1")]
    w = why_waiting(flight(group="dc2"), seats)
    assert (w.code, w.sentence) == ("group_none", "waiting: no runner of group dc2 is registered")
    assert "gg runner group RUNNER dc2" in w.remedy
    w = why_waiting(flight(environment="prod", requires={"environment": "prod"}),
                    [make_seat("a", labels={"environment": "prod"})])
    assert w.code == "bound_elsewhere"
    assert w.sentence == ("waiting: environment prod is bound to group dc2, and no runner of it "
                          "advertises environment=prod")
    w = why_waiting(flight(where={"site": "dc9"}), seats)
    assert (w.code, w.sentence) == ("where_none", "waiting: no runner is in a group with site=dc9")
    assert "gg group set GROUP --attr site=dc9" in w.remedy


def test_a_drained_group_offers_nothing_and_every_member_reads_so():
    drained = Placement({"dc1": Group("dc1", draining=True, drain_by="ana")})
    s = make_seat("a", "dc1", drained)
    assert Block.GROUP_DRAINING in blockers(flight(), s)
    assert assign([flight()], [s]) == []
    w = why_waiting(flight(), [s])
    assert w.code == "all_group_draining" and "gg group resume dc1" in w.remedy


def test_the_quiesced_fleet_is_the_first_rung_and_blocks_every_offer():
    stopped = Placement({"default": Group("default")}, quiesced_by="ana")
    s = make_seat("a", placement=stopped)
    f = flight(gates=["g_1"])
    assert blockers(flight(), s)[0] is Block.QUIESCED
    assert assign([flight()], [s]) == []
    w = why_waiting(f, [s], Context(quiesced_by="ana"))
    assert w.code == "quiesced" and "by ana" in w.sentence and w.remedy.endswith("gg fleet resume")


def test_group_reasons_come_after_the_kept_back_rungs():
    s = make_seat("a", labels={})
    reserved = Runner(id="r_r", name="r", group="gpu-lab", reserved=True, owner="p_other",
                      last_seen_at=NOW - 1)
    w = why_waiting(flight(), [seat(reserved, NOW, 45, 0, frozenset(), FLEET)],
                    Context(credential_missing_for=None))
    assert w.code == "exclusive"
    w = why_waiting(flight(repo="https://h/x"), [make_seat("g", "gpu-lab")],
                    Context(credential_missing_for="h/x"))
    assert w.code == "credential_missing"
    assert why_waiting(flight(), [s]).code == "offerable"


@pytest.mark.parametrize("pairs,problem", [
    ({"site": "dc1"}, None),
    ({"zone": "x"}, "attribute key zone is not registered"),
    ({"site": "dc3"}, "site takes one of dc1, dc2"),
    ({"environment": "prod"}, "reserved"),
])
def test_attributes_are_checked_against_the_registry(pairs, problem):
    registry = {"site": Attribute("site", ("dc1", "dc2"))}
    found = rules.attribute_problem(pairs, registry, "--attr")
    assert (found is None) if problem is None else (problem in found)


def test_a_flight_naming_a_group_its_binding_does_not_allow_is_refused_at_open():
    assert rules.open_refusal("dc1", ("dc2",), "prod", None) == (
        "environment prod is bound to group dc2; a flight there cannot name group dc1: open it "
        "with --group dc2 or without --group")
    assert rules.open_refusal("dc2", ("dc2",), "prod", None) is None
    assert rules.open_refusal(None, ("dc2",), "prod", None) is None


def test_delete_blockers_name_each_reference_and_what_clears_it():
    found = rules.delete_blockers("dc1", ["a", "b"], 1)
    assert found[0].startswith("2 runners are in group dc1 (a, b): move each")
    assert "gg runner group RUNNER default" in found[0]
    assert found[1].startswith("1 enrolment token that can still be redeemed names group dc1")
    assert rules.delete_blockers("dc1", [], 0) == []


def test_a_repository_gg_cannot_slug_is_bound_by_its_url_prefix_only():
    bound = Placement({"acme": Group("acme", bindings=("git://acme/",))})
    assert bound.bound_to(None, "git://acme/x y") == ("acme",)
    assert bound.bound_to(None, "relative/path") == ()


def test_a_flight_for_one_group_whose_runners_are_cordoned_names_that_group():
    from gg.domain.runners import AdminState

    cordoned = Runner(id="r_b", name="b", labels={}, group="dc1", last_seen_at=NOW - 1,
                      admin_state=AdminState.CORDONED.value)
    seats = [make_seat("a"), seat(cordoned, NOW, 45, 0, frozenset(), FLEET)]
    w = why_waiting(flight(group="dc1"), seats)
    assert w.sentence == "waiting: every runner of group dc1 is cordoned"
    bound = why_waiting(flight(environment="prod", requires={"environment": "prod"}), [
        make_seat("c", labels={"environment": "prod"}),
        seat(Runner(id="r_d", name="d", labels={"environment": "prod"}, group="dc2",
                    last_seen_at=NOW - 1, admin_state=AdminState.CORDONED.value),
             NOW, 45, 0, frozenset(), FLEET)])
    assert bound.sentence == ("waiting: every runner of group dc2 that advertises "
                              "environment=prod is cordoned")
