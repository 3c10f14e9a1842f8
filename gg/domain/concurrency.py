"""Concurrency keys and a flight's grace (SPEC 21, docs/jobs.md).

A **concurrency key** (``gg fly --concurrency KEY[:N]``) limits how many flights with it
fly at once, fleet-wide: at most N (1 unless said). :func:`held` is THE rule: the claim
(:func:`gg.domain.matching.assign`, and the grant's check under the key's lock in
``gg.control.concurrency``), the waiting sentence (:func:`gg.domain.waiting.why_waiting`)
and ``gg plan`` all read it, so an explanation never contradicts dispatch. Each flight is
held to its own N: the number of flights of its key flying now must be below it.

``--cancel-in-progress`` makes a new flight of the key cancel the older ones that have not
ended (waiting or flying); their ended reason names the newer flight (:func:`superseded`).

A flight's **grace** (``gg fly --grace DUR``) is how long its process gets between SIGTERM
and SIGKILL when it is cancelled or timed out: :data:`GRACE_DEFAULT` unless said, at most
:data:`GRACE_MAX`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

KEY_MAX = 200  # characters of a key
LIMIT_MAX = 10_000  # flights of one key at once, at most
GRACE_DEFAULT = 5.0  # seconds between SIGTERM and SIGKILL unless the flight says
GRACE_MAX = 600.0  # ten minutes
# printable, no space and no colon (the colon parts KEY from N)
_KEY = re.compile(r"[^\s:\x00-\x1f\x7f]+")


@dataclass(frozen=True)
class Concurrency:
    """A flight's concurrency key: at most ``limit`` flights with ``key`` fly at once."""

    key: str
    limit: int = 1
    cancel_in_progress: bool = False

    @classmethod
    def of(cls, value: Concurrency | Mapping[str, Any] | None) -> Concurrency | None:
        """The value, from itself or its wire form (``{"key", "limit", "cancel_in_progress"}``)."""
        if value is None or isinstance(value, Concurrency):
            return value
        return cls(key=value["key"], limit=value.get("limit", 1),
                   cancel_in_progress=bool(value.get("cancel_in_progress")))

    def to_wire(self) -> dict[str, Any]:
        return {"key": self.key, "limit": self.limit,
                "cancel_in_progress": self.cancel_in_progress}

    def problem(self) -> str | None:
        return key_problem(self.key, self.limit)

    @property
    def text(self) -> str:
        """As ``gg fly --concurrency`` takes it (and ``gg show`` prints it)."""
        return self.key + (f":{self.limit}" if self.limit != 1 else "")


def key_problem(key: object, limit: object) -> str | None:
    """Why no flight can have this key and limit, in one sentence (None: it can)."""
    if not isinstance(key, str) or not key.strip():
        return "--concurrency needs a key: KEY or KEY:N (e.g. deploy-prod or deploy-prod:2)"
    if len(key) > KEY_MAX:
        return f"--concurrency: a key has at most {KEY_MAX} characters"
    if not _KEY.fullmatch(key):
        return (f"--concurrency: a key has no spaces, colons or control characters "
                f"(got {key!r})")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= LIMIT_MAX:
        return (f"--concurrency KEY:N: N is a whole number from 1 to {LIMIT_MAX} "
                f"(got {limit!r})")
    return None


def parse(text: str, cancel_in_progress: bool = False) -> Concurrency:
    """``KEY`` or ``KEY:N`` as ``gg fly --concurrency`` takes it; ValueError with one
    sentence when it is neither."""
    key, colon, count = text.rpartition(":")
    if not colon:
        key, count = text, "1"
    if not re.fullmatch(r"\s*\d+\s*", count):
        if colon and key and _KEY.fullmatch(key):  # KEY:x: the count is what is wrong
            raise ValueError(f"--concurrency KEY:N: N is a whole number from 1 to {LIMIT_MAX} "
                             f"(got {count!r})")
        raise ValueError(key_problem(text, 1) or f"--concurrency: {text!r} is not KEY or KEY:N")
    value = Concurrency(key, int(count), cancel_in_progress)
    if problem := value.problem():
        raise ValueError(problem)
    return value


def grace_problem(grace: object) -> str | None:
    """Why a flight cannot have this grace (seconds), in one sentence (None: it can)."""
    if isinstance(grace, bool) or not isinstance(grace, (int, float)) or not grace > 0:
        return f"--grace must be longer than 0s (got {grace!r})"
    if grace > GRACE_MAX:
        return (f"--grace is at most {GRACE_MAX / 60:g} minutes: a cancelled flight's process "
                f"is killed by then (got {grace:g}s)")
    return None


@dataclass(frozen=True)
class Held:
    """A flight held back by its key: ``flying`` are the flights of the key flying now."""

    key: str
    limit: int
    flying: tuple[str, ...]

    @property
    def sentence(self) -> str:
        n = len(self.flying)
        shown = ", ".join(self.flying[:3]) + (f" and {n - 3} more" if n > 3 else "")
        return (f"waiting: {n} flight{'s' if n != 1 else ''} with concurrency key {self.key} "
                f"{'are' if n != 1 else 'is'} flying (limit {self.limit}): {shown}")

    @property
    def remedy(self) -> str:
        return (f"wait: it starts when one of them ends (or cancel one: gg cancel "
                f"{self.flying[0] if self.flying else 'FLIGHT'})")


def held(concurrency: Concurrency | None, flying: Sequence[str]) -> Held | None:
    """THE rule: a flight of ``concurrency`` may not start while ``flying`` (the flights of
    its key flying now) number its limit or more; None when it may (or has no key)."""
    if concurrency is None or len(flying) < concurrency.limit:
        return None
    return Held(concurrency.key, concurrency.limit, tuple(flying))


@dataclass
class Keys:
    """The keys of the flights a look reads (flight id -> its key) and who flies with each
    key now (key -> flight ids, the earliest granted first). A matching pass works on a
    :meth:`fork`, which counts the grants it plans as flying."""

    of: Mapping[str, Concurrency] = field(default_factory=dict)
    flying: dict[str, list[str]] = field(default_factory=dict)

    def held(self, flight_id: str) -> Held | None:
        concurrency = self.of.get(flight_id)
        if concurrency is None:
            return None
        return held(concurrency, self.flying.get(concurrency.key, ()))

    def take(self, flight_id: str) -> None:
        """``flight_id`` is planned to fly: it counts against its key from now on."""
        concurrency = self.of.get(flight_id)
        if concurrency is not None:
            self.flying.setdefault(concurrency.key, []).append(flight_id)

    def fork(self) -> Keys:
        return Keys(self.of, {k: list(v) for k, v in self.flying.items()})


def superseded(newer: str, key: str) -> str:
    """The ended reason of a flight cancelled by a newer one of its key
    (``--cancel-in-progress``)."""
    return f"cancelled by newer flight {newer} (concurrency key {key}, --cancel-in-progress)"
