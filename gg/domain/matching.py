"""Whether a runner may be offered a flight: the six conditions of SPEC section 6, the
placement contract of its group (SPEC section 17), and placement by size (gg.domain.sizes:
the flight's limits fit what the runner has free).

:func:`blockers` is THE claim decision. The claim path offers a flight only when it
returns nothing, and the waiting sentence (``gg show``, ``gg flights``) and ``gg plan`` are
built from the same blockers, so an explanation can never contradict dispatch.

:func:`assign` is the matcher: it reads the ready flights and the seats and returns a plan
(which flight goes to which seat) without writing anything. It offers them in
:func:`order` (priority, then fair share between the people waiting), and :func:`ahead`
counts, from the same order, the flights of higher priority kept before a waiting one. The control plane applies the
plan, each grant as a compare-and-set (``gg.control.leases``); a grant whose flight moved
on meanwhile is dropped, never forced. (Nomad's scheduler/planner split.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Iterable, Mapping, Protocol, TypeVar

from gg.domain.concurrency import Keys
from gg.domain.fitness import unfit
from gg.domain.flights import Flight, Priority, Stage
from gg.domain.groups import OPEN, Group, Placement, selects
from gg.domain.limits import Limits
from gg.domain.runners import AdminState, HealthState, Runner, is_online
from gg.domain.sizes import Room


class Block(StrEnum):
    # Order matters: the first blocker is the most fundamental one.
    QUIESCED = "quiesced"  # the fleet is quiesced: nothing new is offered anywhere
    LABELS = "labels"  # 1. the runner does not advertise every required label
    # its group's placement contract (gg.domain.groups): could never take it as placed
    GROUP = "group"  # the flight names another group
    WHERE = "where"  # the flight selects attributes the runner's group lacks
    BINDING = "binding"  # the flight's environment or repository is bound to other groups
    EXCLUSIVE = "exclusive"  # the runner's group is exclusive and the flight is not its work
    NOT_READY = "not_ready"  # 2. the flight is not ready (gated, flying, ended)
    NOT_TARGET = "not_target"  # 4. opened with --runner for another runner
    RESERVED = "reserved"  # 5. reserved for its owner, and the flight is not the owner's
    RETIRED = "retired"
    CORDONED = "cordoned"  # 6. admin state
    DRAINING = "draining"
    DRAINED = "drained"
    GROUP_DRAINING = "group_draining"  # its group is draining
    OFFLINE = "offline"  # 6. liveness
    DEGRADED = "degraded"  # 6. health
    BUSY = "busy"  # 6. no free worker slot
    PORT_HELD = "port_held"  # a service's --port is held there by another service
    UNFIT = "unfit"  # it could never do this work: profile, agent, host, credential (fitness)
    # placement by size (gg.domain.sizes): its limits are more than the runner's whole size,
    # or more than what the flights it flies now leave free of it
    TOO_SMALL = "too_small"
    NO_ROOM = "no_room"


_ADMIN_BLOCK = {
    AdminState.CORDONED.value: Block.CORDONED,
    AdminState.DRAINING.value: Block.DRAINING,
    AdminState.DRAINED.value: Block.DRAINED,
    AdminState.RETIRED.value: Block.RETIRED,
}


@dataclass(frozen=True)
class Seat:
    """What the matcher needs to know about one runner beyond its row."""

    runner: Runner
    usable_labels: dict[str, str]
    live_leases: int
    online: bool
    group: Group = Group("default")
    placement: Placement = OPEN  # the fleet-wide facts, shared by every seat of a pass
    # --port of each service flying there -> that service's flight id: a runner listens on
    # a service's port itself, exclusively, so another service asking for it must wait
    held_ports: Mapping[int, str] = field(default_factory=dict)
    # placement by size (gg.domain.sizes): the runner's size and what is free of it (None: it
    # reports no size), and the limits the flights of this pass asked (flight id -> limits;
    # one mapping shared by every seat of a pass; a flight absent asked none)
    room: Room | None = None
    sizes: Mapping[str, Limits] = field(default_factory=dict)


def seat(runner: Runner, now: float, offline_after: float, live_leases: int,
         refuted: frozenset[str] = frozenset(), placement: Placement = OPEN,
         held_ports: Mapping[int, str] | None = None, room: Room | None = None) -> Seat:
    usable = {k: v for k, v in runner.labels.items() if f"{k}={v}" not in refuted}
    return Seat(runner, usable, live_leases, is_online(runner, now, offline_after),
                placement.group(runner.group), placement, held_ports or {}, room)


def service_port(flight: Flight) -> int | None:
    """The ``--port`` a service flight asks its runner to listen on, or None."""
    port = (flight.service or {}).get("port") if flight.service else None
    return int(port) if port is not None else None


_READY = Stage.READY.value
_OK = HealthState.OK.value

PLACEMENT_BLOCKS = (Block.GROUP, Block.WHERE, Block.BINDING, Block.EXCLUSIVE)


def placement_blocks(flight: Flight, group: Group, placement: Placement) -> list[Block]:
    """Why a runner of ``group`` could never take ``flight`` as it is placed: it names
    another group, selects attributes the group lacks, is bound to other groups, or the
    group is exclusive and this is not its work. The claim, the waiting sentence, ``gg plan``
    and a group's demand all read this."""
    found: list[Block] = []
    if flight.group is not None and flight.group != group.name:
        found.append(Block.GROUP)
    if flight.where and not selects(flight.where, group):
        found.append(Block.WHERE)
    bound = placement.bound_to(flight.environment, flight.repo)
    if bound and group.name not in bound:
        found.append(Block.BINDING)
    if group.exclusive and not (flight.group == group.name or group.name in bound
                                or selects(flight.where, group)):
        found.append(Block.EXCLUSIVE)
    return found


def missing_labels(required: dict[str, str], usable: dict[str, str]) -> list[str]:
    return [f"{k}={v}" for k, v in sorted(required.items()) if usable.get(k) != v]


def blockers(flight: Flight, seat: Seat) -> list[Block]:
    """Every reason ``seat`` cannot be offered ``flight`` now; empty means offer it."""
    found: list[Block] = []
    runner = seat.runner
    if seat.placement.quiesced:
        found.append(Block.QUIESCED)
    if missing_labels(flight.requires, seat.usable_labels):
        found.append(Block.LABELS)
    if (flight.group is not None or flight.where or seat.group.exclusive
            or seat.placement.has_bindings):
        found.extend(placement_blocks(flight, seat.group, seat.placement))
    if flight.stage != _READY:
        found.append(Block.NOT_READY)
    if flight.runner_target is not None and flight.runner_target != runner.id:
        found.append(Block.NOT_TARGET)
    if runner.reserved and runner.owner != flight.opened_by:
        found.append(Block.RESERVED)
    admin = _ADMIN_BLOCK.get(runner.admin_state)
    if admin is not None:
        found.append(admin)
    if seat.group.draining:
        found.append(Block.GROUP_DRAINING)
    if not seat.online:
        found.append(Block.OFFLINE)
    if runner.health != _OK:  # Runner.healthy, without an enum member's value per call
        found.append(Block.DEGRADED)
    if seat.live_leases >= max(runner.workers, 0):
        found.append(Block.BUSY)
    if unfit(flight, runner) is not None:  # enrolment: gg.domain.fitness
        found.append(Block.UNFIT)
    room = seat.room
    if room is not None:  # placement by size: gg.domain.sizes
        size = room.size_of(seat.sizes.get(flight.id))
        if room.too_small(size):
            found.append(Block.TOO_SMALL)
        elif room.no_room(size):
            found.append(Block.NO_ROOM)
    port = service_port(flight) if seat.held_ports else None
    if port is not None and port in seat.held_ports and seat.held_ports[port] != flight.id:
        found.append(Block.PORT_HELD)
    return found


def offerable(flight: Flight, seat: Seat) -> bool:
    return not blockers(flight, seat)


@dataclass(frozen=True)
class Assignment:
    """One line of a matching plan: offer ``flight`` to ``seat``."""

    flight: Flight
    seat: Seat


_RANK = {p.value: p.rank for p in Priority}  # a look-up per flight, not an enum call


class Queued(Protocol):
    """What :func:`order` reads of a flight: a :class:`Flight` or the forecast's lighter
    tuple of it (``gg.domain.estimates.Waiting``)."""

    @property
    def opened_by(self) -> str: ...
    @property
    def opened_at(self) -> float: ...
    @property
    def priority(self) -> str: ...


Q = TypeVar("Q", bound=Queued)


def order(flights: Iterable[Q], served: Mapping[str, float] | None = None) -> list[Q]:
    """The order the matcher offers ``flights`` in: highest priority first; within a
    priority, round robin between the people who opened them (each person's oldest waiting
    flight, then each one's second oldest, ...), so one person's burst cannot starve another's
    single flight; within a round, the person served longest ago first (``served``: opener
    -> when a flight of theirs was last granted; never served goes first), then the older
    flight."""
    served = served or {}
    given = list(flights)
    turns: dict[tuple[str, str], int] = {}
    keys = []
    opened = [f.opened_at for f in given]
    for i in sorted(range(len(given)), key=opened.__getitem__):  # stable
        f = given[i]
        group = (f.priority, f.opened_by)
        turn = turns[group] = turns.get(group, 0) + 1
        keys.append((_RANK[f.priority], turn, served.get(f.opened_by, -math.inf), opened[i], i))
    keys.sort()  # the last item, the place given, is unique: no two keys tie
    return [given[key[4]] for key in keys]


def assign(flights: Iterable[Flight], seats: list[Seat],
           served: Mapping[str, float] | None = None,
           keys: Keys | None = None,
           avoid: Mapping[str, str] | None = None) -> list[Assignment]:
    """The plan of one matching pass: the flights in :func:`order` (priority, then round
    robin between openers, oldest first within each), each to the first seat (in the order
    given: longest-parked first) that may be offered it, at most one flight per seat.
    ``keys``: the concurrency keys of ``flights`` and who flies with each; a flight its key
    holds back (:func:`gg.domain.concurrency.held`) is offered to no seat, and a flight
    planned counts against its key for the rest of the pass. ``avoid``: flight id -> a runner
    it is not offered to (a retry kept from the runner it failed on, :func:`elsewhere`)."""
    pending = list(seats)
    plan: list[Assignment] = []
    if not pending:
        return plan
    keys = keys.fork() if keys is not None and keys.of else None
    for flight in order(flights, served):
        if keys is not None and keys.held(flight.id) is not None:
            continue
        avoided = avoid.get(flight.id) if avoid else None
        for s in pending:
            if s.runner.id != avoided and offerable(flight, s):
                plan.append(Assignment(flight, s))
                pending.remove(s)
                if keys is not None:
                    keys.take(flight.id)
                break
        if not pending:
            break
    return plan


def _could_take(flight: Flight, s: Seat) -> bool:
    """``s`` may be offered ``flight`` once it has a free slot, and room for its size."""
    return all(b is Block.BUSY or b is Block.NO_ROOM for b in blockers(flight, s))


# What a flight's own limits, service port and concurrency key decide: these differ between
# flights of one kind (gg.store's ready_kinds), so a kind is never ruled out for them.
_PER_FLIGHT = frozenset({Block.TOO_SMALL, Block.NO_ROOM, Block.PORT_HELD})


def any_kind_fits(kinds: Iterable[Flight], seats: Iterable[Seat]) -> bool:
    """Whether some seat could be offered some flight of ``kinds`` (one flight standing for
    each kind of ready flight: requirements, target, opener, repository, agent, placement),
    judged only by what every flight of a kind shares. False means no flight in the queue,
    however deep, is for these seats: the claim need not read further."""
    seats = list(seats)
    return any(not set(blockers(k, s)) - _PER_FLIGHT for k in kinds for s in seats)


def elsewhere(flight: Flight, avoid: str | None, seats: Iterable[Seat]) -> bool:
    """``--retry-elsewhere`` (gg.domain.retries): whether the runner ``avoid``, whose attempt
    failed, is kept from ``flight`` now, because another runner among ``seats`` could take it
    (busy or not: the retry waits for it rather than going back to ``avoid``)."""
    if avoid is None:
        return False
    return any(s.runner.id != avoid and _could_take(flight, s) for s in seats)


def ahead(flight: Flight, ready: Iterable[tuple[Flight, int]], seats: list[Seat]) -> int:
    """How many ready flights of higher priority :func:`order` puts before ``flight`` on a
    runner that could take it: ``ready`` is (flight, how many flights like it) pairs, and a
    pair counts when it is of higher priority and some seat could take both."""
    rank = Priority(flight.priority).rank
    mine = [s for s in seats if _could_take(flight, s)]
    if not mine:
        return 0
    return sum(n for other, n in ready if Priority(other.priority).rank < rank
               and other.stage == Stage.READY.value
               and any(_could_take(other, s) for s in mine))
