"""Answers about flights: listing rows, one flight, its facts, its plan.

Stages and outcomes cross the wire as their values (``ready``, ``landed``...).
"""

from __future__ import annotations

from typing import Any

from gg.api.schemas import Answer
from gg.domain.flights import Priority, Stage


class FlightLease(Answer):
    runner: str | None = None
    epoch: int
    expires_at: float | None = None


class FlightRow(Answer):
    """A row of ``gg flights``: the flight's record, who holds it, and why it waits."""
    id: str
    command: list[str]
    opened_by: str
    opened_at: float
    stage: Stage
    title: str = ""
    environment: str | None = None
    requires: dict[str, str] = {}
    runner_target: str | None = None
    attended: bool = False
    repo: str | None = None
    agent: str = "shell"
    kind: str = "work"
    priority: Priority = Priority.NORMAL
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
    gates: list[str] = []
    timeout: float | None = None  # seconds each attempt may run (None: no limit)
    output_limit: int | None = None
    output_bytes: int = 0
    # what people are shown beside the record
    runner: str | None = None
    runner_name: str | None = None
    opened_by_name: str | None = None
    waiting: str | None = None  # why it is not flying yet, in one sentence
    remedy: str | None = None  # what to do about why it waits, or why it ended badly
    ended: str | None = None  # why a failed or cancelled flight ended, in one sentence
    lease: FlightLease | None = None


class FlightFact(Answer):
    seq: int
    flight_id: str
    epoch: int
    runner_id: str | None = None
    kind: str
    body: dict[str, Any] = {}
    at: float


class Attempt(Answer):
    attempt: int
    epoch: int
    runner: str
    runner_name: str
    granted_at: float


class FlightDetail(FlightRow):
    stopping: str | None = None  # a retired runner is stopping it
    time_left: float | None = None  # flying with a limit: seconds it may still run
    time_left_sentence: str | None = None  # e.g. "may run 1m 20s more"
    facts: list[FlightFact] = []
    attempts: list[Attempt] = []


class FactsPage(Answer):
    """Facts after a sequence number, and where the flight stands."""
    flight: str
    stage: Stage
    exit_code: int | None = None
    outcome: str | None = None
    facts: list[FlightFact]


class Plan(Answer):
    """``gg plan F``: why a flight waits, item by item."""
    flight: str
    stage: Stage
    startable: bool
    waiting: str | None = None
    remedy: str | None = None
    items: list[dict[str, Any]] = []
    state: str | None = None
    title: str = ""
