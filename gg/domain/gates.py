"""Gates: one model for everything that needs a yes before it takes effect.

A gate guards one *subject* (``environment:ui``, ``profile:ui``, ``strategy:ui-pool``,
``runner:r_x/credential:github.com/acme/app``…). It says what it guards and why, and who may
clear it::

    open --clear (by someone allowed)--> cleared
    open --a newer gate on the same subject--> superseded

Who may clear: ``admin`` (a person with the admin role), ``opener`` (the opener of the
flight it holds back, or an admin), ``machine`` (only the runner it concerns, by
confirming the missing item; no person can clear it), ``approver`` (an admin or the person
named in its payload, but never the flight's opener, whatever their role: separation of
duties; see :mod:`gg.domain.approvals`).

A gate that guards a flight nobody will fly any more is closed with status ``rejected`` (its
approval was refused) or ``superseded`` (the flight was cancelled).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gg.domain import approvals
from gg.domain.people import Person

CLEARERS = ("admin", "opener", "machine", "approver")
CLEARER_WORDS = {"admin": "an admin", "opener": "the flight's opener",
                 "machine": "the machine itself", "approver": "an admin"}
KINDS = ("environment", "profile", "strategy", "maintenance", "root", "approval")
STATUSES = ("open", "cleared", "superseded", "rejected")


@dataclass
class Gate:
    id: str
    kind: str
    subject: str
    guards: str
    why: str
    clearer: str
    opened_at: float
    opened_by: str | None = None
    runner_id: str | None = None
    flight_id: str | None = None
    payload: dict[str, Any] = field(default_factory=dict)
    status: str = "open"
    cleared_at: float | None = None
    cleared_by: str | None = None

    @property
    def open(self) -> bool:
        return self.status == "open"

    @property
    def cleared_by_words(self) -> str:
        if self.clearer == "approver":
            return approvals.approver_words(self.payload.get("approver_name"))
        return CLEARER_WORDS.get(self.clearer, self.clearer)


def refusal_to_clear(gate: Gate, *, person: Person | None = None, runner_id: str | None = None,
                     flight_opener: str | None = None) -> str | None:
    """Why this caller may not clear ``gate``, or None when it may."""
    if not gate.open:
        return f"gate {gate.id} is {gate.status} already"
    if gate.clearer == "machine":
        if person is not None:
            return (f"gate {gate.id} can only be cleared by the machine itself, "
                    "when it confirms what is missing")
        if runner_id != gate.runner_id:
            return f"gate {gate.id} belongs to another machine"
        return None
    if person is None:
        return f"gate {gate.id} is cleared by a person, not a machine"
    if gate.clearer == "approver":
        return approvals.refusal_to_approve(
            person, flight_id=gate.flight_id, opener=flight_opener,
            approver=gate.payload.get("approver"), approver_name=gate.payload.get("approver_name"),
            changed_by=gate.payload.get("changed_by"))
    if person.is_admin:
        return None
    if gate.clearer == "opener" and flight_opener is not None and person.id == flight_opener:
        return None
    return f"only {gate.cleared_by_words} may clear gate {gate.id}"
