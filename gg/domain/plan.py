"""``gg plan F``: everything that must hold before F can start, who can make each true, and
the command that does it (SPEC 7).

The plan reads exactly what the claim and the waiting sentence read: the flight, the
:class:`~gg.domain.matching.Seat` of every runner, and the waiting
:class:`~gg.domain.waiting.Context`. Whether a runner can take the flight is
:func:`~gg.domain.matching.blockers` itself, and the plan carries the
:func:`~gg.domain.waiting.why_waiting` answer for the same inputs, so ``gg plan``,
``gg show`` and the claim can never disagree: the "a runner can take it now" item holds
exactly when some runner has no blocker, which is exactly when the claim would grant it.

Pure: values in, a :class:`Plan` out; ``now`` is passed in.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from gg.domain import approvals, sizes
from gg.domain.flights import Flight, Stage
from gg.domain.matching import (
    PLACEMENT_BLOCKS,
    Block,
    Seat,
    blockers,
    elsewhere,
    placement_blocks,
    service_port,
)
from gg.domain.runners import AdminState
from gg.domain.waiting import (
    PRIORITY,
    Context,
    Waiting,
    ahead_of,
    label_text,
    refuted_holders,
    why_waiting,
)

# Who can make a prerequisite true, in the words SPEC 7 uses.
ADMIN = "an admin"
OPENER = "the flight's opener"
OWNER = "the runner's owner"
MACHINE = "the machine itself"
ANYONE = "anyone who can start a runner"

MAX_CANDIDATES = 3  # runners whose blockers are spelled out when none can take it


@dataclass(frozen=True)
class Way:
    who: str
    command: str | None  # None: nothing to type (the machine does it, or time does)


@dataclass
class Item:
    need: str
    held: bool
    ways: list[Way] = field(default_factory=list)
    note: str | None = None
    parts: list["Item"] = field(default_factory=list)


@dataclass
class Plan:
    flight: str
    stage: str
    startable: bool  # some runner may be offered it right now (the claim's own test)
    waiting: Waiting | None
    items: list[Item]
    state: str | None = None  # for a flight that is not waiting: what it is doing instead

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["waiting"] = self.waiting.sentence if self.waiting else None
        data["remedy"] = self.waiting.remedy if self.waiting else None
        return data


@dataclass(frozen=True)
class PlanFacts:
    """What the plan shows beyond the waiting context (names, the environment, the clock)."""

    now: float = 0.0
    people: dict[str, str] = field(default_factory=dict)  # person id -> name
    environment_meaning: str | None = None  # the flight's environment's meaning in force
    environment_charted: bool = True
    attended_deadline: float | None = None


def build_plan(flight: Flight, seats: list[Seat], ctx: Context | None = None,
               facts: PlanFacts | None = None) -> Plan:
    ctx = ctx or Context()
    facts = facts or PlanFacts()
    waiting = why_waiting(flight, seats, ctx)
    if flight.stage not in (Stage.READY.value, Stage.GATED.value):
        return Plan(flight.id, flight.stage, False, None, [], _state(flight, ctx))
    live = [s for s in seats if s.runner.admin_state != AdminState.RETIRED.value]
    target = next((s for s in live if s.runner.id == flight.runner_target), None)
    items = _gate_items(ctx, flight.id)
    if ctx.quiesced_by is not None:
        items.insert(0, Item("the fleet is not quiesced", False, [Way(ADMIN, "gg fleet resume")],
                             note=f"quiesced by {ctx.quiesced_by}; running work continues"))
    if flight.environment:
        items.append(_environment_item(flight.environment, facts))
    items.extend(Item(f"{missing}", False) for missing in ctx.missing)
    if ctx.held_by is not None:
        items.append(_dependency_item(ctx, facts))
    if ctx.pool_reason is not None:
        items.append(Item("a pool can start a machine for it", False,
                          [Way(ADMIN, "wait, or change the strategy's bounds")],
                          note=ctx.pool_reason[1].removeprefix("waiting: ")))
    if flight.repo:
        items.append(_credential_item(flight.repo, ctx))
    if flight.runner_target is not None:
        items.append(_target_item(flight, target, ctx, facts))
    items.extend(_label_items(flight, live, target))
    placed = _placement_item(flight, live)
    if placed is not None:
        items.append(placed)
    if ctx.concurrency is not None:
        items.append(_concurrency_item(ctx))
    if ctx.retry is not None:  # a retry's --retry-delay (gg.domain.retries.waiting)
        items.append(Item("its retry's delay is over", False, [Way(MACHINE, None)],
                          note=ctx.retry[0].removeprefix("waiting: ")))
    if ctx.elsewhere_from is not None:
        live = _elsewhere(flight, live, ctx)
    capacity = _capacity_item(flight, live, target, facts)
    items.append(capacity)
    startable = (capacity.held and flight.stage == Stage.READY.value
                 and ctx.held is None and ctx.held_by is None and ctx.retry is None)
    if waiting is not None and waiting.code == PRIORITY:  # the same count, the same condition
        behind = ahead_of(flight, [target] if target is not None else live, ctx)
        items.append(Item("no flight of higher priority is ahead of it", False,
                          [Way(MACHINE, None)],
                          note=f"{behind} of higher priority wait for the same runners; "
                               "they start first"))
    if facts.attended_deadline is not None:
        left = facts.attended_deadline - facts.now
        items.append(Item("an attended flight is taken within CLAIM_WAIT of opening", left > 0,
                          note=(f"{max(left, 0):.0f}s left; otherwise it fails as "
                                "not taken promptly")))
    return Plan(flight.id, flight.stage, startable, waiting, items)


def _elsewhere(flight: Flight, live: list[Seat], ctx: Context) -> list[Seat]:
    """--retry-elsewhere: the runner whose attempt failed does not count while another could
    take it (gg.domain.matching.elsewhere, the claim's rule)."""
    if elsewhere(flight, ctx.elsewhere_from, live):
        return [s for s in live if s.runner.id != ctx.elsewhere_from]
    return live


def _concurrency_item(ctx: Context) -> Item:
    """Its concurrency key leaves room (gg.domain.concurrency.held, as the claim reads it)."""
    c = ctx.concurrency
    assert c is not None
    need = (f"no other flight with concurrency key {c.key} is flying" if c.limit == 1 else
            f"fewer than {c.limit} flights with concurrency key {c.key} are flying")
    if ctx.held is None:
        return Item(need, True)
    return Item(need, False, [Way(MACHINE, None), Way(ADMIN, f"gg cancel {ctx.held.flying[0]}")],
                note=ctx.held.sentence.removeprefix("waiting: "))


def _dependency_item(ctx: Context, facts: PlanFacts) -> Item:
    """``--after``: the first dependency not yet landed (ended, with --after-any), and who
    can move it: its opener, and the runner flying it."""
    dep = ctx.held_by
    assert dep is not None
    opener = facts.people.get(dep.opened_by or "", dep.opened_by) or "its opener"
    ways = [Way(f"{dep.id}'s opener ({opener})", f"gg show {dep.id}")]
    if dep.stage == Stage.FLYING.value and dep.lease_runner:
        ways.append(Way(f"runner {_runner_name(ctx, dep.lease_runner)}, flying it", None))
    need = "ended" if ctx.after_any else "landed"
    return Item(f"dependency {dep.named} has {need}", False, ways,
                note=f"it is {dep.stage}" + ("" if ctx.after_any else
                                             "; if it fails, this flight is cancelled"))


def _runner_name(ctx: Context, runner_id: str | None) -> str | None:
    return ctx.runner_names.get(runner_id, runner_id) if runner_id is not None else None


def _state(flight: Flight, ctx: Context) -> str:
    if flight.stage == Stage.FLYING.value:
        name = _runner_name(ctx, flight.lease_runner)
        return f"it is flying on runner {name} (epoch {flight.epoch}); nothing more is needed"
    reason = f" ({flight.ended_reason})" if flight.ended_reason else ""
    return f"it has {flight.stage}{reason}; it will not start again"


def _gate_items(ctx: Context, flight_id: str) -> list[Item]:
    if not ctx.open_gates:
        return [Item("no gate holds it", True)]
    items = []
    for gate in ctx.open_gates:
        machine = gate.cleared_by == MACHINE
        command = f"gg approve {flight_id}" if gate.kind == approvals.KIND \
            else f"gg gate clear {gate.id}"
        way = Way(gate.cleared_by, None if machine else command)
        items.append(Item(f"gate {gate.id} is cleared ({gate.guards})", False, [way],
                          note="it clears when the machine confirms what is missing"
                          if machine else None))
    return items


def _environment_item(name: str, facts: PlanFacts) -> Item:
    if not facts.environment_charted:
        return Item(f"environment {name} is charted", False,
                    [Way(ADMIN, f"gg environment chart {name} --means PREDICATE")])
    if facts.environment_meaning is None:
        return Item(f"environment {name} has a meaning in force", False,
                    [Way(ADMIN, "gg gates (clear its chart gate)")])
    return Item(f"environment {name} is charted and in force", True,
                note=f"meaning: {facts.environment_meaning}")


def _credential_item(repo: str, ctx: Context) -> Item:
    slug = ctx.credential_missing_for
    if slug is None:
        return Item(f"a credential is registered for repository {repo}", True)
    return Item(f"a credential is registered for repository {slug}", False,
                [Way(ANYONE, f"gg credential add --repo {slug}")],
                note="run it on the runner's machine; the secret never leaves it")


def _target_item(flight: Flight, target: Seat | None, ctx: Context, facts: PlanFacts) -> Item:
    reopen = Way(OPENER, f"gg cancel {flight.id}, then gg fly again without --runner")
    if target is None:
        name = _runner_name(ctx, flight.runner_target)
        return Item(f"runner {name} (it was sent to) still exists", False, [reopen])
    name = target.runner.name
    if target.online:
        return Item(f"runner {name} (it was sent to) is checking in", True)
    return Item(f"runner {name} (it was sent to) is checking in", False,
                [Way(_starter(target), f"gg runner up (on {name}'s machine)"), reopen])


def _label_items(flight: Flight, live: list[Seat], target: Seat | None) -> list[Item]:
    if not flight.requires:
        return [Item("a runner is registered", bool(live),
                     [] if live else [Way(ANYONE, "gg runner up")])]
    items = []
    pool = [target] if target is not None else live
    for key, value in sorted(flight.requires.items()):
        pair = f"{key}={value}"
        having = [s.runner.name for s in pool if s.usable_labels.get(key) == value]
        refuted = refuted_holders(pair, pool)
        note = None
        if having:
            note = _names(having)
        elif refuted:
            verb = "states" if len(refuted) == 1 else "state"
            note = f"{_names(refuted)} {verb} it, but the facts refute it: gg runner labels"
        if target is not None:
            name = target.runner.name
            ways = [] if having else [
                Way(_starter(target), f"gg runner up --labels {pair} (on {name}'s machine)"),
                Way(OPENER, f"gg cancel {flight.id}, then gg fly again without --runner")]
            items.append(Item(f"runner {name} advertises {pair}", bool(having), ways, note))
        else:
            ways = [] if having else [Way(ANYONE, f"gg runner up --labels {pair}")]
            items.append(Item(f"a runner advertises {pair}", bool(having), ways, note))
    return items


def _placement_item(flight: Flight, live: list[Seat]) -> Item | None:
    """Whether any runner is in a group that may take it as placed (SPEC 17): said only for
    a flight that names a group or attributes, or whose work is bound, or when some group
    is exclusive."""
    placement = live[0].placement if live else None
    bound = placement.bound_to(flight.environment, flight.repo) if placement else ()
    exclusive = sorted({s.group.name for s in live if s.group.exclusive})
    if flight.group is None and not flight.where and not bound and not exclusive:
        return None
    parts = []
    if flight.group is not None:
        parts.append(f"in group {flight.group}")
    if flight.where:
        parts.append(f"in a group with {label_text(flight.where)}")
    if bound:
        parts.append(f"in a group bound to it ({', '.join(bound)})")
    need = "a runner " + (" and ".join(parts) if parts else "whose group may take it")
    fits = [s.runner.name for s in live
            if not placement_blocks(flight, s.group, s.placement)]
    if fits:
        return Item(need, True, note=_names(fits))
    ways = []
    if flight.group is not None:
        ways.append(Way(ADMIN, f"gg runner group RUNNER {flight.group}"))
    elif bound:
        ways.append(Way(ADMIN, f"gg runner group RUNNER {bound[0]}"))
    if flight.where:
        ways.append(Way(ADMIN, f"gg group set GROUP --attr {label_text(flight.where)}"))
    if not ways and exclusive:
        ways.append(Way(OPENER, f"gg fly --group {exclusive[0]} ..."))
    note = (f"exclusive group{'s' if len(exclusive) > 1 else ''} {', '.join(exclusive)} take "
            "only their own work") if exclusive else None
    return Item(need, False, ways, note)


def _capacity_item(flight: Flight, live: list[Seat], target: Seat | None,
                   facts: PlanFacts) -> Item:
    label = label_text(flight.requires)
    if target is not None:
        need = f"runner {target.runner.name} can take it now"
    elif label:
        need = f"a runner that advertises {label} can take it now"
    else:
        need = "a runner can take it now"
    found = {s.runner.id: blockers(flight, s) for s in live}
    free = [s for s in live if not found[s.runner.id]]
    if free:
        return Item(need, True, note=f"runner {free[0].runner.name} will take it at its next claim")
    # A gated flight is not a want of runners: one that only waits for the items above to
    # hold is capacity enough (the remedy is those items, never "gg runner up").
    waiting_only = [s for s in live if found[s.runner.id] == [Block.NOT_READY]]
    if waiting_only:
        return Item(need.removesuffix(" now"), True,
                    note=f"runner {waiting_only[0].runner.name} will take it once the items "
                         "above hold")
    candidates = [s for s in live if Block.LABELS not in found[s.runner.id]
                  and Block.NOT_TARGET not in found[s.runner.id]
                  and not any(b in PLACEMENT_BLOCKS for b in found[s.runner.id])]
    candidates.sort(key=lambda s: (len(found[s.runner.id]), s.runner.name))
    parts: list[Item | None] = []
    for s in candidates[:MAX_CANDIDATES]:
        parts.extend(_blocker_item(flight, s, block, facts) for block in found[s.runner.id])
    ways = [] if target is not None else [Way(ANYONE, f"gg runner up --labels {label}"
                                              if label else "gg runner up")]
    note = None
    if not candidates:
        note = "no runner advertises everything it requires"
    elif len(candidates) > MAX_CANDIDATES:
        note = f"{len(candidates)} runners advertise it; the {MAX_CANDIDATES} nearest are shown"
    unique = {p.need: p for p in parts if p is not None}  # "the flight is ready" once
    return Item(need, False, ways, note, list(unique.values()))


def _blocker_item(flight: Flight, s: Seat, block: Block, facts: PlanFacts) -> Item | None:
    runner = s.runner
    name = runner.name
    if block is Block.RESERVED:
        owner = facts.people.get(runner.owner, runner.owner) if runner.owner else None
        return Item(f"runner {name} is not reserved for another person", False,
                    [Way(OWNER, f"gg runner release {name}"),
                     Way(ADMIN, f"gg runner release {name}")],
                    note=f"reserved by {owner}")
    if block in (Block.CORDONED, Block.DRAINING, Block.DRAINED):
        return Item(f"runner {name} is active", False, [Way(ADMIN, f"gg runner resume {name}")],
                    note=f"it is {runner.admin_state}")
    if block is Block.GROUP_DRAINING:
        group = s.group.name
        return Item(f"runner {name}'s group {group} is not draining", False,
                    [Way(ADMIN, f"gg group resume {group}")],
                    note=f"drained by {s.group.drain_by}" if s.group.drain_by else None)
    if block is Block.OFFLINE:
        return Item(f"runner {name} is online", False,
                    [Way(_starter(s), f"gg runner up (on {name}'s machine)")],
                    note="it is not checking in")
    if block is Block.DEGRADED:
        return Item(f"runner {name} is healthy", False, [Way(MACHINE, f"gg runner show {name}")],
                    note=f"it is {runner.health}; it clears on the next check-in that meets "
                         "its policy")
    if block is Block.BUSY:
        return Item(f"runner {name} has a free worker slot", False, [Way(MACHINE, None)],
                    note=f"{s.live_leases} of {runner.workers} taken; one frees when a flight "
                         "it holds ends")
    if block in (Block.TOO_SMALL, Block.NO_ROOM):
        return _size_item(flight, s, whole=block is Block.TOO_SMALL)
    if block is Block.NOT_READY:
        return Item("the flight is ready (no gate holds it, nothing is missing)", False)
    if block is Block.PORT_HELD:
        port = service_port(flight)
        holder = s.held_ports.get(port) if port is not None else None
        return Item(f"port {port} is free on runner {name}", False,
                    [Way(ADMIN, f"gg cancel {holder}")],
                    note=f"service {holder} holds it there")
    return None


def _size_item(flight: Flight, s: Seat, *, whole: bool) -> Item:
    """Placement by size (gg.domain.sizes): who can make room on this runner, or a bigger
    one, or a smaller flight."""
    room = s.room
    assert room is not None, "a size blocks only a runner that reports one"
    name = s.runner.name
    want = room.size_of(s.sizes.get(flight.id))
    flags = " and ".join(f"--{r}" for r in sizes.RESOURCES if want.of(r) > 0)
    smaller = Way(OPENER, f"gg cancel {flight.id}, then gg fly with a smaller {flags}")
    bigger = Way(ADMIN, "gg runner up on a larger machine (a bigger runner)")
    if whole:
        return Item(f"runner {name} is as big as {sizes.size_text(want)}", False,
                    [bigger, smaller], note=f"it has {sizes.size_text(room.size)} in all; "
                                            "the flight never starts there")
    ends = Way(OWNER if s.runner.owner else ADMIN,
               f"gg runner show {name}, then gg cancel FLIGHT (or let one land)")
    return Item(f"runner {name} has {sizes.size_text(want)} free", False,
                [Way(MACHINE, None), ends, bigger, smaller],
                note=f"{sizes.free_text(room, want)}; what it flies frees its share when "
                     "it ends")


def _starter(s: Seat) -> str:
    return OWNER if s.runner.owner else ANYONE


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:5])
    more = f" and {len(names) - 5} more" if len(names) > 5 else ""
    return f"runner{'s' if len(names) > 1 else ''} {shown}{more}"
