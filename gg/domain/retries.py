"""Retries of a flight, and when a retry is offered (docs/jobs.md, "Retries and reruns").

A flight opened with ``gg fly --retries N`` (or in an environment whose root envelope sets
``retries:``) may fly up to N more times after an attempt fails. :func:`decide` is THE rule:
a hand-back ``failed`` whose kind (:func:`kind_of`: ``failed``, or ``timed-out`` when its
runner stopped it at its time limit) is among the flight's ``--retry-on`` and with retries
left is not final: the flight goes back to ``ready`` (the same path as a lease that expired:
the next grant is a new attempt at epoch + 1), with a fact saying why ("retry 2 of 3 after
exit 1"). Anything else ends the flight as before. A lease lost MAX_EXPIRIES times, a
cancel, an attended flight not taken and a ``returned`` hand-back are never retries.

``--retry-delay DUR``: the retry stays ``ready`` but is not offered before
:attr:`Decision.offer_at`; :func:`due` is the clock comparison the claim's release of a
delayed retry uses, and :func:`waiting` the sentence ``gg show``, ``gg flights`` and
``gg plan`` read while it waits.

``--retry-elsewhere``: a retry is not offered to the runner of the attempt that failed
while any other runner could take it (:func:`gg.domain.matching.elsewhere`: one that advertises its labels, may
take it where it is placed, is active, online and healthy, busy or not). When no other runner
could, the runner that failed it may take it again.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gg.domain.timeouts import describe

RETRIES_MAX = 10  # retries of one flight, at most
DELAY_MAX = 86400.0  # a retry waits at most a day
FAILED = "failed"  # the command failed (a non-zero exit, or it could not run)
TIMED_OUT = "timed-out"  # its runner stopped it at its time limit (--timeout)
KINDS = (FAILED, TIMED_OUT)
ON_DEFAULT = (FAILED,)
_TIMED_OUT_PREFIX = "timed out"  # gg.domain.timeouts.timed_out_reason


@dataclass(frozen=True)
class Retry:
    """A flight's retry settings: as asked (a field None: not said, the environment's
    default or the built-in one holds) or settled (:func:`settle`: every field set)."""

    retries: int | None = None
    on: tuple[str, ...] | None = None
    delay: float | None = None
    elsewhere: bool | None = None

    def __post_init__(self) -> None:
        if self.on is not None and type(self.on) is not tuple:
            object.__setattr__(self, "on", tuple(self.on))

    @classmethod
    def of(cls, value: Retry | Mapping[str, Any] | None) -> Retry | None:
        """The value, from itself or its wire form (``{"retries", "on", "delay",
        "elsewhere"}``)."""
        if value is None or isinstance(value, Retry):
            return value
        on = value.get("on")
        return cls(retries=value.get("retries"), on=tuple(on) if on is not None else None,
                   delay=value.get("delay"), elsewhere=value.get("elsewhere"))

    def to_wire(self) -> dict[str, Any]:
        return {"retries": self.retries, "on": list(self.on) if self.on is not None else None,
                "delay": self.delay, "elsewhere": self.elsewhere}

    def problem(self) -> str | None:
        """Why no flight can have these settings, in one sentence (None: it can)."""
        n = self.retries
        if n is not None and (isinstance(n, bool) or not isinstance(n, int)
                              or not 0 <= n <= RETRIES_MAX):
            return f"--retries is a whole number from 0 to {RETRIES_MAX} (got {n!r})"
        if self.on is not None:
            if not self.on:
                return f"--retry-on names at least one of {', '.join(KINDS)}"
            bad = [k for k in self.on if k not in KINDS]
            if bad:
                return (f"--retry-on takes {' and '.join(KINDS)} (comma separated), "
                        f"not {bad[0]!r}")
        d = self.delay
        if d is not None:
            if isinstance(d, bool) or not isinstance(d, (int, float)) or not d > 0 \
                    or math.isinf(d) or math.isnan(d):
                return f"--retry-delay must be longer than 0s (got {d!r})"
            if d > DELAY_MAX:
                return f"--retry-delay is at most one day (got {d:g}s)"
        return None

    @property
    def text(self) -> str:
        """As ``gg show`` prints settled settings: ``3 on failed, timed-out, 20s apart``."""
        words = f"{self.retries} on {', '.join(self.on or ON_DEFAULT)}"
        if self.delay:
            words += f", {describe(self.delay)} apart"
        if self.elsewhere:
            words += ", elsewhere"
        return words


def parse_on(text: str) -> tuple[str, ...]:
    """``--retry-on failed,timed-out`` as a tuple (checked by :meth:`Retry.problem`)."""
    return tuple(p.strip() for p in text.split(",") if p.strip())


def settle(asked: Retry | None, default: Retry | None) -> Retry | None:
    """A new flight's settings: each field as asked, else its environment's default, else
    the built-in one (no retries, on ``failed``, no delay, anywhere). None when it has no
    retries (nothing to keep)."""
    asked = asked or Retry()
    default = default or Retry()

    def pick(name: str, builtin: Any) -> Any:
        mine = getattr(asked, name)
        if mine is not None:
            return mine
        theirs = getattr(default, name)
        return theirs if theirs is not None else builtin

    settled = Retry(retries=pick("retries", 0), on=pick("on", ON_DEFAULT),
                    delay=pick("delay", None), elsewhere=bool(pick("elsewhere", False)))
    return settled if settled.retries else None


def kind_of(reason: str | None) -> str:
    """The kind of a ``failed`` hand-back: ``timed-out`` when its runner stopped it at its
    time limit, else ``failed``."""
    return TIMED_OUT if (reason or "").startswith(_TIMED_OUT_PREFIX) else FAILED


def cause(exit_code: int | None, reason: str | None) -> str:
    """How the attempt failed, as the retry's sentence says it: ``after exit 1``, ``after
    timing out``, ``after failing (REASON)``."""
    if kind_of(reason) == TIMED_OUT:
        return "after timing out"
    if exit_code is not None:
        return f"after exit {exit_code}"
    return f"after failing ({reason})" if reason else "after failing"


@dataclass(frozen=True)
class Decision:
    """A failed attempt is retried: the ``number``-th retry of ``of``, offered from
    ``offer_at`` (None: at once), not to ``avoid`` while another runner could take it."""

    number: int
    of: int
    cause: str
    offer_at: float | None = None
    avoid: str | None = None

    @property
    def text(self) -> str:
        """The retry's fact: ``retry 2 of 3 after exit 1``."""
        return f"retry {self.number} of {self.of} {self.cause}"


def decide(retry: Retry | None, retried: int, *, outcome: str, exit_code: int | None,
           reason: str | None, runner_id: str | None, now: float) -> Decision | None:
    """THE rule: whether the attempt just handed back with ``outcome`` is retried
    (``retried``: how many retries the flight had before it). None: it ends the flight."""
    if retry is None or outcome != FAILED or not retry.retries or retried >= retry.retries:
        return None
    if kind_of(reason) not in (retry.on or ON_DEFAULT):
        return None
    offer_at = now + retry.delay if retry.delay else None
    return Decision(retried + 1, retry.retries, cause(exit_code, reason), offer_at,
                    runner_id if retry.elsewhere else None)


def due(offer_at: float | None, now: float) -> bool:
    """Whether a retry delayed until ``offer_at`` may be offered at ``now``."""
    return offer_at is None or offer_at <= now


@dataclass(frozen=True)
class Pending:
    """A flight's retry waiting for its delay (``gg.store.retries`` reads it)."""

    number: int
    of: int
    cause: str
    offer_at: float


def clock(at: float) -> str:
    """A time of day as the waiting sentence names it (the control plane's UTC)."""
    return time.strftime("%H:%M:%S UTC", time.gmtime(at))


def waiting(pending: Pending | None, now: float,
            flight_id: str = "FLIGHT") -> tuple[str, str] | None:
    """(sentence, remedy) of a retry not offered yet, or None once it is due."""
    if pending is None or due(pending.offer_at, now):
        return None
    left = describe(max(1, math.ceil(pending.offer_at - now)))
    return (f"waiting: retry {pending.number} of {pending.of} is offered at "
            f"{clock(pending.offer_at)} (in {left}), {pending.cause}",
            f"wait: it is offered then (or cancel it: gg cancel {flight_id})")
