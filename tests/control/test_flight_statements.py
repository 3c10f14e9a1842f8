"""What one flight costs the store, counted: the statements a flight's hot path runs on SQLite
(open, the dispatcher's grant to a parked claim, the claim's answer, `started`, the
hand-back), each through the use case the server calls, each in a group commit of its own.
A ceiling, so that a statement added to the hot path is a decision, not a drift
(docs/performance.md, "Fewer statements a flight")."""

from __future__ import annotations

import asyncio
from collections import Counter

from gg.control import answers, leases
from gg.domain.flight_spec import FlightSpec

from support import check_in, make_runner

STORES = ("sqlite", "postgresql")

# SQLite: 75 before the savepoints, the kept small tables and the claim answer's one read; one
# more since a grant re-reads its runner's live leases (the seat checked again at the grant, as
# PostgreSQL's writers without the global lock need); two fewer since a lease call reads its
# flight and the caller's grants in one statement; one fewer since a dispatch pass reads when
# leases and attended flights are due in one. PostgreSQL: 63 before it counted its changes (a
# savepoint and its release for each unit's first block) and before those two reads
AT_MOST = {"sqlite": 50, "postgresql": 52}


async def _one_flight(core, owner, runner) -> None:
    await answers.opened(core, owner, FlightSpec(command=["true"]))
    got = await core.run(lambda c: leases.match_parked(c, [runner.id]))
    assert len(got) == 1
    flight, grant = got[0]
    answers.claimed(core, runner, (flight, grant))
    await core.run(leases.report, runner, flight.id, epoch=grant.epoch, durable=False,
                   facts=[{"kind": "started", "body": {"pid": 1}, "key": f"{grant.epoch}:started:1"}])
    handed = await core.run(leases.hand_back, runner, flight.id, epoch=grant.epoch,
                            outcome="landed", exit_code=0, reason=None,
                            key=f"{grant.epoch}:hand-back")
    assert handed["stage"] == "landed"


def test_a_flight_from_open_to_landed_costs_at_most_a_fixed_number_of_statements(core, owner):
    runner = make_runner(core, owner)
    said: list[str] = []

    async def flights() -> None:
        await _one_flight(core, owner, runner)  # the first flight's one-off reads aside
        core.store.db.trace(said.append)
        try:
            for _ in range(3):
                await _one_flight(core, owner, runner)
        finally:
            core.store.db.trace(None)

    asyncio.run(flights())
    per_flight = len(said) / 3
    kinds = Counter(s.split()[0].upper() for s in said)
    assert per_flight <= AT_MOST[core.store.db.dialect], (per_flight, kinds)
    # one savepoint a unit (open, grant, started, hand-back), none for a block: no unit's
    # first block begins after its unit changed a row (PostgreSQL counts its changes too)
    assert kinds["SAVEPOINT"] <= 4 * 3, kinds
    if core.store.db.dialect == "sqlite":  # nested savepoints: the commit releases them
        assert kinds["RELEASE"] == 0, kinds
    assert not [s for s in said if "SAVEPOINT block" in s or "RELEASE block" in s], said


def test_a_claim_or_a_renewal_that_finds_nothing_due_reads_what_falls_due_once(core, owner, clock):
    """A runner's claim finding a ready flight, then its renewal of that lease, with no lease,
    retry or attended flight due: one read each says so (``Store.next_looks``), and none of
    the three looks for what is due runs (the expired leases, the retries whose delay is
    over, the overdue attended flights)."""
    runner = make_runner(core, owner)
    said: dict[str, list[str]] = {"claim": [], "renewal": []}

    async def claim_and_renew() -> None:
        await answers.opened(core, owner, FlightSpec(command=["true"]))
        core.store.db.trace(said["claim"].append)
        try:
            granted = await core.run(leases.try_claim, runner.id, 1)
        finally:
            core.store.db.trace(None)
        assert granted is not None
        flight, grant = granted
        clock.advance(core.settings.lease_ttl / 3)
        core.store.db.trace(said["renewal"].append)
        try:
            renewed = await core.run(leases.renew, runner, flight.id, grant.epoch)
        finally:
            core.store.db.trace(None)
        assert renewed["expires_at"] > grant.expires_at

    asyncio.run(claim_and_renew())
    for which, statements in said.items():
        flat = [" ".join(s.split()) for s in statements]
        assert not [s for s in flat if "lease_expires_at <=" in s], (which, flat)
        assert not [s for s in flat if "FROM flight_retries WHERE held" in s
                    and "min(offer_at)" not in s], (which, flat)
        assert sum("min(offer_at)" in s for s in flat) == 1, (which, flat)  # the look ahead


def test_a_claim_made_after_a_lease_ran_out_records_its_expiry_first(core, owner, clock):
    """The other side of the one read: a lease past its expiry when a claim comes is
    recorded by that claim, and its flight granted again in the same pass."""
    runner = make_runner(core, owner)
    other = make_runner(core, owner, name="r2")

    async def flights() -> None:
        await answers.opened(core, owner, FlightSpec(command=["true"]))
        first = await core.run(leases.try_claim, other.id, 1)
        assert first is not None
        clock.advance(core.settings.lease_ttl + 1)
        check_in(core, runner)  # online still, where the other one went quiet
        again = await core.run(leases.try_claim, runner.id, 1)
        assert again is not None and again[0].id == first[0].id
        assert again[1].epoch == first[1].epoch + 1

    asyncio.run(flights())
