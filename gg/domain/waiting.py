"""Why a flight waits: one sentence and a remedy, from the same blockers the claim uses.

The ladder is SPEC section 7, kept-back reasons first::

    -  the fleet is quiesced (by WHO)                       (SPEC 17: first, always)
    0  gated: an open gate guards it                       (gates arrive with placement;
                                                            an approval gate reads
                                                            "needs approval by WHO")
    -  F (TITLE) is still flying | is still waiting         (--after: its first dependency
                                                            not landed; docs/work-graphs.md)
    -  N flights with concurrency key K are flying (limit L): F, ...
                                                           (gg.domain.concurrency.held:
                                                            the claim's own rule)
    -  retry N of M is offered at HH:MM:SS UTC (in DUR), after exit 1
                                                           (gg.domain.retries.waiting: a
                                                            retry's --retry-delay)
    -  N flights of higher priority are ahead of it          (the matcher's order; said
                                                            only when no free slot is left)
    1  a runner that could take it is reserved for another person
    2  it was sent to runner NAME, which is not checking in
    3  pool POOL is warming a machine for it               (pools hook)
    4  pool POOL's limits allow no more machines now (REASON)
    5  no credential is registered for repository SLUG     (credentials hook)
    -  no runner of group G advertises LABEL               (SPEC 17: groups and bindings;
    -  ENVIRONMENT is bound to group G, and no runner ...   the "no runner advertises"
    -  no runner that advertises LABEL is in a group with   family, after the kept-back
       k=v                                                  rungs)
    -  only runners of exclusive group G could take it, and it does not name that group
    -  port P is held by service F on every runner that could take it
                                                           (a service's --port: one holder
                                                            per runner, docs/services.md)
    -  no runner has 64G of memory (most: 8G on r3)        (gg.domain.sizes: its limits are
                                                            more than any runner's whole size;
                                                            said with the fitness rung, before
                                                            6: it will never start as it is)
    6  every runner that advertises LABEL is STATE
    -  no runner has 8G of memory free (most: 4G on r3)    (gg.domain.sizes: a runner that
       no runner has 2 cores free (most: 1.5 on r3)         could take it now but for what it
                                                            flies; between 6 and 7)
    7  no runner advertises LABEL

Hooks for later rungs are plain values in :class:`Context` so that adding pools or
credentials never changes the shape of the function. It is pure: a snapshot in, a
:class:`Waiting` out.

A flight sent to one runner (``--runner``) reads only that runner's seat, so a caller
explaining many flights may pass just that seat (``Snapshot`` does; a test pins that the
answer is the same). Where SPEC 7 is silent, a flight sent to one runner names it:
``it was sent to runner NAME, which is STATE`` and ``…, which does not advertise LABEL``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gg.domain import approvals, dependencies, sizes
from gg.domain.concurrency import Concurrency, Held
from gg.domain.fitness import unfit
from gg.domain.flights import Flight, Stage
from gg.domain.matching import (
    PLACEMENT_BLOCKS,
    Block,
    Seat,
    ahead,
    blockers,
    elsewhere,
    missing_labels,
    service_port,
)
from gg.domain.runners import AdminState

_STATE_WORDS = (
    (Block.RETIRED, "retired"),
    (Block.CORDONED, "cordoned"),
    (Block.DRAINING, "draining"),
    (Block.DRAINED, "drained"),
    (Block.GROUP_DRAINING, "in a draining group"),
    (Block.OFFLINE, "offline"),
    (Block.DEGRADED, "degraded"),
    (Block.RESERVED, "reserved"),
    (Block.PORT_HELD, "holding its port for another service"),
    (Block.BUSY, "busy"),
)


PRIORITY = "priority"  # the code of the sentence for flights of higher priority ahead
CONCURRENCY = "concurrency"  # the code of the sentence for a flight its key holds back
RETRY_DELAY = "retry_delay"  # the code of the sentence for a retry its delay holds back


@dataclass(frozen=True)
class Waiting:
    code: str
    sentence: str
    remedy: str


@dataclass(frozen=True)
class OpenGate:
    id: str
    guards: str
    cleared_by: str  # who may clear it: "an admin", "the flight's opener", "the machine itself"
    kind: str = ""  # the gate's kind; an ``approval`` gate has its own sentence
    nobody_may: bool = False  # no person exists who may clear it (an approval's only admin)


@dataclass
class Context:
    """Everything beyond runners that the ladder may consult."""

    open_gates: list[OpenGate] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # things the flight needs that do not exist
    pool_reason: tuple[str, str] | None = None  # (code, sentence) from the pool planner
    credential_missing_for: str | None = None  # repository slug with no registered credential
    runner_names: dict[str, str] = field(default_factory=dict)
    # ready flights of higher priority, (flight, how many like it): see matching.ahead
    higher: list[tuple[Flight, int]] = field(default_factory=list)
    quiesced_by: str | None = None  # the fleet is quiesced, by this person (SPEC 17)
    concurrency: Concurrency | None = None  # its concurrency key (gg.domain.concurrency)
    held: Held | None = None  # its key holds it back now: held(concurrency, flying)
    # --after: the first dependency that still holds it back, and whether any ending will do
    held_by: dependencies.Dependency | None = None
    after_any: bool = False
    # a retry's delay holds it back: (sentence, remedy) of gg.domain.retries.waiting
    retry: tuple[str, str] | None = None
    # --retry-elsewhere: the runner whose attempt failed, kept from it while another could
    # take it (gg.domain.matching.elsewhere, as the claim's plan reads it)
    elsewhere_from: str | None = None


def label_text(requires: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(requires.items()))


def _state_word(found: list[Block]) -> str:
    for block, word in _STATE_WORDS:
        if block in found:
            return word
    return "busy"


def why_waiting(flight: Flight, seats: list[Seat], ctx: Context | None = None) -> Waiting | None:
    """The reason ``flight`` is not moving, or None when it is not waiting at all."""
    ctx = ctx or Context()
    if flight.stage not in (Stage.READY.value, Stage.GATED.value):
        return None
    if ctx.quiesced_by is not None:
        return Waiting("quiesced",
                       f"waiting: the fleet is quiesced (by {ctx.quiesced_by}); nothing new "
                       "starts anywhere until it is resumed",
                       "an admin resumes it: gg fleet resume")
    if ctx.open_gates:
        gate = ctx.open_gates[0]
        if gate.kind == approvals.KIND:
            return Waiting("approval", *approvals.waiting(flight.id, gate.cleared_by,
                                                          nobody_may=gate.nobody_may))
        remedy = (f"{gate.cleared_by} clears it when it confirms the item"
                  if gate.cleared_by == "the machine itself"  # maintenance: no person can
                  else f"{gate.cleared_by} can clear it: gg gate clear {gate.id}")
        return Waiting("gated", f"waiting: gate {gate.id} is open ({gate.guards})", remedy)
    if ctx.missing:
        return Waiting("missing", f"waiting: {ctx.missing[0]}", "see gg plan " + flight.id)
    if ctx.held_by is not None:
        return Waiting("dependency", *dependencies.waiting(ctx.held_by, ctx.after_any))
    if ctx.held is not None and flight.stage == Stage.READY.value:
        return Waiting(CONCURRENCY, ctx.held.sentence, ctx.held.remedy)
    if ctx.retry is not None and flight.stage == Stage.READY.value:
        return Waiting(RETRY_DELAY, *ctx.retry)
    # One pass over the fleet: this runs once per distinct kind of waiting flight, and a
    # listing of 10,000 flights over 1,000 runners may ask a few hundred times.
    target_id = flight.runner_target
    retired = AdminState.RETIRED.value  # read once: an enum member's value is a lookup
    live = [s for s in seats if s.runner.admin_state != retired]
    if ctx.elsewhere_from is not None and elsewhere(flight, ctx.elsewhere_from, live):
        live = [s for s in live if s.runner.id != ctx.elsewhere_from]  # the claim's rule
    target = None
    retired_target = None
    if target_id is not None:
        target = next((s for s in live if s.runner.id == target_id), None)
        if target is None:  # not among the live: retired, if it is a seat at all
            retired_target = next((s for s in seats if s.runner.id == target_id), None)
    candidates = live if target_id is None else [target] if target else []
    required = tuple(flight.requires.items())
    if len(required) == 1:  # the common case (an environment): no generator per seat
        (key, value), = required
        advertising = [s for s in candidates if s.usable_labels.get(key) == value]
    else:
        advertising = [s for s in candidates
                       if all(s.usable_labels.get(k) == v for k, v in required)]
    found = {s.runner.id: blockers(flight, s) for s in advertising}
    free = [s for s in advertising if not found[s.runner.id]]
    behind = ahead_of(flight, advertising, ctx)
    if behind and behind >= sum(max(s.runner.workers - s.live_leases, 0) for s in free):
        return Waiting(
            PRIORITY,
            f"waiting: {behind} flight{'s' if behind != 1 else ''} of higher priority "
            f"{'are' if behind != 1 else 'is'} ahead of it",
            "wait: they start first on the runners that could take it",
        )
    if free:
        name = free[0].runner.name
        return Waiting(
            "offerable",
            f"waiting: runner {name} can take it and will at its next claim",
            "wait",
        )
    if any(found[s.runner.id] == [Block.RESERVED] for s in advertising):
        return Waiting(
            "reserved",
            "waiting: a runner that could take it is reserved for another person",
            "ask its owner to release it, or bring up another runner",
        )
    if flight.runner_target is not None and target is None:
        # retired or forgotten: starting it again cannot help, only opening the flight anew
        name = (retired_target.runner.name if retired_target else
                ctx.runner_names.get(flight.runner_target, flight.runner_target))
        gone = "retired" if retired_target else "no longer registered (it was forgotten)"
        return Waiting(
            "target_gone",
            f"waiting: it was sent to runner {name}, which is {gone}",
            "cancel it (gg cancel FLIGHT) and open it again without --runner, or with "
            "--runner naming a runner that checks in (gg runners)",
        )
    if target is not None and not target.online:  # sent to it (a target gone returned above)
        name = target.runner.name
        return Waiting(
            "target_offline",
            f"waiting: it was sent to runner {name}, which is not checking in",
            "start that runner again, or open the flight without --runner",
        )
    if ctx.pool_reason is not None:
        code, sentence = ctx.pool_reason
        remedy = "wait" if code == "pool_warming" else "wait, or change the strategy's bounds"
        return Waiting(code, sentence, remedy)
    if ctx.credential_missing_for is not None:
        slug = ctx.credential_missing_for
        return Waiting(
            "credential_missing",
            f"waiting: no credential is registered for repository {slug}",
            f"gg credential add --repo {slug}",
        )
    label = label_text(flight.requires)
    # groups: runners that advertise it but whose group could never take it as placed
    placed = [s for s in advertising
              if not any(b in PLACEMENT_BLOCKS for b in found[s.runner.id])]
    if advertising and not placed:
        return _placement_waiting(flight, advertising, found, label)
    narrowed = len(placed) < len(advertising)  # some runners are out of its groups' reach
    advertising = placed
    # enrolment: a runner that could never do this work does not count as advertising it
    fit = [s for s in advertising if Block.UNFIT not in found[s.runner.id]]
    if advertising and not fit:
        reason = unfit(flight, advertising[0].runner)
        subject = f"that advertises {label} " if label else ""
        return Waiting(
            "unfit",
            f"waiting: no runner {subject}can take it: {advertising[0].runner.name} cannot "
            f"because {reason}",
            "bring up a runner that can, or change its fleet profile (gg fleet profiles)",
        )
    advertising = fit
    # size: a runner smaller than the flight's limits could never take it either
    sized = [s for s in advertising if Block.TOO_SMALL not in found[s.runner.id]]
    if advertising and not sized:
        return size_waiting(flight, advertising, whole=True)
    advertising = sized
    held = [s for s in advertising if Block.PORT_HELD in found[s.runner.id]]
    if held and len(held) == len(advertising):
        return port_waiting(flight, held, target)
    roomless = [s for s in advertising if found[s.runner.id] == [Block.NO_ROOM]]
    if roomless:  # not every runner is STATE (rung 6): these would take it but for room
        return size_waiting(flight, roomless, whole=False)
    if advertising:
        words = sorted({_state_word(found[s.runner.id]) for s in advertising},
                       key=[w for _, w in _STATE_WORDS].index)
        state = " or ".join(words)
        if target is not None:
            name = target.runner.name
            return Waiting(
                "target_" + words[0],
                f"waiting: it was sent to runner {name}, which is {state}",
                f"resume or fix runner {name} (gg runner show {name}), "
                "or open the flight without --runner",
            )
        subject = f"every runner that advertises {label}" if label else "every runner"
        if (flight.group is not None or narrowed) and words != ["in a draining group"]:
            # not every runner: those it may go to (a draining group is named below anyway)
            names = sorted({s.group.name for s in advertising})
            subject = (f"every runner of group{'s' if len(names) > 1 else ''} "
                       f"{', '.join(names)}" + (f" that advertises {label}" if label else ""))
        if words == ["in a draining group"]:
            groups = sorted({s.group.name for s in advertising})
            return Waiting(
                "all_group_draining",
                f"waiting: {subject} is in a draining group ({', '.join(groups)})",
                f"an admin resumes the group: gg group resume {groups[0]}",
            )
        return Waiting(
            "all_" + words[0].replace("in a draining group", "group_draining"),
            f"waiting: {subject} is {state}",
            "resume, fix, or start one",
        )
    if target is not None:
        lacking = ",".join(missing_labels(flight.requires, target.usable_labels))
        name = target.runner.name
        return Waiting(
            "target_lacks_labels",
            f"waiting: it was sent to runner {name}, which does not advertise {lacking}",
            f"restart runner {name} with --labels {lacking}, or open the flight without "
            "--runner" + _refuted_note(lacking.split(","), [target]),
        )
    if not label:
        return Waiting(
            "no_runner",
            "waiting: no runner is registered yet",
            "bring up a runner: gg runner up",
        )
    lonely = _first_unadvertised(flight.requires, live) or label
    return Waiting(
        "no_runner",
        f"waiting: no runner advertises {lonely}",
        f"bring up a runner that advertises it (gg runner up --labels {lonely}); gg runner labels"
        + _refuted_note(lonely.split(","), live),
    )


def size_waiting(flight: Flight, seats: list[Seat], *, whole: bool) -> Waiting:
    """No runner of ``seats`` has the flight's size: in its whole size (``whole``: it never
    starts as it is), or free now, beside what it flies (gg.domain.sizes)."""
    rooms = [(s.runner.name, s.room) for s in seats if s.room is not None]
    assert rooms, "asked only of seats that a size blocked"
    want = rooms[0][1].size_of(seats[0].sizes.get(flight.id))
    short = sizes.short(want, [(name, room.size if whole else room.free) for name, room in rooms])
    return Waiting("too_small" if whole else "no_room", short.sentence(whole=whole),
                   sizes.remedy(flight.id, want, whole=whole, runner=short.most_name))


def port_waiting(flight: Flight, held: list[Seat], target: Seat | None) -> Waiting:
    """A service whose ``--port`` another service holds on every runner that could take it:
    it waits there, rather than being granted and handed back (docs/services.md)."""
    port = service_port(flight)
    assert port is not None, "asked only of a service whose port is held"
    holders = sorted({s.held_ports[port] for s in held})
    by = f"service{'s' if len(holders) > 1 else ''} {', '.join(holders)}"
    where = (f"on runner {target.runner.name}, which it was sent to" if target is not None
             else "on every runner that could take it")
    return Waiting(
        "port_held",
        f"waiting: port {port} is held by {by} {where}",
        f"wait until {by} ends or moves (gg cancel {holders[0]}), bring up another runner, "
        "or open it again with another --port",
    )


def _placement_waiting(flight: Flight, advertising: list[Seat], found: dict[str, list[Block]],
                       label: str) -> Waiting:
    """Why no runner whose labels fit is in a group that may take ``flight`` (SPEC 17),
    the most fundamental reason first: the group it names, a binding, its ``--where``, and
    last an exclusive group keeping its runners for its own work."""
    having = f"advertises {label}" if label else "is registered"
    rest = advertising
    by = {s.runner.id: found[s.runner.id] for s in advertising}
    if flight.group is not None:
        rest = [s for s in rest if Block.GROUP not in by[s.runner.id]]
        if not rest:
            g = flight.group
            return Waiting(
                "group_none", f"waiting: no runner of group {g} {having}",
                f"bring one up in group {g} (gg fleet enroll PROFILE --group {g}), or move "
                f"one there: gg runner group RUNNER {g}")
    placement = advertising[0].placement
    bound = placement.bound_to(flight.environment, flight.repo)
    if bound:
        rest = [s for s in rest if Block.BINDING not in by[s.runner.id]]
        if not rest:
            where = (f"environment {flight.environment}"
                     if flight.environment and any(b == flight.environment for g in bound
                                                   for b in placement.group(g).bindings)
                     else f"repository {flight.repo}")
            names = ", ".join(bound)
            return Waiting(
                "bound_elsewhere",
                f"waiting: {where} is bound to group{'s' if len(bound) > 1 else ''} {names}, "
                f"and no runner of {'them' if len(bound) > 1 else 'it'} {having}",
                f"bring up a runner in group {bound[0]}, or bind another group to it: "
                f"gg group set GROUP --bind {flight.environment or flight.repo}")
    if flight.where:
        rest = [s for s in rest if Block.WHERE not in by[s.runner.id]]
        if not rest:
            pairs = label_text(flight.where)
            subject = f"that advertises {label} " if label else ""
            return Waiting(
                "where_none",
                f"waiting: no runner {subject}is in a group with {pairs}",
                f"give a group those attributes (gg group set GROUP --attr {pairs}), or open "
                "the flight without --where")
    exclusive = sorted({s.group.name for s in rest if Block.EXCLUSIVE in by[s.runner.id]})
    names = ", ".join(exclusive)
    plural = len(exclusive) > 1
    return Waiting(
        "exclusive",
        f"waiting: only runners of exclusive group{'s' if plural else ''} {names} could take "
        f"it, and it does not name {'those groups' if plural else 'that group'}",
        f"open it with --group {exclusive[0] if exclusive else 'GROUP'}, or bring up a runner "
        "in a group that is not exclusive")


def ahead_of(flight: Flight, seats: list[Seat], ctx: Context) -> int:
    """How many ready flights of higher priority the matcher offers before ``flight`` on the
    runners that could take it (:func:`gg.domain.matching.ahead`)."""
    return ahead(flight, ctx.higher, seats) if ctx.higher else 0


def refuted_holders(pair: str, seats: list[Seat]) -> list[str]:
    """Names of runners that state ``pair`` but whose facts refute it (so it is not used)."""
    key, _, value = pair.partition("=")
    return [s.runner.name for s in seats
            if s.runner.labels.get(key) == value and s.usable_labels.get(key) != value]


def _refuted_note(pairs: list[str], seats: list[Seat]) -> str:
    for pair in pairs:
        names = refuted_holders(pair, seats)
        if names:
            shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
            verb = "states" if len(names) == 1 else "state"
            return f" ({shown} {verb} {pair}, but the facts refute it)"
    return ""


def _first_unadvertised(requires: dict[str, str], seats: list[Seat]) -> str | None:
    for key, value in sorted(requires.items()):
        if not any(s.usable_labels.get(key) == value for s in seats):
            return f"{key}={value}"
    return None


def why_ended(flight_id: str, stage: str, reason: str | None,
              exit_code: int | None) -> Waiting | None:
    """Why a flight that will not run again ended badly, and what to do about it (None for
    a landed flight or one not ended): what ``gg fly --wait`` and ``gg show`` print."""
    if stage == Stage.CANCELLED.value:
        said = f"it was {reason}" if reason and reason.startswith("cancelled") else (
            f"it was cancelled ({reason})" if reason else "it was cancelled")
        return Waiting("cancelled", said, "open it again with gg fly if it is still needed")
    if stage != Stage.FAILED.value:
        return None
    reason = reason or ""
    if reason.startswith("lost "):
        return Waiting("lost", f"it failed: its lease was {reason} (each runner holding it "
                               "stopped renewing)",
                       f"see which runners lost it (gg show {flight_id}) and why they stopped "
                       "(gg runners); then open it again")
    if reason.startswith("not taken"):
        return Waiting("not_taken", f"it failed: {reason} (its runner did not take it in time)",
                       "check that the runner is online and free (gg runner show R), "
                       "then open it again")
    if reason.startswith("timed out"):
        return Waiting("timed_out", f"it failed: it {reason}",
                       "open it again with a longer --timeout, or make the command faster")
    if exit_code is not None:
        detail = f" ({reason})" if reason and reason != f"exit {exit_code}" else ""
        return Waiting("exit", f"it failed: the command exited with {exit_code}{detail}",
                       f"read its output: gg show {flight_id}")
    return Waiting("failed", f"it failed: {reason}" if reason else "it failed",
                   f"read its facts: gg show {flight_id}")
