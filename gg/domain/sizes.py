"""Placement by size: a runner takes a flight only while the limits of what it flies fit its
cores and memory. Workers remain a cap of their own (``Block.BUSY``).

A runner's **size** is what it reports in its inventory: ``size`` when its operator set one
(``gg runner up --cpus 2 --memory 8G``, or ``GG_RUNNER_CPUS`` / ``GG_RUNNER_MEMORY``: part of
a host kept for other work), else the host's ``cpu_count`` and ``memory_total``. A runner
that reports neither is never held back by size.

A flight's **size** on a runner is its limits settled by that runner's policy
(:func:`gg.domain.limits.settle`): what it asked, else the policy's defaults. A limit it
neither asked nor got from a default counts as **0** of that resource: such a flight is
bounded by nothing, so nothing can be reserved for it; it never waits for room and takes none
from the flights after it (workers still cap how many fly). Pids are not a size.

A runner's **room** is its size less the sizes of the flights it flies now. Two rules, both
pure, read by the claim (:func:`gg.domain.matching.blockers`), the waiting sentence and
``gg plan`` alike::

    too small   the flight's size is more than the runner's whole size: it never fits there
    no room     the flight's size is more than the runner's room now: it fits when a flight
                there ends (a size of 0 always fits)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Iterable

from gg.domain.limits import Limits, memory_text, policy_limits

RESOURCES = ("memory", "cpus")  # the order a sentence names a missing one in
_EPSILON = 1e-6  # cpus are kept to 3 decimals; a sum of them may be off in the 16th


@dataclass(frozen=True, slots=True)
class Size:
    """Cores and bytes of memory (a runner's, its room, or a flight's)."""

    cpus: float = 0.0
    memory: int = 0

    def __bool__(self) -> bool:
        return self.cpus > 0 or self.memory > 0

    def less(self, other: Size) -> Size:
        return Size(round(self.cpus - other.cpus, 3), self.memory - other.memory)

    def within(self, other: Size) -> bool:
        """Every resource of this size is at most ``other``'s."""
        return self.cpus <= other.cpus + _EPSILON and self.memory <= other.memory

    def of(self, resource: str) -> float:
        return self.cpus if resource == "cpus" else self.memory


def runner_size(inventory: Mapping[str, Any] | None) -> Size | None:
    """A runner's size from its inventory, or None when it reports none."""
    inv = inventory or {}
    given = inv.get("size")
    set_: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
    cpus = _number(set_.get("cpus"), _number(inv.get("cpu_count"), None))
    memory = _number(set_.get("memory"), _number(inv.get("memory_total"), None))
    if cpus is None or memory is None:
        return None
    return Size(round(float(cpus), 3), int(memory))


def _number(value: Any, otherwise: float | None) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
        return value
    return otherwise


@dataclass(frozen=True, slots=True)
class Room:
    """One runner's size, what is free of it now, and its policy's defaults (a flight that
    asks no limit gets them there, so they are its size there)."""

    size: Size
    free: Size
    defaults: Size = Size()

    def size_of(self, asked: Limits | None) -> Size:
        """``asked``'s size here: each limit asked, else the policy's default, else 0. An ask
        over the policy's maximum keeps its size (the runner refuses it on arrival)."""
        if not asked:
            return self.defaults
        return Size(asked.cpus if asked.cpus is not None else self.defaults.cpus,
                    asked.memory if asked.memory is not None else self.defaults.memory)

    def too_small(self, size: Size) -> bool:
        return bool(size) and not size.within(self.size)

    def no_room(self, size: Size) -> bool:
        return bool(size) and not size.within(self.free)


def defaults_of(policy: Mapping[str, Any] | None) -> Size:
    """The size a flight that asks no limit gets from ``policy`` (its defaults, each held under
    its maximum as :func:`gg.domain.limits.settle` holds it)."""
    try:
        defaults, maximums = policy_limits(policy)
    except ValueError:  # a policy whose limits cannot be read limits nothing here
        return Size()
    cpus = defaults.cpus if maximums.cpus is None or defaults.cpus is None \
        else min(defaults.cpus, maximums.cpus)
    memory = defaults.memory if maximums.memory is None or defaults.memory is None \
        else min(defaults.memory, maximums.memory)
    return Size(cpus or 0.0, memory or 0)


def room(inventory: Mapping[str, Any] | None, policy: Mapping[str, Any] | None,
         flying: Iterable[Limits | None] = ()) -> Room | None:
    """A runner's room: its size less the sizes of ``flying`` (the limits each flight it
    flies now asked, None for one that asked none). None: it reports no size."""
    size = runner_size(inventory)
    if size is None:
        return None
    defaults = defaults_of(policy)
    empty = Room(size, size, defaults)
    used = Size()
    for asked in flying:
        one = empty.size_of(asked)
        used = Size(used.cpus + one.cpus, used.memory + one.memory)
    return Room(size, size.less(used), defaults)


# ------------------------------------------------------------------------ the sentences


def amount(resource: str, value: float) -> str:
    """``4G``, ``1.5G``, ``512M`` of memory; ``1.5`` of cores."""
    if resource == "cpus":
        return f"{max(value, 0):g}"
    value = int(max(value, 0))
    if value == 0:
        return "0"
    exact = memory_text(value)
    if exact[-1] in "TGMK" and exact[:-1].isdigit():
        return exact
    for unit, scale in (("T", 1024 ** 4), ("G", 1024 ** 3), ("M", 1024 ** 2)):
        if value >= scale:
            return f"{value / scale:.1f}".rstrip("0").rstrip(".") + unit
    return exact


def wanted(resource: str, value: float) -> str:
    """``8G of memory``, ``1 core``, ``2 cores``, ``1.5 cores``."""
    if resource == "cpus":
        return f"{amount('cpus', value)} core{'' if value == 1 else 's'}"
    return f"{amount('memory', value)} of memory"


def size_text(size: Size) -> str:
    """``2 cores and 8G of memory`` (the resources it has; ``nothing`` for a size of 0)."""
    parts = [wanted(r, size.of(r)) for r in ("cpus", "memory") if size.of(r) > 0]
    return " and ".join(parts) or "nothing"


def free_text(room: Room, want: Size) -> str:
    """``4G of 16G of memory free``, ``1.5 of 4 cores free``: of the resources ``want`` has."""
    parts = [f"{amount(r, room.free.of(r))} of {amount(r, room.size.of(r))} "
             f"{'cores' if r == 'cpus' else 'of memory'}" for r in RESOURCES if want.of(r) > 0]
    return " and ".join(parts) + " free"


@dataclass(frozen=True)
class Short:
    """What a flight lacks on the runners that could otherwise take it: the resource, how
    much it wants, and the runner with the most of it (its name and how much)."""

    resource: str | None  # None: each resource is somewhere, never both on one runner
    want: Size
    most_name: str = ""
    most: float = 0.0

    def sentence(self, *, whole: bool) -> str:
        """``whole``: the runners' whole sizes (it never fits), else what is free now."""
        free = "" if whole else " free"
        if self.resource is None:
            both = f"{wanted('cpus', self.want.cpus)} and {wanted('memory', self.want.memory)}"
            return f"waiting: no runner has {both}{free} at once"
        return (f"waiting: no runner has {wanted(self.resource, self.want.of(self.resource))}"
                f"{free} (most: {amount(self.resource, self.most)} on {self.most_name})")


def short(want: Size, having: list[tuple[str, Size]]) -> Short:
    """Which resource no runner of ``having`` (name, its whole size or its room) has enough
    of for ``want``, memory first, and which of them has the most of it."""
    for resource in RESOURCES:
        need = want.of(resource)
        if need <= 0:
            continue
        if all(size.of(resource) + (_EPSILON if resource == "cpus" else 0) < need
               for _, size in having):
            name, size = max(having, key=lambda h: (h[1].of(resource), _neg(h[0])))
            return Short(resource, want, name, size.of(resource))
    return Short(None, want)


def _neg(name: str) -> tuple[int, ...]:
    """Sorts names backwards, so that of two with the same amount the first name wins."""
    return tuple(-ord(c) for c in name)


def remedy(flight_id: str, want: Size, *, whole: bool, runner: str = "") -> str:
    """Who can act: the runner's owner can end what it flies there (not when it never fits),
    an admin can bring up a bigger runner, the flight's opener can ask for less."""
    flags = " and ".join(f"--{r}" for r in RESOURCES if want.of(r) > 0)
    ask = f"its opener can ask for less (gg cancel {flight_id}, then gg fly with a smaller {flags})"
    bigger = "an admin can bring up a bigger runner (gg runner up on a larger machine)"
    if whole:
        return f"{bigger}; or {ask}"
    where = runner or "RUNNER"
    return (f"wait; or the runner's owner can finish or cancel what {where} flies (gg runner "
            f"show {where}, gg cancel FLIGHT); or {bigger}; or {ask}")
