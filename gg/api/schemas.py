"""Wire schemas shared by the server (validation, OpenAPI) and the client.

Requests forbid unknown fields and bound every size, so a malformed or hostile request is
answered 4xx before any use case runs.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from gg.domain.flights import Outcome, Priority

Name = Annotated[str, StringConstraints(min_length=1, max_length=64)]
ShortText = Annotated[str, StringConstraints(max_length=200)]
LabelKey = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_.-]{0,62}$")]
LabelValue = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:/@+-]{0,127}$")]
Arg = Annotated[str, StringConstraints(max_length=65536)]
Labels = Annotated[dict[LabelKey, LabelValue], Field(max_length=64)]
MAX_JSON_DEPTH = 32


def _shallow(value: dict) -> dict:
    """Free-form JSON (inventory, readings, fact bodies) nests at most MAX_JSON_DEPTH deep.

    Deeper values would be stored and later blow Python's recursion limit wherever they
    are copied or encoded (a 5xx on every read of them); they are refused at the door.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise ValueError(f"nests deeper than {MAX_JSON_DEPTH} levels")
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return value


Json = Annotated[dict[str, Any], AfterValidator(_shallow)]


class Request(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class Answer(BaseModel):
    """An answer's schema. Every field the server sends is declared; a field a newer server
    adds is kept, not dropped, so an older client's ``--json`` still shows it."""
    model_config = ConfigDict(extra="allow", defer_build=True)


class Protocol(Answer):
    """The intervals a runner is told (it never hard-codes them)."""
    check_in_interval: float
    console_check_in_interval: float
    claim_wait: float
    lease_ttl: float
    lease_renew_at: float
    maintenance_check_interval: float
    # The runner stops a flight it could not renew this long before its lease runs out (at
    # most LEASE_RENEW_AT / 2; docs/lease-protocol.md). None: an older control plane; the
    # runner uses the default.
    lease_margin: float | None = None
    # A flight's `started` fact rides with its first output or its hand-back; alone only if
    # neither left within this (docs/lease-protocol.md, "A flight's requests"). None: an
    # older control plane, which takes `started` only as a report of its own, sent at once.
    started_within: float | None = None
    # The hand-back takes ``claim_next``: the flight's slot is filled at once with the next
    # flight, in the hand-back's answer (docs/lease-protocol.md, "A flight's requests").
    # False: an older control plane; the runner claims again on its own.
    hand_back_claims: bool = False
    # The hand-back takes the flight's usage note (peak memory, CPU seconds; gg.domain.limits)
    # beside `started`. False: an older control plane; the runner reports it before.
    hand_back_usage: bool = False


class Health(Answer):
    ok: bool
    version: str
    commit: str = "unknown"  # the build commit version skew compares (gg.build_commit)
    server_time: float


class Ok(Answer):
    ok: bool


class Removed(Answer):
    """A profile, environment, strategy or pool taken down (``deleted``), or, for a pool with
    members, on its way (``detail`` says what happens first)."""
    kind: str
    name: str
    deleted: bool
    detail: str | None = None


class ErrorDetail(Answer):
    code: str
    message: str  # one sentence


class ErrorAnswer(Answer):
    """Every refusal, whatever its status: ``{"error": {"code": ..., "message": ...}}``."""
    error: ErrorDetail


PublicKey = Annotated[str, StringConstraints(min_length=1, max_length=100)]
ProofText = Annotated[str | None, StringConstraints(max_length=200)]


class KeyNonceAsk(Request):
    """Ask for a single-use nonce to prove ``public_key`` for one registration, enrolment
    or pool join (gg.control.key_proof)."""
    purpose: Literal["register", "enrol", "join"]
    public_key: PublicKey


class KeyProof(Request):
    """A request that proves its private key: the nonce from ``POST /v1/key-nonces`` and
    the key's base64 signature over ``gg-{purpose}:{public_key}:{nonce}``. Absent or wrong,
    the request is refused like a bad token."""
    public_key: PublicKey
    nonce: ProofText = None
    signature: ProofText = None


class RunnerRegister(KeyProof):
    name: Name
    labels: Labels = {}
    workers: Annotated[int, Field(ge=1, le=256)] = 1
    inventory: Json = {}
    version: Annotated[str | None, StringConstraints(max_length=64)] = None


class CheckIn(Request):
    free_slots: Annotated[int, Field(ge=0, le=256)] = 0
    readings: Json = {}
    inventory: Json | None = None
    capabilities: Json | None = None
    labels: Labels | None = None  # the runner's labels as it states them now (registered runners)
    version: Annotated[str | None, StringConstraints(max_length=64)] = None
    held: Annotated[list[Annotated[str, StringConstraints(max_length=64)]], Field(max_length=256)] = []
    # enrolment: the agents this runner has, and its latest maintenance report
    agents: Annotated[list[Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_-]{0,62}$")]],
                      Field(max_length=64)] | None = None
    maintenance: Json | None = None
    workers: Annotated[int | None, Field(ge=1, le=256)] = None  # started with (for policy)


class Claim(Request):
    free_slots: Annotated[int, Field(ge=0, le=256)] = 1
    wait: Annotated[float | None, Field(ge=0, le=3600)] = None
    # A heartbeat: with readings the claim counts as the runner's check-in, and the runner takes
    # an instruction for an answer (``{"instruction": {"kind": ...}}``); ``policy`` is the digest
    # of the policy it applies (gg.domain.runners.policy_digest).
    readings: Json | None = None
    policy: Annotated[str | None, StringConstraints(max_length=64)] = None


class Renew(Request):
    epoch: Annotated[int, Field(ge=1)]


class Fact(Request):
    kind: Literal["started", "output", "exit", "commit", "pushed", "note"]
    body: Json = {}
    key: Annotated[str | None, StringConstraints(max_length=128)] = None
    # Seconds before this report that it happened (a `started` sent late, with the first
    # output or the hand-back): the control plane dates it ``now - ago``, never before the
    # grant. Seconds on the runner's own clock, so no two clocks are compared.
    ago: Annotated[float | None, Field(ge=0, le=30 * 86400)] = None


USAGE_KEY = ":usage"  # the end of a usage note's key (gg.runner.flight)


def _only_started(facts: list[Fact]) -> list[Fact]:
    if any(f.kind != "started" and not (f.kind == "note" and (f.key or "").endswith(USAGE_KEY))
           for f in facts):
        raise ValueError("a hand-back carries only the flight's started fact and its usage "
                         "note; report the rest")
    return facts


class Report(Request):
    epoch: Annotated[int, Field(ge=1)]
    facts: Annotated[list[Fact], Field(min_length=1, max_length=1000)]


class HandBack(Request):
    epoch: Annotated[int, Field(ge=1)]
    outcome: Outcome
    exit_code: Annotated[int | None, Field(ge=-255, le=255)] = None
    reason: Annotated[str | None, StringConstraints(max_length=500)] = None
    key: Annotated[str | None, StringConstraints(max_length=128)] = None
    # The `started` fact, when the flight ended before it was sent: stored in the hand-back's
    # own transaction, after the same (flight, epoch) check, before the outcome.
    facts: Annotated[list[Fact], Field(max_length=2), AfterValidator(_only_started)] = []
    # Free slots to fill at once: the answer's ``next`` is a flight granted to this runner in
    # the same call (a claim that does not park), or null when none is ready for it now.
    claim_next: Annotated[int, Field(ge=0, le=256)] = 0


class CredentialRenew(Request):
    nonce: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    signature: Annotated[str, StringConstraints(min_length=1, max_length=200)]


class ServiceOpen(Request):
    """``gg fly --service [--port P] [--ready-cmd CMD] [--socket-activation]``
    (docs/services.md)."""
    port: Annotated[int | None, Field(ge=1, le=65535)] = None
    ready_cmd: Annotated[str | None, StringConstraints(min_length=1, max_length=4000)] = None
    socket_activation: bool = False


class ConcurrencyOpen(Request):
    """``gg fly --concurrency KEY[:N] [--cancel-in-progress]`` (docs/jobs.md). The key's
    shape and N's range are the domain's to judge, with a sentence
    (gg.domain.concurrency.key_problem)."""
    key: Annotated[str, StringConstraints(max_length=1000)]
    limit: int = 1
    cancel_in_progress: bool = False


class RetryOpen(Request):
    """``gg fly --retries N [--retry-on failed,timed-out] [--retry-delay DUR]
    [--retry-elsewhere]`` (docs/jobs.md); a field left null takes the environment's default
    (the root envelope's ``retries:``). The ranges are the domain's to judge, with a sentence
    (gg.domain.retries.Retry.problem)."""
    retries: int | None = None
    on: Annotated[list[Annotated[str, StringConstraints(max_length=100)]] | None,
                  Field(max_length=10)] = None
    delay: float | None = None  # seconds
    elsewhere: bool | None = None


class LimitsAsked(Request):
    """A flight's resource limits: cores, bytes of memory, processes (None: the policy's)."""

    cpus: Annotated[float | None, Field(ge=0.01, le=1024)] = None
    memory: Annotated[int | None, Field(ge=1024 * 1024, le=2 ** 50)] = None
    pids: Annotated[int | None, Field(ge=1, le=4_194_304)] = None


class SecretUse(Request):
    """``gg fly --secret NAME[=ENVVAR]`` (docs/jobs.md): the variable is NAME unless given;
    the names' shape is the domain's to judge (gg.domain.secrets.name_problem)."""
    name: Annotated[str, StringConstraints(max_length=200)]
    envvar: Annotated[str | None, StringConstraints(max_length=200)] = None


class ArtifactsOpen(Request):
    """``gg fly --artifact-limit SIZE --with-artifacts`` (docs/work-graphs.md)."""
    limit: Annotated[int | None, Field(ge=0, le=2 ** 53)] = None
    inputs: bool = False


class FlightOpen(Request):
    command: Annotated[list[Arg], Field(min_length=1, max_length=4096)]
    title: ShortText = ""
    environment: Annotated[str | None, StringConstraints(pattern=r"^[a-z][a-z0-9_-]{0,62}$")] = None
    runner: Annotated[str | None, StringConstraints(min_length=1, max_length=64)] = None
    labels: Labels = {}
    attended: bool = False
    repo: Annotated[str | None, StringConstraints(min_length=1, max_length=500)] = None
    agent: Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_-]{0,62}$")] = "shell"
    timeout: Annotated[float | None, Field(gt=0, le=10 * 365 * 86400)] = None  # seconds
    output_limit: Annotated[int | None, Field(ge=0, le=2 ** 53)] = None  # bytes
    priority: Priority = Priority.NORMAL
    approval: bool = False  # held until an admin or the approver approves it
    approver: Annotated[str | None, StringConstraints(min_length=1, max_length=64)] = None
    service: ServiceOpen | None = None  # kept running by its runner until cancelled
    group: Annotated[str | None, StringConstraints(min_length=1, max_length=63)] = None
    where: Labels = {}  # attributes the runner's group must have (gg.domain.groups)
    # the job contract (docs/jobs.md): a concurrency key, and seconds from SIGTERM to SIGKILL
    concurrency: ConcurrencyOpen | None = None
    grace: float | None = None
    # held until these flights land (any ending, with after_any); docs/work-graphs.md
    after: Annotated[list[Name], Field(max_length=1000)] = []
    after_any: bool = False
    limits: LimitsAsked = LimitsAsked()  # gg fly --cpus --memory --pids (gg.domain.limits)
    # gg fly --note: free text for people (gg.domain.flight_spec.note_problem says what fits)
    note: Annotated[str | None, StringConstraints(max_length=100_000)] = None
    secrets: Annotated[list[SecretUse], Field(max_length=100)] = []  # gg fly --secret
    retry: RetryOpen | None = None  # gg fly --retries ... (gg.domain.retries)
    artifacts: ArtifactsOpen | None = None  # gg fly --artifact-limit --with-artifacts


class RerunOpen(Request):
    """``gg rerun F [--with KEY=VALUE ...]`` (docs/jobs.md): what to change of F's spec; a
    field left null keeps F's (``retry``: each of its fields likewise)."""
    title: ShortText | None = None
    environment: Annotated[str | None, StringConstraints(pattern=r"^[a-z][a-z0-9_-]{0,62}$")] = None
    runner: Annotated[str | None, StringConstraints(min_length=1, max_length=64)] = None
    priority: Priority | None = None
    timeout: Annotated[float | None, Field(gt=0, le=10 * 365 * 86400)] = None  # seconds
    retry: RetryOpen | None = None


class PolicySet(Request):
    isolation: Literal["none", "sandbox", "container", "gvisor"] | None = None
    egress: Literal["none", "allowlist", "all"] | None = None
    workers: Annotated[int | None, Field(ge=1, le=256)] = None
    # resource limits (gg.domain.limits): a default and a maximum for each; memory in bytes
    cpus: Annotated[float | None, Field(gt=0, le=1024)] = None
    memory: Annotated[int | None, Field(gt=0, le=2 ** 50)] = None
    pids: Annotated[int | None, Field(ge=1, le=4_194_304)] = None
    max_cpus: Annotated[float | None, Field(gt=0, le=1024)] = None
    max_memory: Annotated[int | None, Field(gt=0, le=2 ** 50)] = None
    max_pids: Annotated[int | None, Field(ge=1, le=4_194_304)] = None
    # isolation container's image (gg.domain.policy.image_problem says what it may be)
    image: Annotated[str | None, StringConstraints(min_length=1, max_length=255)] = None
    # egress allowlist entries (gg.domain.egress), the whole list; [] empties it
    allow: Annotated[list[Annotated[str, StringConstraints(max_length=300)]] | None,
                     Field(max_length=256)] = None


class DrainSelection(Request):
    labels: Annotated[dict[str, str], Field(min_length=1, max_length=64)]


# -- pools and strategies (docs/pools.md) ----------------------------------------------------

MemberId = Annotated[str, StringConstraints(pattern=r"^m_[0-9a-f]{1,32}$")]
Digest = Annotated[str, StringConstraints(pattern=r"^sha256:[0-9a-f]{64}$")]
Why = Annotated[str | None, StringConstraints(max_length=500)]


class StrategyApply(Request):
    strategy: Json  # the file's mapping, checked by gg.airspace.strategy_from_mapping


class StrategyDigest(Request):
    digest: Digest


class PoolAllow(Request):
    runner: Annotated[str, StringConstraints(min_length=1, max_length=64)]


class PoolAction(Request):
    action: Literal["start", "reset", "roll", "replace", "remove"]
    member_id: MemberId | None = None


class MemberFact(Request):
    """What the maintainer sees of one member's process; it never names a member state."""

    id: MemberId
    process: Literal["running", "exited"]


class ActionDone(Request):
    action: Literal["start", "reset", "roll", "replace", "remove", "clean"]
    member_id: MemberId | None = None
    new_member: MemberId | None = None
    ok: bool = True
    error: Why = None


class DriverReport(Request):
    name: Literal["process", "podman", "docker", "command"]
    problem: Why = None


class Backoff(Request):
    """The maintainer's actions failed ``failures`` cycles in a row; it waits ``retry_in``
    seconds before the next plan (gg.pool.maintainer)."""

    failures: Annotated[int, Field(ge=1, le=1_000_000)]
    retry_in: Annotated[float, Field(ge=0, le=86400)]
    error: Why = None


class Attestation(Request):
    members: Annotated[list[MemberFact], Field(max_length=4096)] = []
    did: Annotated[list[ActionDone], Field(max_length=4096)] = []
    driver: DriverReport | None = None
    backoff: Backoff | None = None  # None: the last cycle's actions went through


class MemberJoin(KeyProof):
    inventory: Json = {}
    version: Annotated[str | None, StringConstraints(max_length=64)] = None
