"""What a pool must do next: one pure function from a snapshot and the clock to a plan.

The control plane answers a maintainer's "what now?" with :func:`plan_pool`, and the
waiting ladder (:mod:`gg.domain.waiting`, rungs 3 and 4) reads the same plan, so the pool a
flight waits on and the sentence it shows can never disagree. Nothing here reads a clock,
a file or the store: the caller passes ``now`` (epoch seconds) and plain dataclasses, so
the module does not depend on the YAML loader either.

A member's life, as the maintainer reports it (``*`` = a state the planner acts on)::

          Start              checks in                takes a lease
    (new) -----> starting --------------> ready* ---------------------> busy
                                          ^   |                           |
                                 back up  |   | Roll* / Replace*          | flight ended,
                                          |   v (stopped; a new member    | lease gone
                                  resetting   (gone)  starts in its place)|
                                          ^                               v
                                          +---------- Reset* --------- dirty*

    any state --process gone--> stopped* --Remove--> (gone)
    ready* / dirty* --Remove--> (gone)    outside active hours, offline, beyond the bounds

Two facts override the reported state, because they are the control plane's own record:
a member that holds a lease is busy whatever its state says, and is never touched; a member
whose flight has ended and that holds no lease (``flight_ended``, or ``busy`` without a
lease) is dirty and must be reset before it takes other work.

Counting, precisely:

- **live** = every member whose state is not ``stopped`` (starting, ready, busy, dirty,
  resetting). ``pool_max`` bounds live members; ``size`` bounds all members the pool holds.
  Every stopped member is removed by the same plan, so after a plan is carried out (in order:
  removals first, starts last) both bounds count the same members: the cap is
  ``min(size, pool_max)``.
- **ready** = ready, online, holding no lease, flight not ended, on the pinned digest, with a
  credential that does not end within ``credential_margin``.
- **warming** = members on their way to ready: starting or resetting ones, and every member
  this plan resets, rolls, replaces or starts.

A plan never starts a member outside active hours, without a pinned digest, or beyond the
cap; it never acts on a leased member or one that is starting or resetting (the maintainer is
in the middle of something with it). Roll, Replace and Reset each stop one member and bring
one up, so they never change the live count; the maintainer must stop before it starts.

Keep warm: the plan starts ``warm + waiting_flights - (ready + warming)`` members (every
waiting flight gets a machine and ``warm`` stay idle for the next ones), cut to the room
under the cap, and to none outside active hours or without a pinned digest. Scale in: ready
idle members beyond ``warm + waiting_flights`` are removed (highest ids first), so a pool
with ``warm: 0`` runs no idle machine once its flights are done.
Outside active hours the pool winds down: stopped and idle (ready, dirty) members are
removed, nothing is reset, rolled, replaced or started, and busy members finish their work.
Without a pinned digest the pool can only shrink: dirty members are removed, not reset.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, ClassVar
from zoneinfo import ZoneInfo

from gg.domain.pool_scaling import Decision, Demand, Scale, Scaled, decide

MEMBER_STATES = ("starting", "ready", "busy", "dirty", "resetting", "stopped")

# A member credential (MEMBER_CREDENTIAL_TTL) is never renewed. An idle member whose
# credential ends within this margin could take a flight it cannot finish, so it is replaced
# instead of being offered work. Half an hour covers an ordinary agent run.
CREDENTIAL_MARGIN = 30 * 60.0

WARMING = "pool_warming"
LIMITED = "pool_limited"

_HOURS = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*-\s*(\d{1,2}):(\d{2})(?:\s+(\S+))?\s*$")


# --------------------------------------------------------------------------- active hours


@dataclass(frozen=True)
class ActiveHours:
    """A daily wall-clock window in one time zone, e.g. 08:00-20:00 Europe/Berlin.

    Wall-clock means the local clock on the wall: 08:00 is 08:00 in summer and in winter.
    The window includes its start minute and excludes its end minute. An end earlier than
    the start crosses midnight (22:00-06:00). On the spring DST day the skipped hour simply
    never happens; on the autumn day the repeated hour is inside (or outside) both times.
    """

    start_minute: int
    end_minute: int  # 1440 stands for 24:00
    tz: str

    def __post_init__(self) -> None:
        if not 0 <= self.start_minute < 1440:
            raise ValueError(f"active hours start at minute {self.start_minute}, outside a day")
        if not 0 <= self.end_minute <= 1440:
            raise ValueError(f"active hours end at minute {self.end_minute}, outside a day")
        if self.start_minute == self.end_minute:
            raise ValueError(
                f"active hours {_clock(self.start_minute)}-{_clock(self.end_minute)} start and "
                "end at the same time; write 00:00-24:00 or leave active-hours out to run "
                "around the clock"
            )
        _zone(self.tz)

    def contains(self, now: float) -> bool:
        """Whether the epoch time ``now`` falls inside the window on the zone's local clock."""
        local = datetime.fromtimestamp(now, _zone(self.tz))
        minute = local.hour * 60 + local.minute
        if self.start_minute < self.end_minute:
            return self.start_minute <= minute < self.end_minute
        return minute >= self.start_minute or minute < self.end_minute

    def __str__(self) -> str:
        return f"{_clock(self.start_minute)}-{_clock(self.end_minute)} {self.tz}"


def parse_active_hours(text: str) -> ActiveHours:
    """``"08:00-20:00 Europe/Berlin"`` -> :class:`ActiveHours`; ValueError in a plain sentence."""
    match = _HOURS.match(str(text))
    if not match:
        raise ValueError(
            f"active-hours {text!r} is not a window; write it as HH:MM-HH:MM ZONE, "
            "e.g. 08:00-20:00 Europe/Berlin"
        )
    sh, sm, eh, em, tz = match.groups()
    if tz is None:
        raise ValueError(
            f"active-hours {text!r} names no time zone; write it as HH:MM-HH:MM ZONE, "
            "e.g. 08:00-20:00 Europe/Berlin"
        )
    start, end = _minute(sh, sm, text, allow_24=False), _minute(eh, em, text, allow_24=True)
    return ActiveHours(start, end, tz)


def _minute(hour: str, minute: str, text: str, *, allow_24: bool) -> int:
    h, m = int(hour), int(minute)
    if m > 59 or h > 24 or (h == 24 and (m or not allow_24)):
        raise ValueError(f"active-hours {text!r} has {hour}:{minute}, which is not a time of day")
    return h * 60 + m


def _clock(minute: int) -> str:
    return f"{minute // 60:02d}:{minute % 60:02d}"


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ValueError, KeyError, OSError):
        raise ValueError(
            f"{name!r} is not a time zone; use an IANA name such as Europe/Berlin or UTC"
        ) from None


# --------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class PoolSpec:
    """The strategy's numbers the planner needs, detached from the YAML that carries them."""

    name: str
    environment: str
    size: int
    warm: int
    pool_max: int
    active_hours: ActiveHours | None = None
    digest: str | None = None  # the pinned image digest, "sha256:…"; None until built/pinned
    scale: Scale | None = None  # grow and shrink from demand (``warm`` is then not used)

    def __post_init__(self) -> None:
        for key in ("size", "warm", "pool_max"):
            if getattr(self, key) < 0:
                raise ValueError(f"pool {self.name}: {key} must not be negative")


@dataclass(frozen=True)
class Member:
    """One member as the store knows it: the maintainer's state plus the control plane's facts."""

    id: str
    state: str
    digest: str | None = None
    leased: bool = False
    flight_ended: bool = False
    credential_expires_at: float | None = None
    online: bool = True
    idle_since: float | None = None  # when a ready member last became ready
    orphaned: bool = False  # its maintainer went silent while another serves the pool

    def __post_init__(self) -> None:
        if self.state not in MEMBER_STATES:
            raise ValueError(
                f"member {self.id} is in state {self.state!r}; "
                f"a member is one of {', '.join(MEMBER_STATES)}"
            )


# --------------------------------------------------------------------------- actions


@dataclass(frozen=True)
class _Action:
    kind: ClassVar[str] = ""

    def as_dict(self) -> dict[str, Any]:
        """The wire shape a maintainer receives: ``{"action": kind, ...fields}``."""
        return {"action": self.kind, **asdict(self)}


@dataclass(frozen=True)
class Remove(_Action):
    """Stop (if needed) and delete the member and its state; ``why`` goes into the attestation."""

    member_id: str
    why: str
    kind: ClassVar[str] = "remove"


@dataclass(frozen=True)
class Reset(_Action):
    """Wipe the member back to ``digest`` and bring it up again with a fresh member code."""

    member_id: str
    digest: str
    kind: ClassVar[str] = "reset"


@dataclass(frozen=True)
class Roll(_Action):
    """Replace an idle member whose image differs from the pinned ``digest``: stop, then start."""

    member_id: str
    digest: str
    kind: ClassVar[str] = "roll"


@dataclass(frozen=True)
class Replace(_Action):
    """Replace an idle member whose credential ends soon (it is never renewed): stop, then start."""

    member_id: str
    digest: str
    kind: ClassVar[str] = "replace"


@dataclass(frozen=True)
class Start(_Action):
    """Start ``count`` new members from ``digest``."""

    count: int
    digest: str
    kind: ClassVar[str] = "start"


Action = Remove | Reset | Roll | Replace | Start


@dataclass(frozen=True)
class PoolPlan:
    """What the maintainer must do, in order, and what flights waiting on the pool read."""

    pool: str
    digest: str | None
    actions: tuple[Action, ...]
    in_hours: bool
    live_before: int  # members not stopped, before the plan
    live_after: int  # members not stopped, once the plan is carried out
    ready: int  # ready members the plan leaves as they are
    warming: int  # on their way to ready, this plan's included (0 outside active hours)
    limit: str | None  # why fewer members start than wanted, e.g. "pool-max 4 reached"
    waiting_code: str | None  # WARMING or LIMITED, None when no flight waits on the pool
    waiting_reason: str | None  # the exact SPEC section 7 sentence
    busy: int = 0  # members holding a lease
    scaling: Decision | None = None  # a pool with ``scale:``: desired before and after, and why

    @property
    def desired(self) -> int | None:
        return self.scaling.desired if self.scaling is not None else None

    @property
    def started(self) -> int:
        return sum(a.count for a in self.actions if isinstance(a, Start))

    @property
    def waiting(self) -> tuple[str, str] | None:
        """``(code, sentence)`` in the shape ``waiting.Context.pool_reason`` takes."""
        if self.waiting_code is None or self.waiting_reason is None:
            return None
        return (self.waiting_code, self.waiting_reason)


# --------------------------------------------------------------------------- the planner

# Which idle members go first when the pool holds more than its cap: those that would need
# work anyway (dirty, stale, credential ending) before a ready one, then by id.
_SHRINK_ORDER = {Reset.kind: 0, Roll.kind: 1, Replace.kind: 2}


def plan_pool(
    pool: PoolSpec,
    members: list[Member],
    waiting_flights: int,
    now: float,
    *,
    credential_margin: float = CREDENTIAL_MARGIN,
    scaled: Scaled | None = None,
) -> PoolPlan:
    """Decide every action for ``pool`` from its members, the flights waiting for its
    environment (ready, unleased, requiring ``environment=pool.environment``) and the time.

    Deterministic: the same inputs in any order give the same plan. Actions come in the order
    the maintainer must carry them out: removals, then resets/rolls/replaces (by member id),
    then one Start.

    A pool with ``scale:`` (``pool.scale``) holds a desired member count instead of keeping
    ``warm`` idle ones: :func:`gg.domain.pool_scaling.decide` moves it from ``scaled`` (the
    last decision) and the demand, the plan starts members up to it and removes the idle
    members the decision names (never a busy, starting or resetting one).
    """
    ordered = sorted(members, key=lambda m: m.id)
    ids = [m.id for m in ordered]
    if len(set(ids)) != len(ids):
        raise ValueError(f"pool {pool.name} lists a member twice")
    in_hours = pool.active_hours is None or pool.active_hours.contains(now)
    digest = pool.digest
    cap = min(pool.size, pool.pool_max)
    bound = f"pool-max {pool.pool_max}" if pool.pool_max <= pool.size else f"size {pool.size}"

    removes: dict[str, str] = {}
    refresh: dict[str, Action] = {}
    kept_ready: list[str] = []
    idle_since: dict[str, float] = {}
    settling = 0
    busy = 0
    live_before = sum(1 for m in ordered if m.state != "stopped")

    for m in ordered:
        condition = _condition(m)
        if condition == "stopped":
            removes[m.id] = "stopped"
        elif condition == "busy":
            busy += 1
        elif condition == "orphaned":
            removes[m.id] = "its maintainer went silent"
        elif condition == "settling":
            settling += 1
        elif not in_hours:
            removes[m.id] = f"outside active hours {pool.active_hours}"
        elif condition == "dirty":
            if digest is None:
                removes[m.id] = "flight ended and no image digest is pinned to reset it to"
            else:
                refresh[m.id] = Reset(m.id, digest)
        elif not m.online:
            removes[m.id] = "offline while idle"
        elif digest is not None and m.digest != digest:
            refresh[m.id] = Roll(m.id, digest)
        elif _credential_ending(m, now, credential_margin):
            if digest is None:
                removes[m.id] = "credential ends soon and no image digest is pinned"
            else:
                refresh[m.id] = Replace(m.id, digest)
        else:
            kept_ready.append(m.id)
            idle_since[m.id] = m.idle_since if m.idle_since is not None else now

    live = live_before - sum(1 for i, why in removes.items() if why != "stopped")
    demand = pool.warm + waiting_flights
    scaling = None
    if pool.scale is not None and in_hours:
        scaling = decide(pool.name, pool.scale, cap, scaled,
                         Demand(waiting=waiting_flights, starting=settling + len(refresh),
                                live=live, idle_since=tuple(sorted(idle_since.items()))), now)
    elif pool.scale is not None:  # outside active hours: no decision, the pool winds down
        held = scaled.desired if scaled is not None else 0
        scaling = Decision(held, held)
    going = set(scaling.going) if scaling is not None else set()

    # Shrink to the cap when the bounds were lowered below what the pool holds, and to the
    # desired count when a scaled pool shrinks (the members its decision names go first).
    target = min(cap, scaling.desired) if scaling is not None else cap
    excess = live - target
    if excess > 0:
        idle = sorted(
            list(refresh) + kept_ready,
            key=lambda i: (-1 if i in going else
                           _SHRINK_ORDER[refresh[i].kind] if i in refresh else 3, i),
        )
        for member_id in idle[:excess]:
            refresh.pop(member_id, None)
            if member_id in kept_ready:
                kept_ready.remove(member_id)
            removes[member_id] = (f"beyond {bound}" if live > cap else
                                  "idle beyond desired" if member_id in going else
                                  "beyond desired")
            live -= 1

    if scaling is None:
        # Scale in: idle ready members beyond what is wanted (``warm`` plus the waiting
        # flights) are removed, so ``warm: 0`` leaves no idle machine running once the work
        # is done.
        for member_id in sorted(kept_ready, reverse=True)[:max(0, len(kept_ready) - demand)]:
            kept_ready.remove(member_id)
            removes[member_id] = f"idle beyond warm {pool.warm}"
            live -= 1
    ready = len(kept_ready)
    coming = (settling if in_hours else 0) + len(refresh)
    if scaling is None:
        want = max(0, demand - ready - coming)
    else:
        want = max(0, scaling.desired - live)
    room = max(0, cap - live)
    start = min(want, room) if (in_hours and digest is not None) else 0
    limit = None
    if want > start:
        if digest is None:
            limit = "no image digest pinned yet"
        elif not in_hours:
            limit = f"outside active hours {pool.active_hours}"
        else:
            limit = f"{bound} reached"
    elif scaling is not None and waiting_flights > ready + coming + start:
        limit = _scale_limit(pool.scale, cap, bound, scaling)
    warming = coming + start

    code = sentence = None
    if waiting_flights > ready:
        if warming > 0:
            code, sentence = WARMING, f"waiting: pool {pool.name} is warming a machine for it"
        else:
            code = LIMITED
            sentence = (
                f"waiting: pool {pool.name}'s limits allow no more machines now "
                f"({limit or f'{bound} reached'})"
            )

    actions: list[Action] = [Remove(i, removes[i]) for i in sorted(removes)]
    actions += [refresh[i] for i in sorted(refresh)]
    if start:
        assert digest is not None
        actions.append(Start(start, digest))
    return PoolPlan(
        pool=pool.name,
        digest=digest,
        actions=tuple(actions),
        in_hours=in_hours,
        live_before=live_before,
        live_after=live + start,
        ready=ready,
        warming=warming,
        limit=limit,
        waiting_code=code,
        waiting_reason=sentence,
        busy=busy,
        scaling=scaling,
    )


def _scale_limit(scale: Scale | None, cap: int, bound: str, scaling: Decision) -> str:
    """Why a scaled pool holds no more members while flights still wait for one."""
    assert scale is not None, "only a scaled pool has a scaling decision"
    if scaling.cooling_until is not None:
        return f"cool-down {scale.cool_down:g} s after the last scaling"
    if scale.max <= cap:
        return f"scale max {scale.max} reached"
    return f"{bound} reached"


def _condition(m: Member) -> str:
    """Collapse state and facts into what the planner acts on (see the module docstring)."""
    if m.leased:
        return "busy"
    if m.state == "stopped":
        return "stopped"
    if m.orphaned:  # its machine is on a silent host: nobody can reset or watch it
        return "orphaned"
    if m.state in ("starting", "resetting"):
        return "settling"
    if m.state in ("busy", "dirty") or m.flight_ended:
        return "dirty"
    return "ready"


def _credential_ending(m: Member, now: float, margin: float) -> bool:
    return m.credential_expires_at is not None and m.credential_expires_at - now <= margin
