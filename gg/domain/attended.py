"""Attended flights (SPEC 6): someone is watching, so the runner must take it now or never.

``gg fly --attended --runner R`` is refused at once when R is already flying, and a flight R
has not taken within CLAIM_WAIT of opening ends ``failed`` ("not taken promptly"). Like lease
expiry, that end is decided by comparing the clock with the deadline, never by a timer
having fired: whoever looks first (a claim, a listing, the dispatcher's wake-up) records it.
"""

from __future__ import annotations

from gg.domain.flights import NOT_TAKEN, Flight, Stage

__all__ = ["NOT_TAKEN", "deadline", "due_at", "overdue", "refusal_to_open"]


def due_at(opened_at: float, claim_wait: float) -> float:
    """When an attended flight opened at ``opened_at`` fails if nobody took it."""
    return opened_at + claim_wait


def deadline(flight: Flight, claim_wait: float) -> float | None:
    """When an attended flight that nobody took fails; None for any other flight."""
    if not flight.attended or flight.attempt > 0:
        return None
    return due_at(flight.opened_at, claim_wait)


def overdue(flight: Flight, now: float, claim_wait: float) -> bool:
    due = deadline(flight, claim_wait)
    waiting = flight.stage in (Stage.READY.value, Stage.GATED.value)
    return due is not None and waiting and now >= due


def refusal_to_open(runner_target: str | None, target_name: str | None,
                    flying: list[str]) -> str | None:
    """Why an attended flight may not be opened, or None. ``flying``: the flights the target
    holds live leases on right now."""
    if runner_target is None:
        return "an attended flight needs a runner: gg fly --attended --runner R -- CMD"
    if flying:
        return (f"runner {target_name} is already flying {', '.join(sorted(flying))}; an "
                f"attended flight needs it free now")
    return None
