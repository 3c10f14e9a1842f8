"""Answers about runners: rows, details, registration, check-in, claims, leases, admin.

A runner's row is every field of its record but its public key (its fingerprint instead),
with what people are shown beside it (liveness, admin state, owner's name, the flights it
holds, checks); its detail adds the
inventory and capabilities it reported.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field

from gg.api.artifacts import FlightInput
from gg.api.consoles import ConsoleCall
from gg.api.schemas import Answer, Protocol


class CurrentFlight(Answer):
    """A flight a runner holds a lease on, as its row lists it."""
    id: str
    attempt: int
    epoch: int
    started_at: float | None = None  # when this lease was granted
    title: str = ""


class RunnerRow(Answer):
    id: str
    name: str
    labels: dict[str, str]
    workers: int
    started_workers: int
    admin_state: str
    last_seen_at: float | None = None
    goodbye_at: float | None = None
    offline_noted_at: float | None = None
    readings: dict[str, Any] = {}
    peer_address: str | None = None
    version: str | None = None
    version_skew: str
    health: str
    policy: dict[str, Any] = {}
    ownership: str
    owner: str | None = None
    reserved: bool
    registered_by: str | None = None
    kind: str
    created_at: float
    retired_at: float | None = None
    credential_expires_at: float | None = None
    checks_at: float | None = None
    profile: str | None = None
    agents: list[str] = []
    credential_refs: list[dict[str, Any]] = []
    profile_in_force: dict[str, Any] = {}
    policy_override: dict[str, Any] = {}
    policy_changed_at: float | None = None
    # what people are shown beside the record
    online: bool
    liveness: str
    state: str
    owner_name: str | None = None
    # identity you can check (docs/fleet-operations.md)
    public_key_fingerprint: str | None = None
    os: str | None = None
    arch: str | None = None
    ephemeral: bool = False
    current_flights: list[CurrentFlight] = []
    checks: list[dict[str, Any]] = []
    checks_verdict: str | None = None
    health_notes: list[str] = []
    # its runner group (docs/groups.md): kept together
    group: str = "default"
    group_draining: bool = False
    group_attributes: dict[str, str] = {}
    group_exclusive: bool = False
    # how it reaches the control plane (docs/runner-modes.md): dial, or pull at url
    mode: str = "dial"
    url: str | None = None


class RunnerDetail(RunnerRow):
    inventory: dict[str, Any] = {}
    capabilities: dict[str, Any] = {}


class OwnershipChanged(RunnerRow):
    """A claim, unclaim, reserve, release or ownership change: the runner's row after it."""
    changed: bool


class Registered(Answer):
    runner: RunnerRow
    credential: str  # shown this once
    credential_expires_at: float | None = None
    protocol: Protocol


class KeyNonce(Answer):
    nonce: str
    expires_in: float
    expires_at: float


class RunnerProfile(Answer):
    name: str
    in_force: dict[str, Any] | None = None


class CheckedIn(Answer):
    runner: str
    admin_state: str
    policy: dict[str, Any]
    labels: dict[str, str]
    health: str
    check_in_interval: float
    protocol: Protocol
    directives: list[str]
    ended: list[str]
    server_time: float
    server_version: str
    profile: RunnerProfile | None = None  # enrolled runners: their profile
    consoles: list[ConsoleCall] = []  # consoles waiting for it to dial in (docs/console.md)


class FlightSecret(Answer):
    """A secret delivered with a grant: put in the flight's environment as ``envvar``."""
    name: str
    envvar: str
    value: str = Field(repr=False)  # never in a repr, a log line or a traceback's message


class FlightForRunner(Answer):
    """Only what a runner needs to fly a flight."""
    id: str
    title: str = ""
    command: list[str]
    repo: str | None = None
    agent: str = "shell"
    environment: str | None = None
    attempt: int = 1
    epoch: int = 0
    kind: str = "work"
    timeout: float | None = None  # seconds this attempt may run; past it the runner stops it
    output_room: int | None = None  # bytes of output it may still send (None: no cap told)
    output_tail: int = 0  # bytes of the tail it keeps past the cap, sent with the final report
    service: dict[str, Any] | None = None  # kind service: the spec to keep running
    grace: float | None = None  # seconds from SIGTERM to SIGKILL when stopped (None: 5s)
    limits: dict[str, Any] = {}  # resource limits asked (gg.domain.limits); the policy settles them
    # gg fly --secret (docs/jobs.md): values opened at the grant, held in the runner's memory
    # only; or why they could not be (the runner fails the flight without starting it)
    secrets: list[FlightSecret] = []
    secrets_refused: str | None = None
    # gg fly --with-artifacts (docs/work-graphs.md): its dependencies' artifacts, put under
    # $GG_INPUTS/<dir>/ before the command starts, checked against their digests
    inputs: list[FlightInput] = []
    # the root envelope's images: for its environment: what a container flight runs from,
    # before the policy's image (None: the policy's, else the default; docs/isolation.md)
    image: str | None = None


class LeaseGrant(Answer):
    epoch: int
    expires_at: float
    granted_at: float


class Claimed(Answer):
    flight: FlightForRunner
    policy: dict[str, Any]
    lease: LeaseGrant
    protocol: Protocol


class Instruction(Answer):
    """What the control plane tells a runner at once (gg.domain.runners.Instruction)."""
    kind: Literal["drain", "policy_changed", "check_in", "console"]


class Instructed(Answer):
    """A claim answered with an instruction instead of a flight (docs/lease-protocol.md)."""
    instruction: Instruction


class LeaseRenewed(Answer):
    flight: str
    epoch: int
    expires_at: float
    server_time: float
    service: dict[str, Any] | None = None  # kind service: the spec now (a newer generation: update)


class FactsStored(Answer):
    stored: int
    received: int


class HandedBack(Answer):
    flight: str
    stage: str
    repeat: bool
    # With ``claim_next``: the next flight granted to this runner in the same call, if any.
    next: Claimed | None = None


class Challenge(Answer):
    nonce: str
    expires_in: float


class CredentialRenewed(Answer):
    credential: str
    expires_at: float


class StateChange(Answer):
    """A cordon, drain or resume of one runner."""
    model_config = ConfigDict(populate_by_name=True)
    runner: str
    name: str
    from_: str = Field(alias="from")
    state: str
    changed: bool
    message: str


class StateChanged(StateChange):
    view: RunnerRow


class Retired(Answer):
    runner: str
    name: str
    state: str
    retired_at: float | None = None
    stopping: list[str]


class Forgotten(Answer):
    runner: str
    name: str
    forgotten: bool


class LabelDispositions(Answer):
    """``gg runner labels``: one runner's labels and their dispositions."""
    runner: str
    name: str
    online: bool
    labels: list[dict[str, Any]]
    computed_at: float | None = None


class Attached(Answer):
    """``gg runner attach``: the row of the runner the control plane now polls, the key
    fingerprint it pinned, and the fingerprint of the control plane's key the runner pinned."""
    runner: RunnerRow
    fingerprint: str
    control_key_fingerprint: str
