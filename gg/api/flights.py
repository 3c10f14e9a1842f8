"""Answers about flights: listing rows, one flight, its facts, its plan.

Stages and outcomes cross the wire as their values (``ready``, ``landed``...).
"""

from __future__ import annotations

from typing import Any

from gg.api.artifacts import Artifact
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
    service: dict[str, Any] | None = None  # kind service: its spec (docs/services.md)
    group: str | None = None  # placed in this runner group only
    where: dict[str, str] = {}  # attributes its runner's group must have
    # what people are shown beside the record
    runner: str | None = None
    runner_name: str | None = None
    opened_by_name: str | None = None
    waiting: str | None = None  # why it is not flying yet, in one sentence
    remedy: str | None = None  # what to do about why it waits, or why it ended badly
    ended: str | None = None  # why a failed or cancelled flight ended, in one sentence
    lease: FlightLease | None = None
    # when a waiting flight is expected to start (docs/waiting.md); with no estimate the
    # three times are None and the basis says why; all None when it is not waiting
    expected_start_at: float | None = None
    expected_start_low: float | None = None
    expected_start_high: float | None = None
    expected_start_basis: str | None = None
    expected_start: str | None = None  # e.g. "expected to start in ~3 min (2 flights ahead ...)"



class FlightPage(Answer):
    """A page of the flight listing, newest first; ``next_cursor`` asks for the next one
    (``?cursor=``), None on the last page."""
    items: list[FlightRow]
    next_cursor: str | None = None

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
    # how it ended (None while it flies): landed, failed, returned, expired or cancelled;
    # ``reason`` in words ("exit 1", "timed out after 2s", "lease expired"), and ``retry``
    # when a failure was retried ("retry 1 of 3 after exit 1", gg.domain.retries)
    ended: str | None = None
    exit_code: int | None = None
    reason: str | None = None
    retry: str | None = None
    offered_at: float | None = None  # a delayed retry: when it was offered again (from)


class FlightRetry(Answer):
    """Its retry settings (``gg fly --retries N ...``, docs/jobs.md), settled."""
    retries: int
    on: list[str]
    delay: float | None = None
    elsewhere: bool = False
    text: str = ""


class ApprovalWaiting(Answer):
    """The open approval gate of a flight: the spec approving it runs, and what changed."""
    gate: str
    digest: str
    command: list[str]
    changes: list[str] = []
    changed_by: str | None = None  # who changed the spec, if anyone did
    change: bool = False  # a change to an approved flight (which keeps running meanwhile)
    who_may_clear: str


class ApprovalGiven(Answer):
    gate: str
    digest: str
    by: str | None = None
    at: float | None = None


class FlightApproval(Answer):
    """What a flight runs and what was approved (docs/approvals.md)."""
    digest: str  # of the spec it runs (or will, once it flies)
    approved: ApprovalGiven | None = None  # the latest approval given
    waiting: ApprovalWaiting | None = None  # the approval it waits for


class FlightConcurrency(Answer):
    """Its concurrency key: at most ``limit`` flights with ``key`` fly at once (docs/jobs.md)."""
    key: str
    limit: int = 1
    cancel_in_progress: bool = False
class Linked(Answer):
    """A dependency or a dependent of a flight (``--after``, docs/work-graphs.md)."""
    id: str
    title: str = ""
    stage: Stage
    ended_reason: str | None = None


class FlightIdToken(Answer):
    """An identity token minted for the flight (``gg id-token``): never the token."""
    audience: str | None = None
    epoch: int | None = None
    jti: str | None = None
    at: float
    expires_at: float | None = None


class FlightSecretName(Answer):
    """A secret the flight asked for (``--secret NAME[=ENVVAR]``): never its value."""
    name: str
    envvar: str


class FlightDetail(FlightRow):
    approval: FlightApproval | None = None
    concurrency: FlightConcurrency | None = None  # gg fly --concurrency KEY[:N]
    grace: float | None = None  # seconds from SIGTERM to SIGKILL when it is stopped
    note: str | None = None  # gg fly --note: free text for people
    secrets: list[FlightSecretName] = []  # gg fly --secret (docs/jobs.md)
    id_tokens: list[FlightIdToken] = []  # the newest 20 minted for it, oldest first
    after: list[Linked] = []  # the flights it runs after, in the order given
    after_any: bool = False  # any ending of them will do, not only landing
    dependents: list[Linked] = []  # the flights opened --after it
    retry: FlightRetry | None = None  # gg fly --retries N [--retry-on ...]
    retried: int = 0  # retries used so far
    rerun_of: str | None = None  # gg rerun: the flight this one reran
    reruns: list[str] = []  # the flights rerun from this one, oldest first
    artifacts: list[Artifact] = []  # the files it left under $GG_ARTIFACTS, by name
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


class EstimateAccuracy(Answer):
    """``gg estimate accuracy``: the estimates flights started with, against their starts."""
    since: float
    starts: int
    median_error: float | None = None  # seconds between the estimate and the start
    p90_error: float | None = None
    median_wait: float | None = None  # seconds from the estimate shown to the start
    inside: int = 0  # starts that fell inside [low, high]
    inside_share: float | None = None
    sentence: str
