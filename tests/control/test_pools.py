"""Pools on the control plane, with a fake clock: strategies and their gate, the plan a
maintainer is served, the actions it may take, members joining, attestations, attention."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from gg.control import (
    admin,
    enrolment,
    flights,
    gates,
    leases,
    members,
    pools,
    profiles,
    runners,
    strategies,
)
from gg.control.people import add_person
from gg.domain.flight_spec import FlightSpec
from gg.errors import Conflict, Forbidden, Unauthorized
from gg.settings import Settings

from placement_support import charted
from support import Clock, check_in, make_runner, proof

STORES = ("sqlite", "postgresql")  # storage semantics: each test runs on both stores

D1 = "sha256:" + "1" * 64
D2 = "sha256:" + "2" * 64
NOON = datetime(2024, 6, 3, 12, 0, tzinfo=UTC).timestamp()


@pytest.fixture
def clock():
    return Clock(NOON)


@pytest.fixture
def settings():
    return Settings(dev=True)


@pytest.fixture
def owner(owner, core):
    charted(core, owner, "ui", "true")  # flights may use environment ui
    return owner


def mapping(size=4, warm=1, pool_max=3, hours=None, digest=D1, environment="ui"):
    bounds = {"pool-max": pool_max}
    if hours:
        bounds["active-hours"] = hours
    image = {"ref": "ui-image"}
    if digest:
        image["digest"] = digest
    return {"environment": environment, "inventory": {"name": "ui-pool", "size": size, "warm": warm},
            "image": image, "bounds": bounds}


def in_force(core, owner, **kw) -> dict:
    answer = strategies.apply(core, owner, "ui", mapping(**kw))
    if answer["status"] == "gated":
        gates.clear_gate(core, answer["gate"]["id"], person=owner)
    return answer


@pytest.fixture
def keeper(core, owner):
    """A registered runner an admin allowed to maintain ui-pool."""
    in_force(core, owner)
    runner = make_runner(core, owner, name="keeper")
    pools.allow(core, owner, "ui-pool", "keeper")
    return runner


def start_member(core, keeper) -> tuple[dict, str]:
    answer, _ = members.act(core, keeper, "ui-pool", "start")
    return answer["member"], answer["code"]


def join(core, code):
    answer = members.join(core, code, **proof(core, "join"), inventory={}, version=None)
    return core.store.runner(answer["runner"]["id"]), answer


def attest(core, keeper, running: list[str], did=()):
    return pools.attest(core, keeper, "ui-pool", members=[{"id": m, "process": "running"}
                                                            for m in running],
                        did=list(did), driver={"name": "process", "problem": None})


def ready_member(core, keeper) -> tuple[dict, object]:
    """Start a member, join, check in, attest it running: the member is ready."""
    member, code = start_member(core, keeper)
    runner, _ = join(core, code)
    check_in(core, runner)
    running = [m.id for m in core.store.members("ui-pool")]
    attest(core, keeper, running)
    assert core.store.member(member["id"]).state == "ready"
    return member, core.store.runner(runner.id)


def plan_actions(core, keeper) -> list[dict]:
    return pools.plan_view(core, keeper, "ui-pool")["actions"]


# --------------------------------------------------------------------------- strategies


def test_a_strategy_is_in_force_only_once_its_gate_clears(core, owner):
    answer = strategies.apply(core, owner, "ui", mapping())
    assert answer["status"] == "gated"
    gate = answer["gate"]
    assert gate["kind"] == "strategy" and gate["clearer"] == "admin"
    assert gate["why"] == "first apply of pool ui-pool in environment ui"
    assert core.store.strategy("ui").in_force is None
    assert pools.pool_environments(core) == set()
    gates.clear_gate(core, gate["id"], person=owner)
    record = core.store.strategy("ui")
    assert record.in_force == record.applied and record.gate_id is None
    assert pools.pool_environments(core) == {"ui"}


def test_fewer_machines_apply_at_once_and_more_wait_for_a_gate(core, owner):
    in_force(core, owner)
    fewer = strategies.apply(core, owner, "ui", mapping(pool_max=2))
    assert fewer["status"] == "applied"
    assert core.store.strategy("ui").in_force.bounds.pool_max == 2
    more = strategies.apply(core, owner, "ui", mapping(pool_max=4))
    assert more["status"] == "gated"
    assert more["gate"]["why"] == "raises pool-max 2 → 4"
    assert core.store.strategy("ui").in_force.bounds.pool_max == 2  # still the narrower one
    same = strategies.apply(core, owner, "ui", mapping(pool_max=4))
    assert same["gate"]["id"] == more["gate"]["id"]  # re-applying opens no second gate
    back = strategies.apply(core, owner, "ui", mapping(pool_max=2))
    assert back["status"] == "unchanged"
    assert core.store.gate(more["gate"]["id"]).status == "superseded"


def test_only_an_admin_applies_and_a_pool_keeps_its_one_strategy(core, owner):
    add_person(core, owner, "bob", admin=False)
    with pytest.raises(Forbidden):
        strategies.apply(core, core.store.person_by_name("bob"), "ui", mapping())
    in_force(core, owner)
    with pytest.raises(Conflict, match="pool ui-pool belongs to strategy ui already"):
        strategies.apply(core, owner, "other", mapping())
    renamed = mapping()
    renamed["inventory"]["name"] = "ui-pool2"
    with pytest.raises(Conflict, match="a pool cannot be renamed"):
        strategies.apply(core, owner, "ui", renamed)


def test_a_pinned_digest_is_kept_by_a_file_that_pins_none_and_a_new_one_rolls(core, owner,
                                                                               keeper):
    strategies.pin_digest(core, owner, "ui", D2)
    assert core.store.strategy("ui").in_force.image.digest == D2
    assert strategies.apply(core, owner, "ui", mapping(digest=None))["status"] == "unchanged"
    assert core.store.strategy("ui").in_force.image.digest == D2
    member, _ = ready_member(core, keeper)
    assert core.store.member(member["id"]).digest == D2
    strategies.pin_digest(core, owner, "ui", D1)
    assert plan_actions(core, keeper)[0] == {"action": "roll", "member_id": member["id"],
                                             "digest": D1}


# --------------------------------------------------------------------------- who maintains


def test_only_an_allowed_runner_maintains_and_a_member_never_does(core, owner, keeper):
    stranger = make_runner(core, owner, name="stranger")
    with pytest.raises(Forbidden, match="gg pool allow ui-pool stranger"):
        pools.plan_view(core, stranger, "ui-pool")
    with pytest.raises(Forbidden):
        members.act(core, stranger, "ui-pool", "start")
    _, code = start_member(core, keeper)
    member_runner, _ = join(core, code)
    with pytest.raises(Conflict):  # an admin cannot make a member a maintainer either
        pools.allow(core, owner, "ui-pool", member_runner.id)
    for call in (lambda: pools.plan_view(core, member_runner, "ui-pool"),
                 lambda: members.act(core, member_runner, "ui-pool", "start"),
                 lambda: attest(core, member_runner, [])):
        with pytest.raises(Forbidden, match="a pool member cannot maintain"):
            call()


def enrolled_host(core, owner, profile: str, roles: list[str]):
    """A machine enrolled with ``profile`` (in force, its gate cleared)."""
    answer = profiles.apply_profile(core, owner, profile, {
        "purpose": "hosts a pool", "roles": roles, "environment": "ui"})
    if answer["gate"]:
        gates.clear_gate(core, answer["gate"]["id"], person=owner)
    _, token = enrolment.mint_token(core, owner, profile=profile)
    runner, _ = enrolment.enrol(core, token, name=f"{profile}-host", **proof(core, "enrol"),
                                workers=1, inventory={}, version=None)
    return runner


def test_an_enrolled_runner_maintains_exactly_when_its_profile_has_the_maintain_role(core,
                                                                                    owner):
    in_force(core, owner)
    host = enrolled_host(core, owner, "pool-host", ["maintain"])
    assert pools.may_maintain(core, host, "ui-pool") is None
    plain = enrolled_host(core, owner, "builder", ["runner"])
    assert pools.may_maintain(core, plain, "ui-pool") == (
        "runner builder-host may not maintain pool ui-pool: its fleet profile builder has no "
        "maintain role in force")
    with pytest.raises(Conflict, match="add the maintain role to that profile"):
        pools.allow(core, owner, "ui-pool", plain.id)  # the profile decides, not an allow
    profiles.apply_profile(core, owner, "pool-host", {  # the role removed: at once
        "purpose": "hosts a pool", "roles": ["runner"], "environment": "ui"})
    assert "no maintain role" in pools.may_maintain(core, core.store.runner(host.id), "ui-pool")


def test_two_maintainers_split_the_starts_and_together_never_exceed_the_bounds(core, owner,
                                                                            keeper):
    second = make_runner(core, owner, name="second")
    pools.allow(core, owner, "ui-pool", "second")
    for _ in range(5):
        flights.open_flight(core, owner, FlightSpec(command=["true"], environment="ui"))
    # both check in, then both ask at once: the plan (pool-max 3) is split, not doubled
    pools.plan_view(core, keeper, "ui-pool")
    pools.plan_view(core, second, "ui-pool", capacity=5)
    shares = {r.id: pools.plan_view(core, r, "ui-pool", capacity=cap)["actions"]
              for r, cap in ((keeper, None), (second, 5))}
    counts = sorted(a[0]["count"] for a in shares.values())
    assert counts == [1, 2]
    made = {r.id: [start_member(core, r)[0]["id"] for _ in range(shares[r.id][0]["count"])]
            for r in (keeper, second)}
    for r in (keeper, second):  # the pool is full: a start by either is refused
        with pytest.raises(Conflict, match="no longer says start"):
            members.act(core, r, "ui-pool", "start")
    held = {m.id: m.maintainer_id for m in core.store.members("ui-pool")}
    assert len(held) == 3 and {held[i] for i in made[keeper.id]} <= {keeper.id}
    assert {held[i] for i in made[second.id]} == {second.id}
    # each attests only its own members: the other host's are not reported gone by it
    attest(core, keeper, made[keeper.id])
    assert all(core.store.member(i).state == "starting" for i in made[second.id])
    row = pools.show_pool(core, "ui-pool")
    assert {m["name"]: sorted(m["members"]) for m in row["maintainers"]} == {
        "keeper": sorted(made[keeper.id]), "second": sorted(made[second.id])}
    assert {m["name"]: m["capacity"] for m in row["maintainers"]} == {"keeper": None,
                                                                      "second": 5}


def test_a_silent_maintainers_members_are_removed_and_its_share_goes_to_the_other(
        core, owner, keeper, clock):
    member, member_runner = ready_member(core, keeper)
    second = make_runner(core, owner, name="second")
    pools.allow(core, owner, "ui-pool", "second")
    assert plan_actions(core, second) == []  # keeper serves the one warm member
    clock.advance(core.settings.offline_after + 1)  # keeper goes silent
    check_in(core, second)
    check_in(core, member_runner)  # the member itself still runs, on the silent host
    assert plan_actions(core, second) == [
        {"action": "remove", "member_id": member["id"], "why": "its maintainer went silent"},
        {"action": "start", "count": 1, "digest": D1}]
    members.act(core, second, "ui-pool", "remove", member_id=member["id"])
    new, _ = start_member(core, second)
    assert [m.id for m in core.store.members("ui-pool")] == [new["id"]]
    assert core.store.member(new["id"]).maintainer_id == second.id


# --------------------------------------------------------------------------- the plan


def test_members_start_to_warm_plus_waiting_and_never_beyond_pool_max(core, owner, keeper):
    assert plan_actions(core, keeper) == [{"action": "start", "count": 1, "digest": D1}]
    for _ in range(5):
        flights.open_flight(core, owner, FlightSpec(command=["true"], environment="ui"))
    assert plan_actions(core, keeper) == [{"action": "start", "count": 3, "digest": D1}]
    started = [start_member(core, keeper)[0]["id"] for _ in range(3)]
    assert len(set(started)) == 3
    with pytest.raises(Conflict, match="no longer says start") as refused:
        members.act(core, keeper, "ui-pool", "start")
    assert refused.value.code == "plan_changed"
    assert len(core.store.members("ui-pool")) == 3
    flight = flights.list_flights(core)["items"][0]
    assert flight["waiting"] == "waiting: pool ui-pool is warming a machine for it"


def test_a_flight_waits_with_pool_max_reached_while_every_member_is_busy(core, owner):
    in_force(core, owner, size=1, warm=1, pool_max=1)
    keeper = make_runner(core, owner, name="keeper")
    pools.allow(core, owner, "ui-pool", "keeper")
    _, runner = ready_member(core, keeper)
    flights.open_flight(core, owner, FlightSpec(command=["true"], environment="ui"))
    assert leases.try_claim(core, runner.id) is not None
    waiting = flights.open_flight(core, owner, FlightSpec(command=["true"], environment="ui"))
    shown = flights.show_flight(core, waiting.id)
    assert shown["waiting"] == ("waiting: pool ui-pool's limits allow no more machines now "
                                "(pool-max 1 reached)")
    sent = flights.open_flight(core, owner, FlightSpec(command=["true"], environment="ui", runner="keeper"))
    assert "pool" not in flights.show_flight(core, sent.id)["waiting"]  # not a member's flight


def test_outside_active_hours_nothing_starts_and_the_waiting_sentence_says_so(core, owner,
                                                                               clock):
    in_force(core, owner, hours="08:00-20:00 UTC")
    keeper = make_runner(core, owner, name="keeper")
    pools.allow(core, owner, "ui-pool", "keeper")
    clock.now = datetime(2024, 6, 3, 21, 0, tzinfo=UTC).timestamp()
    check_in(core, core.store.runner(keeper.id))
    flight = flights.open_flight(core, owner, FlightSpec(command=["true"], environment="ui"))
    # Nobody maintains the pool yet: a plan nobody carries out warms nothing.
    assert flights.show_flight(core, flight.id)["waiting"] == (
        "waiting: no runner advertises environment=ui")
    attest(core, keeper, [])
    view = pools.plan_view(core, keeper, "ui-pool")
    assert view["actions"] == [] and view["in_hours"] is False
    with pytest.raises(Conflict, match="no longer says start"):
        members.act(core, keeper, "ui-pool", "start")
    shown = flights.show_flight(core, flight.id)
    assert shown["waiting"] == ("waiting: pool ui-pool's limits allow no more machines now "
                                "(outside active hours 08:00-20:00 UTC)")
    assert shown["remedy"] == "wait, or change the strategy's bounds"
    row = pools.list_pools(core)[0]
    assert row["waiting"] == [{"flight": flight.id, "sentence": shown["waiting"],
                               "remedy": shown["remedy"]}]
    clock.now = datetime(2024, 6, 4, 8, 0, tzinfo=UTC).timestamp()
    check_in(core, core.store.runner(keeper.id))
    assert plan_actions(core, keeper) == [{"action": "start", "count": 2, "digest": D1}]


def test_an_action_on_a_member_that_just_took_a_flight_is_refused(core, owner, keeper):
    member, runner = ready_member(core, keeper)
    strategies.pin_digest(core, owner, "ui", D2)
    assert plan_actions(core, keeper)[0]["action"] == "roll"
    flights.open_flight(core, owner, FlightSpec(command=["true"], environment="ui"))
    assert leases.try_claim(core, runner.id) is not None  # it took one before the roll
    with pytest.raises(Conflict, match=f"no longer says roll {member['id']}"):
        members.act(core, keeper, "ui-pool", "roll", member_id=member["id"])


# --------------------------------------------------------------------------- members


def test_a_command_pools_machine_has_its_strategys_join_within_to_check_in(core, owner,
                                                                           clock):
    command = {**mapping(), "driver": "command",
               "command": {"create": "create-host", "delete": "delete-host",
                           "list": "list-hosts", "join-within": "2m"}}
    gates.clear_gate(core, strategies.apply(core, owner, "ui", command)["gate"]["id"],
                     person=owner)
    keeper = make_runner(core, owner, name="keeper")
    pools.allow(core, owner, "ui-pool", "keeper")
    member, _ = start_member(core, keeper)
    assert member["code_expires_at"] == clock.now + 120  # not MEMBER_CODE_TTL's 600
    clock.advance(121)
    check_in(core, keeper)
    answer = attest(core, keeper, [member["id"]])
    assert answer["never_joined"] == [member["id"]]
    body = core.store.events(kind="warn:pool:member_never_joined")[-1]["body"]
    assert body["deadline"] == 120
    assert body["reason"].endswith("never checked in within 120 s of its start")


def test_a_member_code_is_spent_once_and_refused_after_member_code_ttl(core, keeper, clock):
    _, code = start_member(core, keeper)
    runner, answer = join(core, code)
    assert runner.kind == "member" and runner.labels == {"environment": "ui"}
    assert answer["credential"].startswith("ggr_")
    with pytest.raises(Unauthorized):
        join(core, code)  # spent
    flights.open_flight(core, core.store.person_by_name("owner"), FlightSpec(command=["true"],
                        environment="ui"))
    _, slow_code = start_member(core, keeper)
    clock.advance(core.settings.member_code_ttl + 1)  # ten minutes and a second
    with pytest.raises(Unauthorized):
        join(core, slow_code)
    with pytest.raises(Unauthorized):
        join(core, "ggm_" + "x" * 32)
    with pytest.raises(Unauthorized):
        join(core, "ggr_not-a-member-code")


def test_a_members_credential_lasts_member_credential_ttl_and_is_never_renewed(core, keeper,
                                                                              clock):
    _, code = start_member(core, keeper)
    runner, answer = join(core, code)
    assert answer["credential_expires_at"] == clock.now + core.settings.member_credential_ttl
    assert "renew_credential" not in check_in(core, runner)["directives"]
    with pytest.raises(Forbidden, match="never renewed"):
        runners.challenge(core, runner)
    with pytest.raises(Forbidden, match="never renewed"):
        runners.renew_credential(core, runner, "nonce", "signature")
    clock.advance(core.settings.member_credential_ttl)
    with pytest.raises(Unauthorized):
        runners.authenticate(core, answer["credential"])


def test_a_member_whose_flight_ended_is_reset_with_a_new_code_and_a_fresh_credential(
        core, owner, keeper):
    member, code = start_member(core, keeper)
    runner, first = join(core, code)
    check_in(core, runner)
    attest(core, keeper, [member["id"]])
    flight = flights.open_flight(core, owner, FlightSpec(command=["true"], environment="ui"))
    _, grant = leases.try_claim(core, runner.id)
    leases.hand_back(core, runner, flight.id, epoch=grant.epoch, outcome="landed", exit_code=0, reason=None, key=None)
    assert plan_actions(core, keeper) == [{"action": "reset", "member_id": member["id"],
                                           "digest": D1}]
    answer, ended = members.act(core, keeper, "ui-pool", "reset", member_id=member["id"])
    assert ended == [runner.id]
    with pytest.raises(Unauthorized):  # the last cycle's credential died with it
        runners.authenticate(core, first["credential"])
    view = pools.plan_view(core, keeper, "ui-pool")["members"][0]
    assert (view["state"], view["online"]) == ("resetting", False)
    again, _ = join(core, answer["code"])
    assert again.id == runner.id and again.name == member["name"]  # one row per member
    assert again.public_key != runner.public_key and again.admin_state == "active"
    check_in(core, again)
    attest(core, keeper, [member["id"]])
    stored = core.store.member(member["id"])
    assert (stored.resets, stored.state) == (1, "ready")  # the old flight is not this cycle's
    assert plan_actions(core, keeper) == []
    assert flights.show_flight(core, flight.id)["runner_name"] == member["name"]


def test_an_attestation_turns_gone_processes_into_dirty_or_stopped(core, owner, keeper):
    in_force(core, owner, warm=2)
    flown, runner = ready_member(core, keeper)
    idle, _ = ready_member(core, keeper)
    flight = flights.open_flight(core, owner, FlightSpec(command=["true"], environment="ui"))
    granted = leases.try_claim(core, runner.id)
    assert granted is not None and granted[0].id == flight.id
    leases.hand_back(core, runner, flight.id, epoch=granted[1].epoch,
                     outcome="landed", exit_code=0, reason=None, key=None)
    answer = attest(core, keeper, running=[], did=[{"action": "start", "ok": True}])
    states = {m["id"]: m["state"] for m in answer["members"]}
    assert states == {flown["id"]: "dirty", idle["id"]: "stopped"}
    event = core.store.events(kind="info:pool:attested", newest=True, limit=1)[0]
    assert event["body"]["holds"] == {"dirty": 1, "stopped": 1}
    assert event["body"]["did"] == ["start"]


# --------------------------------------------------------------------------- attention


def test_a_pool_never_attested_needs_attention_and_warns_once_per_stale_episode(core, owner,
                                                                               keeper, clock):
    row = pools.list_pools(core)[0]
    assert row["needs_attention"] and row["attention"].startswith("never attested")
    stale = core.settings.pool_attestation_stale
    clock.advance(stale + 1)
    pools.list_pools(core)
    said: list[str] = []  # recorded once: the next listing reads, and opens no transaction
    core.store.db.trace(said.append)
    try:
        pools.list_pools(core)
    finally:
        core.store.db.trace(None)
    assert said and not [s for s in said if s.lstrip().upper().startswith(("BEGIN", "INSERT"))]
    assert len(core.store.events(kind="warn:pool:stale")) == 1
    check_in(core, core.store.runner(keeper.id))
    attest(core, keeper, [])
    row = pools.list_pools(core)[0]
    assert not row["needs_attention"] and row["last_attested_at"] == clock.now
    clock.advance(stale + 1)
    row = pools.list_pools(core)[0]
    assert row["needs_attention"] and row["attention"].startswith("last attested")
    assert len(core.store.events(kind="warn:pool:stale")) == 2
    for key in ("name", "environment", "members", "last_attested_at", "needs_attention"):
        assert key in row


# --------------------------------------------------------------------------- start estimates


def test_a_members_warm_up_is_measured_at_its_first_check_in_and_estimates_the_next(
        core, owner, keeper, clock):
    from gg.store.estimates import WARMUP

    waiting = flights.open_flight(core, owner, FlightSpec(command=["true"], environment="ui"))
    member, code = start_member(core, keeper)  # the keeper maintains the pool from now on
    before = flights.show_flight(core, waiting.id)
    assert before["expected_start_at"] is None
    assert before["expected_start_basis"] == (
        "no estimate yet: pool ui-pool has not warmed a machine yet, so its warm-up is unknown")
    clock.advance(40)
    runner, _ = join(core, code)
    check_in(core, runner)  # the first check-in of its cycle: 40 s after it started
    check_in(core, core.store.runner(runner.id))  # a later one measures nothing
    warmups = core.store.durations(WARMUP)
    assert list(warmups) == [("ui-pool", "", "")] and warmups[("ui-pool", "", "")].count == 1
    # the next member the pool warms for a waiting flight: about 40 s from its start
    assert leases.try_claim(core, runner.id)[0].id == waiting.id
    check_in(core, keeper)
    second = flights.open_flight(core, owner, FlightSpec(command=["true"], environment="ui"))
    start_member(core, keeper)
    shown = flights.show_flight(core, second.id)
    assert abs(shown["expected_start_at"] - (clock.now + 40)) < 4


def test_a_members_reset_and_warm_up_between_flights_is_not_a_runners_turnaround(
        core, owner, keeper, clock):
    member, code = start_member(core, keeper)
    runner, _ = join(core, code)
    check_in(core, runner)
    attest(core, keeper, [member["id"]])
    flown = flights.open_flight(core, owner, FlightSpec(command=["true"], environment="ui"))
    _, grant = leases.try_claim(core, runner.id)
    waiting = flights.open_flight(core, owner, FlightSpec(command=["true"], environment="ui"))
    clock.advance(5)
    leases.hand_back(core, runner, flown.id, epoch=grant.epoch, outcome="landed", exit_code=0,
                     reason=None, key=None)
    answer, _ = members.act(core, keeper, "ui-pool", "reset", member_id=member["id"])
    clock.advance(40)  # the member boots again: the pool's warm-up, measured as such
    again, _ = join(core, answer["code"])
    check_in(core, again)
    assert leases.try_claim(core, again.id)[0].id == waiting.id
    assert core.estimates.turnaround.count == 0  # it would add ~40 s after every runner's flight


def test_a_member_cannot_join_under_a_name_a_live_runner_holds(core, owner, keeper):
    member, code = start_member(core, keeper)
    person_made = make_runner(core, owner, name=member["name"])  # the name was taken first
    with pytest.raises(Conflict, match=f"the runner name {member['name']} is taken"):
        join(core, code)
    admin.retire(core, owner, person_made.id)  # a retired holder does not block
    runner, _ = join(core, code)
    assert runner.name == member["name"]


def test_members_join_the_runner_group_their_strategy_names(core, owner):
    answer = strategies.apply(core, owner, "ui", {**mapping(), "group": "ui-pool-group"})
    if answer["status"] == "gated":
        gates.clear_gate(core, answer["gate"]["id"], person=owner)
    runner = make_runner(core, owner, name="keeper")
    pools.allow(core, owner, "ui-pool", "keeper")
    _, code = start_member(core, runner)
    member, _ = join(core, code)
    assert member.group == "ui-pool-group"
    assert core.store.group("ui-pool-group") is not None  # made for it
    keeper_row = core.store.runner(runner.id)
    assert keeper_row.group == "default"  # a runner nobody placed is in default


# --------------------------------------------------------------------------- taking down


def test_pool_delete_stops_every_member_first_then_the_strategy_goes(core, owner, keeper):
    from gg.control import removals

    member, _ = ready_member(core, keeper)
    with pytest.raises(Conflict, match="gg pool delete ui-pool stops them first"):
        removals.delete_strategy(core, owner, "ui")
    answer = pools.delete_pool(core, owner, "ui-pool")
    assert answer["deleted"] is False and answer["detail"].startswith("stopping 1 member")
    assert [(a["action"], a["member_id"]) for a in plan_actions(core, keeper)] == [
        ("remove", member["id"])]  # no start: the pool holds nothing from now on
    members.act(core, keeper, "ui-pool", "remove", member_id=member["id"])
    attest(core, keeper, [])
    assert core.store.strategy("ui") is None
    assert [e["kind"] for e in core.store.events(limit=5, newest=True)][-1] == \
        "info:strategy:deleted"


def test_strategy_delete_of_an_empty_pool_is_at_once_and_admins_only(core, owner, ada):
    from gg.control import removals

    in_force(core, owner)
    with pytest.raises(Forbidden):
        removals.delete_strategy(core, ada, "ui")
    assert removals.delete_strategy(core, owner, "ui")["deleted"] is True
    assert core.store.strategy("ui") is None
    in_force(core, owner)  # the name and the pool may be applied again
    assert pools.delete_pool(core, owner, "ui-pool")["deleted"] is True


def test_a_fleet_profile_is_refused_while_runners_or_tokens_use_it_naming_them(core, owner):
    from gg.control import admin, removals

    host = enrolled_host(core, owner, "hosts", ["runner"])
    token, _ = enrolment.mint_token(core, owner, profile="hosts")
    with pytest.raises(Conflict) as refused:
        removals.delete_profile(core, owner, "hosts")
    assert f"runner {host.name} (gg runner retire or forget)" in refused.value.message
    assert f"enrolment token {token.fingerprint} (gg fleet revoke)" in refused.value.message
    admin.retire(core, owner, host.name)
    enrolment.revoke_token(core, owner, token.fingerprint)
    assert removals.delete_profile(core, owner, "hosts")["deleted"] is True
    assert core.store.profile_record("hosts") is None


def test_an_environment_is_refused_while_flights_or_the_root_use_it(core, owner):
    from gg.control import environments, flights, removals

    flight = flights.open_flight(core, owner, FlightSpec(command=["true"], environment="ui"))
    with pytest.raises(Conflict, match=f"used by flight {flight.id}, which has not ended"):
        removals.remove_environment(core, owner, "ui")
    flights.cancel(core, owner, flight.id)
    in_force(core, owner)  # a pool serves ui, so the root may list it
    environments.apply_root(core, owner, {"environments": ["ui"]})
    with pytest.raises(Conflict, match="listed in the root envelope"):
        removals.remove_environment(core, owner, "ui")
    environments.apply_root(core, owner, {"environments": []})
    assert removals.remove_environment(core, owner, "ui")["deleted"] is True
    assert core.store.environment("ui") is None


def test_a_pools_maintainer_flies_nothing_so_no_wait_or_estimate_counts_on_it(core, owner,
                                                                              keeper):
    """``gg runner maintain`` registers as a runner (one worker, no labels) but never claims:
    a flight it could match waits for a runner that flies, and says so."""
    from gg.control import estimates
    from gg.control import flights as flight_ops

    waiting = flight_ops.open_flight(core, owner, FlightSpec(command=["true"]))
    shown = flight_ops.show_flight(core, waiting.id)
    assert "keeper" not in shown["waiting"] and "next claim" not in shown["waiting"], shown
    assert shown["expected_start_at"] is None and shown["expected_start_basis"]
    flier = make_runner(core, owner, name="flier")
    shown = flight_ops.show_flight(core, waiting.id)
    assert "flier" in shown["waiting"], shown  # a runner that flies is the one named
    assert shown["expected_start_basis"].endswith("on 1 runner"), shown
    assert estimates.fleet_seats(core, core.now())[0].runner.id == flier.id
    assert len(estimates.fleet_seats(core, core.now())) == 1


# --------------------------------------------------------------------------- scaled pools


def scaled_in_force(core, owner, **scale) -> None:
    data = mapping(size=4, warm=0, pool_max=3)
    data["scale"] = {"min": 0, "max": 3, "idle-after": 60, **scale}
    answer = strategies.apply(core, owner, "ui", data)
    gates.clear_gate(core, answer["gate"]["id"], person=owner)


def test_a_scaled_pool_keeps_its_desired_count_and_records_each_decision_with_its_reason(
        core, owner, clock):
    scaled_in_force(core, owner, **{"cool-down": 30})
    keeper = make_runner(core, owner, name="keeper")
    pools.allow(core, owner, "ui-pool", "keeper")
    assert plan_actions(core, keeper) == []  # min 0, nothing waits: nothing runs
    for _ in range(5):
        flights.open_flight(core, owner, FlightSpec(command=["true"], environment="ui"))
    view = pools.plan_view(core, keeper, "ui-pool")
    assert view["actions"] == [{"action": "start", "count": 3, "digest": D1}]
    assert view["scaling"] == "scaled ui-pool from 0 to 3: 5 flights waiting, 0 starting"
    events = core.store.events(kind="info:pool:scaled")
    assert [(e["body"]["previous"], e["body"]["desired"]) for e in events] == [(0, 3)]
    assert core.store.pool_scaled("ui-pool")[0].desired == 3
    start_member(core, keeper)  # one of three started; the other two are still desired
    assert plan_actions(core, keeper) == [{"action": "start", "count": 2, "digest": D1}]
    assert len(core.store.events(kind="info:pool:scaled")) == 1  # no second decision
    row = pools.show_pool(core, "ui-pool")
    assert row["counts"] == {"desired": 3, "starting": 3, "warm": 0, "busy": 0}
    assert row["scaled_reason"] == "scaled ui-pool from 0 to 3: 5 flights waiting, 0 starting"
