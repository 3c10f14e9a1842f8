"""When will a waiting flight start? A forward run of the queue, by the claim's own rules.

:func:`forecast` plays the queue forward once for every ready flight: each runner's slots
free up when the flights they fly end (their elapsed time against the durations of similar
flights, :mod:`gg.domain.durations`), and each freed slot takes the first flight, in the
matcher's :func:`~gg.domain.matching.order`, that :func:`~gg.domain.matching.offerable`
allows on it (the very rules the claim uses, so groups, reservations, labels and fitness
count as they do at the claim). A pool adds the members it is warming (free after its
measured warm-up), its members warm again after each flight, and outside its active hours
it starts nothing before the window opens. Cordoned, draining, drained, offline and degraded
runners take nothing new, so they are not counted.

It never guesses past what it knows. A flight behind an open gate, one no runner (and no pool)
could take, and one whose turn depends on durations nobody has measured yet gets no time,
only a ``basis`` that says why. Times are spread by the variance of the durations on the way
(``low``/``high``: about nine starts in ten should land inside), never by less than a quarter of
the wait.

Pure: :func:`expected_start` answers for one flight; a listing calls :func:`forecast` once
and reads every row from it. A run goes only as far as the last flight its reader needs in the
matcher's order (why that is safe: "the run" below), and it reads the ready flights as
:class:`Waiting` tuples and each class of flights' seats once, so a queue of 10,000 costs tens
of milliseconds, not a Flight and an Estimate per row.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Collection, Iterator, Mapping, NamedTuple, Sequence
from zoneinfo import ZoneInfo

from gg.domain.durations import Summary
from gg.domain.flights import Flight, Stage
from gg.domain.matching import Block, Seat, blockers, order
from gg.domain.pool_planner import ActiveHours
from gg.domain.pools import MEMBER_KIND
from gg.domain.runners import Runner

Z = 1.645  # low/high: the 5th and 95th percentile of a normal spread
# ...and never narrower than this share of the wait (the queue itself moves: flights of
# higher priority arrive, a runner goes away) nor than SPREAD_MIN seconds (a runner's next
# claim, the moment its flight's process starts).
SPREAD_SHARE = 0.25
SPREAD_MIN = 2.0
SOON = 5.0  # seconds: an estimate closer than this reads "in a few seconds"

GATED = "no estimate: it waits behind an open gate, and when that clears is not up to the queue"
NOBODY = "no estimate: no runner that takes work now can take it, and no pool would start one"
AFTER = "no estimate: it runs after other flights (--after), and when they land is not up to the queue"
UNMEASURED = ("no estimate yet: nothing like the flights ahead of it has finished here, so "
              "how long they fly is unknown")
UNWARMED = "no estimate yet: pool {pool} has not warmed a machine yet, so its warm-up is unknown"


@dataclass(frozen=True)
class Estimate:
    """When a waiting flight is expected to start; ``at`` None is no estimate, and then
    ``basis`` says why."""

    at: float | None
    low: float | None
    high: float | None
    basis: str
    ahead: int = 0
    runners: int = 0

    @property
    def known(self) -> bool:
        return self.at is not None


def no_estimate(reason: str) -> Estimate:
    return Estimate(None, None, None, reason)


def kind_of(flight: Flight | Waiting) -> tuple[str, str, str]:
    """What makes flights similar: the same title (which defaults to the command), the same
    environment and the same agent."""
    if isinstance(flight, Waiting):
        return (flight.title, flight.environment or "", flight.agent)
    return (flight.title or " ".join(flight.command)[:120], flight.environment or "",
            flight.agent)


class Waiting(NamedTuple):
    """A ready flight as the run reads it: a listing plays thousands forward, so each is a
    tuple of the fields the matcher and the durations read (labels and ``where`` as sorted
    pairs), not a :class:`Flight`; :func:`as_waiting` makes one of a flight."""

    id: str
    opened_by: str
    opened_at: float
    priority: str
    title: str  # the kind's title: the flight's title, else its command
    # from here on: what the matching rules read (a class of flights, :func:`_class_key`)
    environment: str | None
    agent: str
    requires: tuple[tuple[str, str], ...]
    runner_target: str | None
    repo: str | None
    kind: str
    group: str | None
    where: tuple[tuple[str, str], ...]


def as_waiting(flight: Flight) -> Waiting:
    return Waiting(flight.id, flight.opened_by, flight.opened_at, flight.priority,
                   kind_of(flight)[0], flight.environment, flight.agent,
                   tuple(sorted(flight.requires.items())), flight.runner_target, flight.repo,
                   flight.kind, flight.group, tuple(sorted(flight.where.items())))


@dataclass
class History:
    """Durations of finished flights per kind, and each pool's warm-up."""

    durations: dict[tuple[str, str, str], Summary] = field(default_factory=dict)
    warmups: dict[str, Summary] = field(default_factory=dict)
    # from a runner handing a flight back to its next start, while flights waited
    turnaround: Summary = field(default_factory=Summary)
    _wide: dict[tuple[str, str], Summary | None] = field(default_factory=dict, repr=False)
    # by kind, by id of a summary, and ("between", pool)
    _flies: dict[object, tuple[float, float] | None] = field(default_factory=dict, repr=False)

    def flies(self, flight: Flight | Waiting) -> tuple[float, float] | None:
        """Mean and variance of how long ``flight`` will fly once started (None: unknown)."""
        return self.flies_kind(kind_of(flight))

    def flies_kind(self, kind: tuple[str, str, str]) -> tuple[float, float] | None:
        """The same for a kind; worked out once per kind (the run asks once per flight)."""
        if kind not in self._flies:
            summary = self.of_kind(kind)
            if summary is None:
                self._flies[kind] = None
            else:  # many kinds share their neighbours' summary: worked out once per summary
                if id(summary) not in self._flies:
                    self._flies[id(summary)] = summary.remaining(0.0)
                self._flies[kind] = self._flies[id(summary)]
        return self._flies[kind]

    def between_flights(self, pool: str | None) -> tuple[float, float] | None:
        """Mean and variance of a runner's turnaround (``pool`` None) or of a pool's warm-up;
        None when not measured. Worked out once: the run asks after every flight."""
        key = ("between", pool)
        if key not in self._flies:
            summary = self.turnaround if pool is None else self.warmups.get(pool)
            self._flies[key] = (summary.remaining(0.0) if summary is not None
                                and summary.count > 0 else None)
        return self._flies[key]

    def of(self, flight: Flight | Waiting) -> Summary | None:
        return self.of_kind(kind_of(flight))

    def of_kind(self, kind: tuple[str, str, str]) -> Summary | None:
        """The durations of flights of ``kind``: its own, else every kind of its
        environment and agent, else none (unknown)."""
        own = self.durations.get(kind)
        if own is not None and own.count > 0:
            return own
        wide = kind[1:]
        if wide not in self._wide:
            found = [s for k, s in self.durations.items() if k[1:] == wide]
            self._wide[wide] = Summary.merged(found) if found else None
        return self._wide[wide]


@dataclass(frozen=True)
class PoolOutlook:
    """What a pool will do for the flights waiting on its environment."""

    name: str
    environment: str
    members: frozenset[str] = frozenset()  # runner ids of its members: they warm after a flight
    warming_since: tuple[float, ...] = ()  # one per member on its way (or planned to start now)
    later: int = 0  # members it would start once its active hours open
    active_hours: ActiveHours | None = None


def pool_outlook(name: str, environment: str, *, in_hours: bool, warming: int,
                 settling_since: list[float], cap: int, waiting: int, members: frozenset[str],
                 active_hours: ActiveHours | None, now: float) -> PoolOutlook:
    """A pool's outlook from its plan (``warming``: members on their way, this plan's
    starts included; ``settling_since``: when each member already starting began)."""
    if in_hours:
        since = sorted(settling_since)[:warming]
        since += [now] * (warming - len(since))
        return PoolOutlook(name, environment, members, tuple(since), 0, active_hours)
    return PoolOutlook(name, environment, members, (), min(cap, waiting), active_hours)


@dataclass
class Queue:
    """The ready flights (the matcher's candidates), the flying ones, and when each opener
    was last served (the matcher's fair share)."""

    ready: list[Flight] | list[Waiting]
    flying: list[Flight] = field(default_factory=list)
    served: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class _Played:
    """What one run of the queue found, by place in the matcher's order (an estimate is made
    of it only when a row is read)."""

    rank: dict[str, int]  # every ready flight -> its place in the matcher's order
    ids: list[str]  # the flights played forward (places 0 .. horizon), by place
    class_of: list[int]
    at: list[float | None]  # when each place starts (None: the run never reached it)
    var: list[float]
    ahead: list[int]
    runners: list[int]  # by class: the seats that could take it
    reason: list[str]  # by class: why one the run never reached has no time


class Forecast:
    """The ready flights' estimates from one run of the queue, as far as the run went: the
    flights at places ``0 .. horizon`` of the matcher's order (all of them unless the run
    was asked for some only; those behind cannot change the start of those ahead)."""

    def __init__(self, played: _Played, now: float) -> None:
        self._played = played
        self.now = now
        self.estimates: Mapping[str, Estimate] = _Estimates(self)

    @property
    def horizon(self) -> int:
        return len(self._played.ids) - 1

    @property
    def played(self) -> list[str]:
        """The flights the run played forward, in the matcher's order."""
        return self._played.ids

    def covers(self, flight_ids: Collection[str] | None) -> bool:
        """Whether this run answers for every one of ``flight_ids`` (None: every ready
        flight); one that is not a ready flight of its queue has nothing to answer."""
        rank, horizon = self._played.rank, self.horizon
        if flight_ids is None:
            return horizon == len(rank) - 1
        return all(rank.get(fid, -1) <= horizon for fid in flight_ids)

    def get(self, flight_id: str) -> Estimate | None:
        """The estimate of a ready flight of the run's queue; None for any other flight."""
        p = self._played
        place = p.rank.get(flight_id)
        if place is None:
            return None
        if place > self.horizon:
            raise ValueError(f"flight {flight_id} lies behind the run's horizon")
        k, t = p.class_of[place], p.at[place]
        if t is None:
            return no_estimate(p.reason[k])
        var, ahead, runners = p.var[place], p.ahead[place], p.runners[k]
        spread = max(Z * math.sqrt(var), SPREAD_SHARE * (t - self.now), SPREAD_MIN)
        return Estimate(t, max(self.now, t - spread), t + spread, _basis(ahead, runners),
                        ahead, runners)

    def of(self, flight: Flight, gated: bool = False) -> Estimate | None:
        """The estimate of ``flight``; None when it is not waiting."""
        if flight.stage == Stage.GATED.value or gated:
            return no_estimate(GATED)
        if flight.stage != Stage.READY.value:
            return None
        return self.get(flight.id) or no_estimate(NOBODY)

    def longest(self, environment_of: Mapping[str, str]) -> dict[str, float]:
        """Environment -> the longest estimated wait (seconds from now) among its flights."""
        out: dict[str, float] = {}
        for fid, t in zip(self._played.ids, self._played.at, strict=True):
            if t is not None:
                env = environment_of.get(fid, "")
                out[env] = max(out.get(env, 0.0), t - self.now)
        return out


class _Estimates(Mapping[str, Estimate]):
    """Flight id -> estimate of every flight the run played forward, made when read."""

    def __init__(self, forecast: Forecast) -> None:
        self._forecast = forecast

    def __getitem__(self, flight_id: str) -> Estimate:
        rank = self._forecast._played.rank.get(flight_id)
        if rank is None or rank > self._forecast.horizon:
            raise KeyError(flight_id)
        found = self._forecast.get(flight_id)
        if found is None:
            raise KeyError(flight_id)
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._forecast._played.ids)

    def __len__(self) -> int:
        return len(self._forecast._played.ids)


def expected_start(flight: Flight, queue: Queue, seats: list[Seat], history: History,
                   pools: list[PoolOutlook], now: float) -> Estimate | None:
    """When ``flight`` is expected to start (None: it is not waiting). The run stops at
    ``flight``: the ones behind it in the matcher's order cannot change its start."""
    ready = queue.ready if any(f.id == flight.id for f in queue.ready) else [
        *queue.ready, flight] if flight.stage == Stage.READY.value else queue.ready
    return forecast(replace(queue, ready=ready), seats, history, pools, now,
                    needed=(flight.id,)).of(flight)


# --------------------------------------------------------------------------- the run
#
# Why a run may stop at the last flight the reader needs (place P in the matcher's order):
# a freed slot takes the first flight at the head of the classes it may take. Played with
# only the places up to P, a slot whose classes hold nothing up to P takes nothing; played
# with every place, it takes one behind P. Either way no flight up to P moves: the heads
# of its classes are already past P and heads only go forward, so that slot never takes a
# flight up to P again; nor does it change another slot's choice (a class whose head is
# past P loses to any head up to P) or count as "ahead" of one (its classes hold no flight
# up to P any more). Slots are popped in the same order (ties keep their order of
# arrival). Priorities, openers' turns, groups, reservations, pools, active hours and
# drains all act through the order, the classes or the seats, which the cut leaves alone.


def _class_key(w: Waiting, reservers: frozenset[str]) -> tuple[object, ...]:
    """Flights the matching rules cannot tell apart on any seat share one class: the same
    environment, agent, labels, target, repository, kind, group and ``where`` (the fields
    of :class:`Waiting` from ``environment`` on), and the same opener where it reserved a
    runner."""
    return (w[5:], w[1] if w[1] in reservers else None)


def forecast(queue: Queue, seats: list[Seat], history: History, pools: list[PoolOutlook],
             now: float, *, needed: Collection[str] | None = None) -> Forecast:
    """Play the queue forward once: every ready flight's estimate, or with ``needed`` only
    as far as the last of those flights in the matcher's order (the same answers for them
    and for every flight ahead of them)."""
    reservers = frozenset(s.runner.owner for s in seats if s.runner.reserved and s.runner.owner)
    ordered = order([f if isinstance(f, Waiting) else as_waiting(f) for f in queue.ready],
                    queue.served)
    rank = {w.id: i for i, w in enumerate(ordered)}
    if needed is not None:
        del ordered[max((rank[i] for i in needed if i in rank), default=-1) + 1:]
    index: dict[tuple[object, ...], int] = {}
    members: list[list[int]] = []  # by class: places in ``ordered``, oldest turn first
    sample: list[Waiting] = []
    class_of: list[int] = []
    for place, w in enumerate(ordered):
        key = _class_key(w, reservers)
        k = index.get(key)
        if k is None:
            k = index[key] = len(members)
            members.append([])
            sample.append(w)
        members[k].append(place)
        class_of.append(k)
    n, n_classes = len(ordered), len(members)
    member_pool = {rid: p for p in pools for rid in p.members}

    # Every seat that could ever free a slot, and which classes each may take.
    all_seats: list[Seat] = list(seats)
    pools_of_seat: list[PoolOutlook | None] = [member_pool.get(s.runner.id) for s in seats]
    heap: list[tuple[float, float, int, int]] = []  # (free at, variance, tie, seat)
    unknown: dict[int, str] = {}
    tie = 0
    for p in pools:
        starts = [(since, False) for since in p.warming_since]
        if p.later and p.active_hours is not None:
            opening = next_opening(p.active_hours, now)
            starts += [(opening, True)] * p.later
        for i, (since, _) in enumerate(starts):
            runner = Runner(id=f"{p.name}#{i}", name=f"a new member of pool {p.name}",
                            labels={"environment": p.environment}, kind=MEMBER_KIND,
                            last_seen_at=now)
            all_seats.append(Seat(runner, dict(runner.labels), 0, True))
            pools_of_seat.append(p)
            warm = history.warmups.get(p.name)
            si = len(all_seats) - 1
            if warm is None or warm.count <= 0:
                unknown[si] = UNWARMED.format(pool=p.name)
                continue
            mean, var = warm.remaining(max(now - since, 0.0))
            heapq.heappush(heap, (max(since, now) + mean, var, tie, si))
            tie += 1
    takes = _takes(all_seats, sample, reservers) if n else [[] for _ in all_seats]
    runners = [0] * n_classes
    for ks in takes:
        for k in ks:
            runners[k] += 1

    # The slots of real seats: free now, or when the flight each one flies ends.
    flying_on: dict[str, list[Flight]] = {}
    for f in queue.flying:
        if f.lease_runner:
            flying_on.setdefault(f.lease_runner, []).append(f)
    for si, s in enumerate(seats):
        if not takes[si]:
            continue
        held = flying_on.get(s.runner.id, [])
        for f in held[:max(s.runner.workers, 0)]:
            summary = history.of(f)
            if summary is None:
                unknown[si] = UNMEASURED
                continue
            mean, var = summary.remaining(max(now - (f.lease_granted_at or now), 0.0))
            pool = pools_of_seat[si]
            t, var = _after_flight(pool, history, now + mean, var)
            if t is None:  # only a pool's member waits to warm
                unknown[si] = UNWARMED.format(pool=pool.name if pool is not None else "")
                continue
            heapq.heappush(heap, (t, var, tie, si))
            tie += 1
        for _ in range(max(s.runner.workers - max(len(held), s.live_leases), 0)):
            heapq.heappush(heap, (now, 0.0, tie, si))
            tie += 1

    heads = [0] * n_classes
    head = [m[0] for m in members]  # by class: the place of its next flight (n: none left)
    started = [0] * n_classes  # flights started so far on seats that take each class
    at: list[float | None] = [None] * n
    var_at = [0.0] * n
    ahead_at = [0] * n
    flies = history.flies_kind
    known: dict[tuple[str, str, str], tuple[float, float] | None] = {}  # None: unknown
    gap = history.between_flights(None)
    pop, push = heapq.heappop, heapq.heappush
    left = n
    while heap and left:
        t, var, _, si = pop(heap)
        best, place = -1, n
        seat_takes = takes[si]
        for k in seat_takes:
            if head[k] < place:
                best, place = k, head[k]
        if best < 0:
            continue  # nothing left this seat may take: it frees no one
        h = heads[best] = heads[best] + 1
        m = members[best]
        head[best] = m[h] if h < len(m) else n
        left -= 1
        ahead_at[place] = started[best]
        for k in seat_takes:
            started[k] += 1
        at[place], var_at[place] = t, var
        w = ordered[place]
        kind = (w[4], w[5] or "", w[6])  # kind_of: title, environment, agent
        took = known[kind] if kind in known else known.setdefault(kind, flies(kind))
        if took is None:
            unknown[si] = UNMEASURED
            continue
        end, end_var = t + took[0], var + took[1]
        pool = pools_of_seat[si]
        if pool is None:  # _after_flight without a pool, inline: the run's busiest line
            if gap is not None:
                end, end_var = end + gap[0], end_var + gap[1]
        else:
            warmed, end_var = _after_flight(pool, history, end, end_var)
            if warmed is None:
                unknown[si] = UNWARMED.format(pool=pool.name)
                continue
            end = warmed
        push(heap, (end, end_var, tie, si))
        tie += 1

    reason = [""] * n_classes  # by class: why a seat that could take it has no time
    for si in sorted(unknown):
        for k in takes[si]:
            reason[k] = reason[k] or unknown[si]
    reason = [r or NOBODY for r in reason]
    return Forecast(_Played(rank, [w.id for w in ordered], class_of, at, var_at, ahead_at,
                            runners, reason), now)


def _as_flight(w: Waiting) -> Flight:
    """A class's sample as a flight, for the matching rules."""
    return Flight(id=w.id, command=[], opened_by=w.opened_by, opened_at=w.opened_at,
                  title=w.title, environment=w.environment, requires=dict(w.requires),
                  runner_target=w.runner_target, repo=w.repo, agent=w.agent, kind=w.kind,
                  priority=w.priority, group=w.group, where=dict(w.where))


def _takes(seats: list[Seat], sample: list[Waiting],
           reservers: frozenset[str]) -> list[list[int]]:
    """For each seat (once it has a free slot), the classes of flights the matcher may offer it:
    worked out once per class, not per flight. A class sent to one runner is tried on that
    runner only, and only the seats holding every label a class requires are asked (an
    index of the seats by label): ``offerable`` would refuse the others. A class sent to a
    runner fares there as the same flights sent anywhere do (the target is the only field
    told apart), so each seat answers once for both."""
    index = {s.runner.id: i for i, s in enumerate(seats)}
    by_label: dict[tuple[str, str], set[int]] = {}
    for i, s in enumerate(seats):
        for item in s.usable_labels.items():
            by_label.setdefault(item, set()).add(i)
    everyone = range(len(seats))
    takes: list[list[int]] = [[] for _ in seats]
    # (the class but its target, seat) -> may take it
    answered: dict[tuple[object, ...], bool] = {}
    for k, w in enumerate(sample):
        if w.runner_target is not None:
            target = index.get(w.runner_target)
            candidates: Sequence[int] = [] if target is None else [target]
        elif w.requires:
            holding = sorted((by_label.get(item, set()) for item in w.requires), key=len)
            candidates = sorted(holding[0].intersection(*holding[1:]))
        else:
            candidates = everyone
        untargeted = (w[5:8], w[9:], w[1] if w[1] in reservers else None)
        f = None
        for i in candidates:
            ok = answered.get((untargeted, i))
            if ok is None:
                f = f or _as_flight(w)
                ok = answered[(untargeted, i)] = _could_take(f, seats[i])
            if ok:
                takes[i].append(k)
    return takes


def _could_take(flight: Flight, s: Seat) -> bool:
    """``offerable`` once the seat has a free slot: nothing but its leases in the way."""
    return s.runner.workers > 0 and all(b is Block.BUSY for b in blockers(flight, s))


def _after_flight(pool: PoolOutlook | None, history: History, end: float,
                  var: float) -> tuple[float | None, float]:
    """When a slot takes its next flight after one ending at ``end``: after the runner's
    turnaround (hand-back to next start, as measured), and for a pool's member after it has
    warmed again (inside the pool's active hours)."""
    gap = history.between_flights(None)
    if gap is not None:
        end, var = end + gap[0], var + gap[1]
    if pool is None:
        return end, var
    warm = history.between_flights(pool.name)
    if warm is None:
        return None, var
    if pool.active_hours is not None and not pool.active_hours.contains(end):
        end = next_opening(pool.active_hours, end)
    return end + warm[0], var + warm[1]


def next_opening(hours: ActiveHours, now: float) -> float:
    """The next time at or after ``now`` when ``hours`` opens (``now`` if it is open)."""
    if hours.contains(now):
        return now
    zone = ZoneInfo(hours.tz)
    local = datetime.fromtimestamp(now, zone)
    start = local.replace(hour=hours.start_minute // 60, minute=hours.start_minute % 60,
                          second=0, microsecond=0)
    if start <= local:
        start = (start + timedelta(days=1)).replace(tzinfo=zone)
    return start.timestamp()


# --------------------------------------------------------------------------- what people read


def _basis(ahead: int, runners: int) -> str:
    return (f"{ahead} flight{'s' if ahead != 1 else ''} ahead on {runners} "
            f"runner{'s' if runners != 1 else ''}")


def in_words(seconds: float) -> str:
    """``~40 s``, ``~3 min``, ``~2 h 10 min``."""
    if seconds < 60:
        return f"~{max(int(round(seconds)), 1)} s"
    if seconds < 90 * 60:
        return f"~{int(round(seconds / 60))} min"
    hours, minutes = divmod(int(round(seconds / 60)), 60)
    return f"~{hours} h" + (f" {minutes} min" if minutes else "")


def sentence(estimate: Estimate | None, now: float) -> str | None:
    """``expected to start in ~3 min (2 flights ahead on 2 runners)``; None without one."""
    if estimate is None or estimate.at is None:
        return None
    wait = estimate.at - now
    when = "in a few seconds" if wait < SOON else f"in {in_words(wait)}"
    return f"expected to start {when} ({estimate.basis})"


# --------------------------------------------------------------------------- checked afterwards


MOVED_MIN = 1.0  # seconds: an estimate closer than this to the one shown before is the same
MOVED_SHARE = 0.05  # ... or closer than this share of the wait still ahead


def moved(before: tuple[float, float, float] | None, now_said: tuple[float, float, float],
          now: float) -> bool:
    """Whether an estimate (at, low, high) shown ``now`` says something new beside the one
    shown before (None: none was): any of its three times moved by more than a second, or a
    twentieth of the wait ahead. One that did not keeps the moment it was first shown, so a
    person refreshing a page is judged on what they saw first."""
    if before is None:
        return True
    slack = max(MOVED_MIN, (now_said[0] - now) * MOVED_SHARE)
    return any(abs(x - y) > slack for x, y in zip(now_said, before, strict=True))


def accuracy(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """How the estimates flights started with compared with their starts: ``rows`` of
    ``at``, ``low``, ``high``, ``estimated_at`` and ``started_at``. The error is
    ``|started_at - at|``; the wait is ``started_at - estimated_at`` (what was still to come
    when the estimate was shown)."""
    errors = sorted(abs(r["started_at"] - r["at"]) for r in rows)
    waits = sorted(max(r["started_at"] - r["estimated_at"], 0.0) for r in rows)
    inside = sum(1 for r in rows if r["low"] - 1e-6 <= r["started_at"] <= r["high"] + 1e-6)
    n = len(rows)
    return {"starts": n,
            "median_error": _quantile(errors, 0.5), "p90_error": _quantile(errors, 0.9),
            "median_wait": _quantile(waits, 0.5),
            "inside": inside, "inside_share": inside / n if n else None}


def _quantile(values: list[float], q: float) -> float | None:
    """The ``q`` quantile of sorted ``values`` (nearest rank); None when there are none."""
    if not values:
        return None
    return values[min(len(values) - 1, max(0, math.ceil(q * len(values)) - 1))]


def accuracy_sentence(report: dict[str, Any]) -> str:
    """One line for ``gg estimate accuracy``."""
    n = report["starts"]
    if not n:
        return "no flight has started with an estimate in this period"
    def said(seconds: float) -> str:
        return f"{seconds:.1f} s" if seconds < 60 else in_words(seconds).lstrip("~")

    return (f"{n} start{'s' if n != 1 else ''} with an estimate: median error "
            f"{said(report['median_error'])}, p90 error "
            f"{said(report['p90_error'])}; {report['inside']} of {n} "
            f"({report['inside_share']:.0%}) started inside the range given")
