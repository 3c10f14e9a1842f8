"""The lease use cases against a real SQLite store, travelling in time with a fake clock."""

from __future__ import annotations

import pytest

from gg.control import flights, leases, runners
from gg.domain.flight_spec import FlightSpec
from gg.errors import Conflict, LeaseSuperseded, NotFound
from gg.settings import Settings

from support import make_runner

STORES = ("sqlite", "postgresql")  # storage semantics: each test runs on both stores


@pytest.fixture
def settings():
    # dev: runners default to isolation none, healthy without a capability report
    return Settings(lease_ttl=60, max_expiries=3, dev=True)



def _a_lease_ran_out(core, owner, clock):
    """Runners a and b, and a flight whose lease a held and let run out; b is checked in."""
    a, b = make_runner(core, owner, "a"), make_runner(core, owner, "b")
    f = flights.open_flight(core, owner, FlightSpec(command=["true"]))
    leases.try_claim(core, a.id)
    clock.advance(61)
    runners.check_in(core, b, readings={}, inventory=None, capabilities=None, version=None,
                     held=[], peer_address=None)
    return a, b, f

def test_a_claim_grants_epoch_one_and_a_second_claim_gets_nothing(core, owner):
    a, b = make_runner(core, owner, "a"), make_runner(core, owner, "b")
    f = flights.open_flight(core, owner, FlightSpec(command=["true"]))
    got = leases.try_claim(core, a.id)
    assert got is not None and got[1].epoch == 1 and got[0].id == f.id
    assert leases.try_claim(core, b.id) is None


def test_an_expired_lease_is_recorded_by_the_next_look_and_re_offered_with_a_new_epoch(core, owner, clock):
    a, b, f = _a_lease_ran_out(core, owner, clock)
    flight, grant = leases.try_claim(core, b.id)
    assert grant.epoch == 2 and flight.attempt == 2 and flight.expiries == 1
    facts = core.store.facts(f.id)
    assert [x["kind"] for x in facts] == ["expired"] and facts[0]["runner_id"] is None
    with pytest.raises(LeaseSuperseded):
        leases.renew(core, a, f.id, 1)
    with pytest.raises(LeaseSuperseded):
        leases.report(core, a, f.id, epoch=1, facts=[{"kind": "output", "body": {"text": "late"}}])
    with pytest.raises(LeaseSuperseded):
        leases.hand_back(core, a, f.id, epoch=1, outcome="landed", exit_code=0, reason=None, key="k")
    leases.hand_back(core, b, f.id, epoch=2, outcome="landed", exit_code=0, reason=None, key="k2")
    assert core.store.flight(f.id).stage == "landed"


def test_a_renewal_after_expiry_is_refused_even_before_anyone_noticed(core, owner, clock):
    a = make_runner(core, owner)
    f = flights.open_flight(core, owner, FlightSpec(command=["true"]))
    leases.try_claim(core, a.id)
    clock.advance(59)
    assert leases.renew(core, a, f.id, 1)["expires_at"] == clock.now + 60
    clock.advance(60)
    with pytest.raises(LeaseSuperseded):
        leases.renew(core, a, f.id, 1)


def test_a_flight_lost_max_expiries_times_fails_as_lost(core, owner, clock):
    a = make_runner(core, owner)
    f = flights.open_flight(core, owner, FlightSpec(command=["true"]))
    for _ in range(3):
        runners.check_in(core, a, readings={}, inventory=None, capabilities=None, version=None,
                         held=[], peer_address=None)
        assert leases.try_claim(core, a.id) is not None
        clock.advance(61)
    with core.store.atomic():
        leases.expire_due(core, clock.now)
    flight = core.store.flight(f.id)
    assert (flight.stage, flight.ended_reason, flight.expiries) == ("failed", "lost 3 times", 3)
    assert [e["kind"] for e in core.store.events(flight_id=f.id)][-2:] == [
        "info:flight:expired", "info:flight:failed"]


def test_a_final_outcome_is_accepted_once_and_an_identical_repeat_is_harmless(core, owner):
    a = make_runner(core, owner)
    f = flights.open_flight(core, owner, FlightSpec(command=["true"]))
    leases.try_claim(core, a.id)
    first = leases.hand_back(core, a, f.id, epoch=1, outcome="failed", exit_code=2, reason=None, key="1:hand-back")
    again = leases.hand_back(core, a, f.id, epoch=1, outcome="failed", exit_code=2, reason=None, key="1:hand-back")
    assert first["repeat"] is False and again["repeat"] is True
    with pytest.raises(Conflict):
        leases.hand_back(core, a, f.id, epoch=1, outcome="landed", exit_code=0, reason=None, key="other")
    assert core.store.flight(f.id).exit_code == 2
    assert len(core.store.events(kind="info:flight:failed", flight_id=f.id)) == 1


def test_a_retried_report_is_stored_once(core, owner):
    a = make_runner(core, owner)
    f = flights.open_flight(core, owner, FlightSpec(command=["true"]))
    leases.try_claim(core, a.id)
    fact = {"kind": "output", "body": {"text": "x"}, "key": "1:output:1"}
    assert leases.report(core, a, f.id, epoch=1, facts=[fact])["stored"] == 1
    assert leases.report(core, a, f.id, epoch=1, facts=[fact])["stored"] == 0
    assert len(core.store.facts(f.id)) == 1


def test_output_with_a_nul_byte_is_stored_as_sent_on_both_stores(core, owner):
    """Text columns refuse U+0000 (PostgreSQL's cannot hold it); a fact's body is JSON, kept
    escaped, so a program's output may carry one on either store."""
    a = make_runner(core, owner)
    f = flights.open_flight(core, owner, FlightSpec(command=["true"]))
    leases.try_claim(core, a.id)
    fact = {"kind": "output", "body": {"text": "a\x00b\n"}, "key": "1:output:1"}
    assert leases.report(core, a, f.id, epoch=1, facts=[fact])["stored"] == 1
    assert [x["body"]["text"] for x in core.store.facts(f.id)] == ["a\x00b\n"]


def test_a_runner_may_touch_only_the_flights_it_holds(core, owner):
    a, b = make_runner(core, owner, "a"), make_runner(core, owner, "b")
    f = flights.open_flight(core, owner, FlightSpec(command=["true"]))
    leases.try_claim(core, a.id)
    for call in (lambda: leases.renew(core, b, f.id, 1),
                 lambda: leases.report(core, b, f.id, epoch=1, facts=[{"kind": "note"}]),
                 lambda: leases.hand_back(core, b, f.id, epoch=1, outcome="landed", exit_code=0, reason=None, key=None),
                 lambda: leases.renew(core, b, "f_nonexistent", 1)):
        with pytest.raises(NotFound) as err:
            call()
        assert err.value.message == "no such flight"


def test_returned_goes_back_to_ready_for_another_runner(core, owner):
    a, b = make_runner(core, owner, "a"), make_runner(core, owner, "b")
    f = flights.open_flight(core, owner, FlightSpec(command=["true"]))
    leases.try_claim(core, a.id)
    leases.hand_back(core, a, f.id, epoch=1, outcome="returned", exit_code=None, reason="no credential", key="k")
    assert core.store.flight(f.id).stage == "ready"
    flight, grant = leases.try_claim(core, b.id)
    assert grant.epoch == 2


def test_a_restart_honours_every_lease_for_one_ttl(core, owner, clock):
    a = make_runner(core, owner)
    f = flights.open_flight(core, owner, FlightSpec(command=["true"]))
    leases.try_claim(core, a.id)
    clock.advance(300)  # the control plane was away for five minutes
    leases.honour_after_restart(core)
    assert core.store.flight(f.id).lease_expires_at == clock.now + 60
    with core.store.atomic():
        assert leases.expire_due(core, clock.now) == 0
    assert leases.renew(core, a, f.id, 1)["epoch"] == 1


def test_cancelling_a_flying_flight_tells_its_holder_it_ended(core, owner):
    a = make_runner(core, owner)
    f = flights.open_flight(core, owner, FlightSpec(command=["true"]))
    leases.try_claim(core, a.id)
    flights.cancel(core, owner, f.id)
    with pytest.raises(Conflict) as err:
        leases.renew(core, a, f.id, 1)
    assert err.value.code == "flight_ended"


def test_a_started_fact_sent_late_is_dated_when_it_started_never_before_the_grant(core, owner, clock):
    a = make_runner(core, owner)
    f = flights.open_flight(core, owner, FlightSpec(command=["true"]))
    leases.try_claim(core, a.id)
    granted_at = clock.now
    clock.advance(5)
    leases.report(core, a, f.id, epoch=1, facts=[
        {"kind": "started", "body": {}, "key": "1:started:1", "ago": 2.0},
        {"kind": "output", "body": {"text": "x"}, "key": "1:output:2"}])
    clock.advance(1)
    leases.hand_back(core, a, f.id, epoch=1, outcome="landed", exit_code=0, reason=None,
                     key="1:hand-back", facts=[{"kind": "note", "body": {}, "ago": 99.0}])
    at = {x["kind"]: x["at"] for x in core.store.facts(f.id)}
    assert at["started"] == granted_at + 3 and at["output"] == granted_at + 5
    assert at["note"] == granted_at  # never before the grant


def test_a_hand_back_carries_started_in_its_own_transaction_and_a_stale_one_stores_nothing(core, owner, clock):
    a, b, f = _a_lease_ran_out(core, owner, clock)
    assert leases.try_claim(core, b.id)[1].epoch == 2  # a's lease expired: epoch 2 is b's
    started = [{"kind": "started", "body": {"pid": 1}, "key": "1:started:1", "ago": 1.0}]
    with pytest.raises(LeaseSuperseded):
        leases.hand_back(core, a, f.id, epoch=1, outcome="landed", exit_code=0, reason=None,
                         key="1:hand-back", facts=started)
    assert [x["kind"] for x in core.store.facts(f.id)] == ["expired"]
    clock.advance(2)
    leases.hand_back(core, b, f.id, epoch=2, outcome="landed", exit_code=0, reason=None,
                     key="2:hand-back", facts=[{**started[0], "key": "2:started:1"}])
    facts = core.store.facts(f.id)
    kinds = [x["kind"] for x in facts]
    assert kinds.count("started") == 1 and kinds.index("started") < kinds.index("exit")
    started_fact = next(x for x in facts if x["kind"] == "started")
    assert started_fact["epoch"] == 2 and started_fact["at"] == clock.now - 1.0


def test_a_grant_and_a_hand_back_answer_the_row_as_stored_without_reading_it_again(core, owner, clock):
    """The claim's flight is the row the compare-and-set left (built from the change, not
    read back), and the hand-back's stage is the stage it wrote: both equal the store's."""
    a, b = make_runner(core, owner, "a"), make_runner(core, owner, "b")
    f = flights.open_flight(core, owner, FlightSpec(command=["true"], title="t", timeout=30))
    statements: list[str] = []
    core.store.db.trace(statements.append)
    try:
        flight, grant = leases.try_claim(core, a.id)
    finally:
        core.store.db.trace(None)
    assert flight == core.store.flight(f.id)
    assert (flight.stage, flight.epoch, flight.lease_runner) == ("flying", grant.epoch, a.id)
    assert not any(s.startswith("SELECT * FROM flights WHERE id") for s in statements), statements
    returned = leases.hand_back(core, a, f.id, epoch=1, outcome="returned", exit_code=None,
                                reason="no credential", key="1:hand-back")
    assert returned["stage"] == core.store.flight(f.id).stage == "ready"
    flight, grant = leases.try_claim(core, b.id)
    assert flight == core.store.flight(f.id) and grant.epoch == 2
    statements.clear()
    core.store.db.trace(statements.append)
    try:
        landed = leases.hand_back(core, b, f.id, epoch=2, outcome="landed", exit_code=0,
                                  reason=None, key="2:hand-back",
                                  facts=[{"kind": "started", "ago": 0.5}])
    finally:
        core.store.db.trace(None)
    flight_reads = [s for s in statements if s.startswith(("SELECT * FROM flights WHERE id",
                                                           "SELECT f.*, g.epoch AS held_epoch"))]
    assert len(flight_reads) == 1, statements  # read once, not again for the holder check
    # and the epochs the runner was granted it at with it, in the same statement
    assert not any(s.startswith("SELECT epoch FROM grants") for s in statements), statements
    # an active runner's lease ending needs its state, not its whole row
    assert not any(s.startswith("SELECT * FROM runners") for s in statements), statements
    assert landed == {"flight": f.id, "stage": "landed", "repeat": False}
    assert core.store.flight(f.id).stage == "landed"
    again = leases.hand_back(core, b, f.id, epoch=2, outcome="landed", exit_code=0,
                             reason=None, key="2:hand-back")
    assert again == {"flight": f.id, "stage": "landed", "repeat": True}


def test_a_claims_answer_carries_the_policy_in_force_at_the_grant_from_its_column(core, owner):
    """The runner was read when its claim parked; the answer carries the policy as stored
    at the grant, read from its column alone (not the whole row)."""
    from gg.control import answers

    a = make_runner(core, owner, "a")
    parked = core.store.runner(a.id)
    flights.open_flight(core, owner, FlightSpec(command=["true"]))
    got = leases.try_claim(core, a.id)
    core.store.update_runner(a.id, policy={**parked.policy, "workers": 3})
    statements: list[str] = []
    core.store.db.trace(statements.append)
    try:
        answer = answers.claimed(core, parked, got)
    finally:
        core.store.db.trace(None)
    assert answer["policy"] == {**parked.policy, "workers": 3} != parked.policy
    assert answer["lease"]["epoch"] == 1 and answer["flight"]["id"] == got[0].id
    assert not any(s.startswith("SELECT * FROM runners") for s in statements), statements


def test_a_lease_calls_one_read_gives_the_flight_and_every_epoch_its_caller_was_granted(
        core, owner):
    """``flight_held``: the row and the epochs at which this runner was granted the flight
    (a runner granted it twice holds two, another runner its own, a stranger none), in one
    statement."""
    a, b, c = (make_runner(core, owner, n) for n in ("a", "b", "c"))
    f = flights.open_flight(core, owner, FlightSpec(command=["true"]))
    for runner in (a, b, a):
        flight, grant = leases.try_claim(core, runner.id)
        leases.hand_back(core, runner, f.id, epoch=grant.epoch, outcome="returned",
                         exit_code=None, reason=None, key=f"{grant.epoch}:hand-back")
    said: list[str] = []
    core.store.db.trace(said.append)
    try:
        read = core.store.flight_held(f.id, a.id)
    finally:
        core.store.db.trace(None)
    assert read == (core.store.flight(f.id), {1, 3}) and len(said) == 1, said
    assert core.store.flight_held(f.id, b.id)[1] == {2}
    assert core.store.flight_held(f.id, c.id) == (core.store.flight(f.id), set())
    assert core.store.flight_held("f_nobody", a.id) == (None, set())
