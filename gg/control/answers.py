"""The use cases routes call when an answer needs more than one other use case.

A route parses, calls one function here (or one use case elsewhere in ``gg.control``) and
answers with what it returns; whatever it used to read from the store or decide itself
lives here: the answer's shape (``gg.api``), "came back online", the clamp of a claim's wait,
reading a long poll again after its wake-up. Long polls take the server's wake-up as
``wait_for(seconds)``, so that the waiting stays in the server and the deciding here.
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable

from gg.control import (
    admin,
    approvals,
    artifacts,
    credentials,
    enrolment,
    environments,
    estimates,
    flights,
    gates,
    labels,
    machine_console,
    maintenance,
    people,
    reruns,
    retention,
    runners,
    secrets,
)
from gg.control.core import Core
from gg.control.people import public_person
from gg.control.views import flight_for_runner, runner_view, runners_view
from gg.domain import estimates as estimate_rules
from gg.domain.flight_spec import FlightSpec
from gg.domain.flights import Flight
from gg.domain.leases import Grant
from gg.domain.people import Person
from gg.domain.runners import Runner, RunnerIdentity, is_online
from gg.errors import DatabaseUnavailable, NotFound, Unauthorized

WaitFor = Callable[[float], Awaitable[None]]


# -- people ------------------------------------------------------------------------------------


def health(core: Core) -> dict:
    """Up, and its database answers; else 503 ``database_unavailable`` at once (a probe
    of the database is a new connection, made at most once a second: gg.store.postgres)."""
    if not core.store.available():
        raise DatabaseUnavailable("the control plane is up but its database is unavailable; "
                                  "it answers again as soon as the database does")
    return {"ok": True, "version": core.version, "commit": core.commit,
            "server_time": core.now()}


def whoami(core: Core, person: Person) -> dict:
    org = core.store.organisation()
    return {"person": public_person(person), "organisation": org["name"] if org else None,
            "server": retention.server_facts(core)}


def person_added(core: Core, person: Person, *, name: str, admin: bool,
                 ttl: float | str | None) -> dict:
    """A new person and their token, shown this once."""
    added, token = people.add_person(core, person, name, admin=admin, ttl=ttl)
    return {"person": public_person(added), "token": token}


def token_rotated(core: Core, person: Person, name: str, ttl: float | str | None) -> dict:
    rotated, token = people.rotate_token(core, person, name, ttl)
    return {"person": public_person(rotated), "token": token}


# -- runners -----------------------------------------------------------------------------------


async def registered(core: Core, person: Person, **fields: Any) -> dict:
    """Register a machine as ``person``; its labels' verdicts are in before the answer."""
    runner, credential = await labels.run(core, runners.register, person, **fields)
    await labels.settled(core, runner.id)  # its labels' verdicts, computed off the loop
    return {"runner": await asyncio.to_thread(runner_view, core, runner),
            "credential": credential,
            "credential_expires_at": runner.credential_expires_at,
            "protocol": core.settings.protocol()}


def runners_listed(core: Core, *, after: str | None = None,
                   limit: int | None = None) -> list[dict]:
    """Every runner's row, or a page: at most ``limit`` after the runner whose id is
    ``after`` (the last row of the page before)."""
    runners.notice_silence(core)  # an offline episode is recorded when anyone looks
    last = None
    if after is not None:
        last = core.store.runner(after)
        if last is None:
            raise NotFound(f"no runner {after}: a page of runners starts after a runner "
                           "the page before listed")
    return runners_view(core, after=last, limit=limit)


def runner_shown(core: Core, ref: str) -> dict:
    return runner_view(core, runners.resolve(core, ref), detail=True)


def runner_by_fingerprint(core: Core, fingerprint: str) -> dict:
    return runner_view(core, runners.by_fingerprint(core, fingerprint), detail=True)


async def checked_in(core: Core, runner: Runner | RunnerIdentity, *, readings: dict, inventory: dict | None,
                     capabilities: dict | None, version: str | None, held: list[str],
                     peer_address: str | None, workers: int | None,
                     labels_stated: dict[str, str] | None, agents: list[str] | None,
                     maintenance_items: list[dict] | None,
                     credentials_digest: str | None = None) -> dict:
    """A check-in: the core's, then enrolment's (agents before, the maintenance report after);
    a runner that came back online may take waiting flights. One turn of the writer (a
    heartbeat: no fsync of its own, unless agents are reported), a second one for a
    maintenance report."""
    was_online, extra, answer = await labels.run(
        core, _checked_in_now, runner.id, agents=agents, readings=readings,
        inventory=inventory, capabilities=capabilities, version=version, held=held,
        peer_address=peer_address, workers=workers, labels_stated=labels_stated,
        durable=agents is not None)
    # new facts: their verdicts, computed off the loop; waited for a moment at most
    await labels.settled(core, runner.id, within=core.settings.check_in_verdict_wait)
    if maintenance_items is not None:
        await core.run(_maintenance_reported, runner.id, maintenance_items,
                       credentials_digest=credentials_digest)
    answer.update(extra)
    if not was_online:
        core.signals.ready_changed()
    return answer


def _checked_in_now(core: Core, runner_id: str, *, agents: list[str] | None,
                    labels_stated: dict[str, str] | None, **fields: Any) -> tuple[bool, dict, dict]:
    """The check-in's reads and writes, in one unit of the writer: (was it online, what
    enrolment adds, the core's answer)."""
    runner = core.store.runner(runner_id)  # its row: the credential check is cached
    if runner is None:  # forgotten since the check
        raise Unauthorized()
    was_online = is_online(runner, core.now(), core.settings.offline_after)
    extra = enrolment.on_check_in(core, runner, agents=agents)
    answer = runners.check_in(core, runner, labels=labels_stated, **fields)
    return was_online, extra, answer


def _maintenance_reported(core: Core, runner_id: str, items: list[dict], *,
                          credentials_digest: str | None) -> None:
    row = core.store.runner(runner_id)
    if row is None:  # forgotten while its verdicts settled
        raise Unauthorized()
    maintenance.report(core, row, items, credentials_digest=credentials_digest)


def claim_wait(core: Core, asked: float | None) -> float:
    """How long a claim parks: what the runner asked, at most CLAIM_WAIT."""
    return core.settings.claim_wait if asked is None else min(asked, core.settings.claim_wait)


def claimed(core: Core, runner: RunnerIdentity, got: tuple[Flight, Grant] | None) -> dict | None:
    """The answer to a claim that was granted ``got`` (None: nothing for you)."""
    if got is None:
        return None
    flight, grant = got
    # the policy in force at the grant (not at parking), the flight's limits (gg fly --cpus)
    # and grace (--grace), and whether it has secrets or inputs: one read
    policy, limits, grace, has_secrets, has_inputs = core.store.grant_reads(runner.id, flight.id)
    if policy is None:  # forgotten since it parked: its lease expires and the flight goes on
        raise Unauthorized()
    sent = {**flight_for_runner(flight, core.settings), "limits": limits}
    if grace is not None:
        sent["grace"] = grace
    if has_secrets:
        delivered, refused = secrets.for_grant(core, flight)  # gg fly --secret: opened now
        if delivered or refused:
            sent["secrets"], sent["secrets_refused"] = delivered, refused
    inputs = artifacts.for_grant(core, flight.id) if has_inputs else []  # --with-artifacts
    if inputs:
        sent["inputs"] = inputs
    image = core.store.root_images().get(flight.environment) if flight.environment else None
    if image:  # the root envelope's images: what its container flights run from
        sent["image"] = image
    return {"flight": sent,
            "policy": policy,
            "lease": {"epoch": grant.epoch, "expires_at": grant.expires_at,
                      "granted_at": grant.granted_at},
            "protocol": core.settings.protocol()}


def instructed(kind: str) -> dict:
    """A claim answered with an instruction instead of a flight."""
    return {"instruction": {"kind": str(kind)}}


# -- admin on runners --------------------------------------------------------------------------


def state_changed(core: Core, person: Person, ref: str, action: str) -> dict:
    """Cordon, drain or resume one runner, with its row after the change."""
    change = admin.change_state(core, person, ref, action)
    return {**change, "view": runner_view(core, core.runner_again(change["runner"]))}


def retired(core: Core, person: Person, ref: str) -> dict:
    runner, stopping = admin.retire(core, person, ref)
    return {"runner": runner.id, "name": runner.name, "state": runner.admin_state,
            "retired_at": runner.retired_at, "stopping": stopping}


def forgotten(core: Core, person: Person, ref: str) -> dict:
    runner = admin.forget(core, person, ref)
    return {"runner": runner.id, "name": runner.name, "forgotten": True}


def policy_set(core: Core, person: Person, ref: str, **policy: Any) -> dict:
    return runner_view(core, admin.set_policy(core, person, ref, **policy), detail=True)


# -- enrolment -----------------------------------------------------------------------------------


def token_minted(core: Core, person: Person, **fields: Any) -> dict:
    """A ``gge_`` token, in this answer only."""
    row, token = enrolment.mint_token(core, person, **fields)
    return {**row.view(core.now()), "token": token}


def enrolled(core: Core, token: str | None, **fields: Any) -> dict:
    runner, credential = enrolment.enrol(core, token, **fields)
    return {"runner": runner_view(core, runner), "credential": credential,
            "credential_expires_at": runner.credential_expires_at,
            "profile": enrolment.runner_profile(runner),
            "protocol": core.settings.protocol()}


def refs_set(core: Core, runner: Runner, refs: list[dict]) -> dict:
    return {"runner": runner.id, "refs": credentials.set_refs(core, runner, refs)}


# -- flights -------------------------------------------------------------------------------------


async def opened(core: Core, person: Person, spec: FlightSpec) -> dict:
    """Open a flight on the writer; its row (not the whole detail) once it is durable."""
    return await core.run(_opened_row, flights.open_flight, person, spec)


async def rerun(core: Core, person: Person, flight_id: str, changes: dict) -> dict:
    """``gg rerun``: open a new flight from ``flight_id``'s spec; its row once durable."""
    return await core.run(_opened_row, reruns.rerun, person, flight_id, changes)


async def cancelled(core: Core, person: Person, flight_id: str) -> dict:
    def cancel(core: Core) -> dict:
        flights.cancel(core, person, flight_id)
        return flights.show_flight(core, flight_id)

    return await core.run(cancel)


def _opened_row(core: Core, opening: Callable[..., Flight], person: Person, *args: Any) -> dict:
    """A flight opened (in a unit of the writer) and its row, read in the same turn."""
    return flights.row(core, opening(core, person, *args), opener=person)


def estimate_accuracy(core: Core, since: float | None) -> dict:
    """Start estimates against the starts, over the last ``since`` seconds (None: all kept)."""
    report = estimates.accuracy(core, None if since is None else core.now() - since)
    return {**report, "sentence": estimate_rules.accuracy_sentence(report)}


def approved(core: Core, person: Person, flight_id: str, digest: str | None = None) -> dict:
    approvals.approve(core, person, flight_id, digest)
    return flights.show_flight(core, flight_id)


def rejected(core: Core, person: Person, flight_id: str, reason: str | None) -> dict:
    approvals.reject(core, person, flight_id, reason)
    return flights.show_flight(core, flight_id)


def forced(core: Core, person: Person, flight_id: str) -> dict:
    _, cleared = approvals.force(core, person, flight_id)
    return {"cleared": cleared, "flight": flights.show_flight(core, flight_id)}


def environment_approval_set(core: Core, person: Person, name: str, required: bool) -> dict:
    changed = approvals.set_environment_approval(core, person, name, required)
    return environments.environment_view(core, name) | {"changed": changed}


async def facts_after(core: Core, flight_id: str, *, after: int, wait: float,
                      wait_for: WaitFor) -> dict:
    """Facts after ``after``; with ``wait``, held until one arrives or the flight ends."""
    flight, facts = await asyncio.to_thread(_flight_facts, core, flight_id, after)
    if not facts and not flight.final and wait > 0:
        await wait_for(wait)
        flight, facts = await asyncio.to_thread(_flight_facts, core, flight_id, after)
    return {"flight": flight_id, "stage": flight.stage, "exit_code": flight.exit_code,
            "outcome": flight.outcome, "facts": facts}


def _flight_facts(core: Core, flight_id: str, after: int) -> tuple[Flight, list]:
    flight = core.store.flight(flight_id)  # first: a flight read final has all its facts
    if flight is None:  # never, or ended and pruned while the facts were waited for
        raise NotFound(f"no flight {flight_id}")
    return flight, core.store.facts(flight_id, after=after)


async def events_after(core: Core, *, after: int, kind: str | None, runner: str | None,
                       flight: str | None, limit: int, wait: float,
                       wait_for: WaitFor) -> list[dict]:
    """The event feed after ``after``; the newest ``limit`` when neither after nor wait."""
    def read(newest: bool) -> list[dict]:
        runner_id = admin.runner_for_history(core, runner) if runner else None  # retired too
        return _runner_names(core, core.store.events(
            after=after, kind=kind, runner_id=runner_id, flight_id=flight, limit=limit,
            newest=newest))

    rows = await asyncio.to_thread(read, after == 0 and wait == 0)
    if not rows and wait > 0:
        await wait_for(wait)
        rows = await asyncio.to_thread(read, False)
    return rows


def _runner_names(core: Core, rows: list[dict]) -> list[dict]:
    """Each event with its runner's name beside the id (retired runners keep theirs)."""
    ids = sorted({row["runner_id"] for row in rows if row.get("runner_id")})
    names = {r.id: r.name for r in core.store.runners(include_retired=True, ids=ids)}
    return [{**row, "runner_name": names.get(row["runner_id"])} if row.get("runner_id")
            else row for row in rows]


# -- gates and labels ----------------------------------------------------------------------------


def gate_shown(core: Core, gate_id: str) -> dict:
    gate = core.store.gate(gate_id)
    if gate is None:
        raise NotFound(f"no gate {gate_id}")
    return gates.view(core, gate)


async def gate_cleared(core: Core, person: Person, gate_id: str) -> dict:
    gate = await labels.run(core, gates.clear_gate, gate_id, person=person)
    await labels.settled(core)  # a meaning that came into force: its verdicts
    return await asyncio.to_thread(gates.view, core, gate)


async def labels_listed(core: Core) -> list[dict]:
    rows = await asyncio.to_thread(labels.labels_view, core)
    if await labels.settled(core):  # stale rows were recomputed: read the verdicts
        rows = await asyncio.to_thread(labels.labels_view, core)
    return rows


# -- consoles to a machine (docs/console.md) --------------------------------------------------


def console_opened(core: Core, person: Person, *, ref: str, command: list[str],
                   flight: str | None, term: str, rows: int, cols: int,
                   parked: Callable[[str], bool]) -> dict:
    """The console, and how its runner hears of it: ``parked(runner_id)`` (the server's
    dispatcher) says whether its claim is parked now, so the push reaches it at once."""
    session = machine_console.open_console(core, person, ref, command=command, flight_ref=flight,
                                           term=term or "xterm", rows=rows, cols=cols)
    told = parked(session.runner_id)  # read before the push (queued on this loop) answers it
    return {"waiting": machine_console.waiting_sentence(core, session, told), "id": session.id,
            "runner": session.runner_id,
            "runner_name": machine_console.runner_name(core, session),
            "flight": session.flight_id, "state": session.state.value,
            "opened_at": session.opened_at, "join_wait": core.settings.console_join_wait}
