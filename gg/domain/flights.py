"""Flights and their stages.

::

              gate clears / need met
     gated  ------------------------->  ready  <-----------------------------+
       |                                  |   lease expired (< MAX_EXPIRIES)   |
       |                                  |   or hand-back "returned"          |
       |                            claim |                                    |
       |                                  v                                    |
       |                               flying ---------------------------------+
       |                                  |
       |           hand-back landed / failed, or expired MAX_EXPIRIES times
       |                                  v
       +-----> cancelled            landed | failed        (final: never runs again)

A flight is cancelled from gated, ready or flying. Once a final outcome is accepted the
row never changes stage again; the domain functions below are the only place that says
which transitions exist.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class Stage(str, Enum):
    GATED = "gated"
    READY = "ready"
    FLYING = "flying"
    LANDED = "landed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def final(self) -> bool:
        return self in (Stage.LANDED, Stage.FAILED, Stage.CANCELLED)


STAGES = tuple(s.value for s in Stage)


class Outcome(str, Enum):
    """What a runner says when it hands a flight back."""

    LANDED = "landed"  # work done, exit 0
    FAILED = "failed"  # work ran and failed; not retried
    RETURNED = "returned"  # this machine could not do it; back to ready for another


FACT_KINDS = ("started", "output", "exit", "commit", "pushed", "note", "expired", "returned")


@dataclass
class Flight:
    id: str
    command: list[str]
    opened_by: str
    opened_at: float
    stage: str = Stage.READY.value
    title: str = ""
    environment: str | None = None
    requires: dict[str, str] = field(default_factory=dict)
    runner_target: str | None = None
    attended: bool = False
    repo: str | None = None
    agent: str = "shell"
    kind: str = "work"
    epoch: int = 0
    lease_runner: str | None = None
    lease_granted_at: float | None = None
    lease_expires_at: float | None = None
    attempt: int = 0
    expiries: int = 0
    outcome: str | None = None
    exit_code: int | None = None
    ended_at: float | None = None
    ended_reason: str | None = None
    gates: list[str] = field(default_factory=list)

    @property
    def final(self) -> bool:
        return Stage(self.stage).final


def required_labels(environment: str | None, extra: dict[str, str] | None = None) -> dict[str, str]:
    """A flight in environment X requires the label ``environment=X``."""
    labels = dict(extra or {})
    if environment:
        labels["environment"] = environment
    return labels
