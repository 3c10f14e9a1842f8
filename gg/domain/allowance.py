"""An allowance: how often something may happen, as a token bucket.

A runner's never-seen facts each cost an evaluation of a meaning in a worker process
(gg.control.verdicts), and the workers are few: the control plane lets each runner have its
new facts evaluated ``burst`` times at once and then once every ``every`` seconds, so a
runner that reports new facts on every check-in spends its own allowance and no one
else's. Pure: ``now`` is passed in.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Allowance:
    tokens: float  # whole evaluations that may start now, and a fraction towards the next
    at: float  # when ``tokens`` was counted


def full(burst: int, now: float) -> Allowance:
    return Allowance(float(burst), now)


def refilled(allowance: Allowance, now: float, *, burst: int, every: float) -> Allowance:
    """The allowance at ``now``: one token more for each ``every`` seconds, at most ``burst``."""
    grown = (now - allowance.at) / every if every > 0 else float(burst)
    return Allowance(min(float(burst), allowance.tokens + max(0.0, grown)), now)


def take(allowance: Allowance, now: float, *, burst: int,
         every: float) -> tuple[bool, Allowance]:
    """Spend one token if there is one: ``(True, what is left)``, else ``(False, as is)``."""
    current = refilled(allowance, now, burst=burst, every=every)
    if current.tokens >= 1.0:
        return True, Allowance(current.tokens - 1.0, now)
    return False, current


def next_token_in(allowance: Allowance, now: float, *, burst: int, every: float) -> float:
    """Seconds from ``now`` until one token is there (0 when there is one now)."""
    current = refilled(allowance, now, burst=burst, every=every)
    return 0.0 if current.tokens >= 1.0 else (1.0 - current.tokens) * every
