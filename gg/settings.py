"""Protocol constants and server settings.

Every protocol constant of SPEC section 3 is a setting, overridable by an environment
variable ``GG_<NAME>`` so tests can run the real protocol in seconds. Durations accept
plain seconds (``15``, ``0.5``) or a number with a unit (``500ms``, ``10m``, ``12h``, ``30d``).
Runners learn every interval from the control plane; until its first answer a runner uses
the defaults (:data:`DEFAULTS`), never numbers of its own.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, fields, replace
from typing import Mapping

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")


def parse_duration(text: str) -> float:
    """Seconds in ``text``; ValueError with a plain sentence when it is not a duration."""
    match = _DURATION.match(str(text))
    if not match:
        raise ValueError(f"{text!r} is not a duration (try 30, 500ms, 10m, 12h or 30d)")
    return float(match.group(1)) * _UNITS[match.group(2) or "s"]


_SIZE_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "m": 1024 ** 2, "mb": 1024 ** 2,
               "g": 1024 ** 3, "gb": 1024 ** 3}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$", re.IGNORECASE)


def _whole(text: str) -> int:
    """A whole number; ValueError with a plain sentence when ``text`` is not one."""
    if not re.fullmatch(r"\s*[+-]?\d+\s*", text):
        raise ValueError(f"{text!r} is not a whole number")
    return int(text)


def parse_size(text: str) -> int:
    """Bytes in ``text`` (``512k``, ``10MB``, ``1g``: units of 1024); ValueError with a plain
    sentence when it is not a size."""
    match = _SIZE.match(str(text))
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _SIZE_UNITS:
        raise ValueError(f"{text!r} is not a size (try 512k, 10MB or 1G)")
    return int(float(match.group(1)) * _SIZE_UNITS[unit])
# Settings that take one of a few words, and the words.
CHOICES = {"high_priority": ("admins", "everyone"), "loop_guard": ("off", "on")}


def _choice(text: str, words: tuple[str, ...]) -> str:
    if text.strip() not in words:
        raise ValueError(f"{text!r} is not one of {', '.join(words)}")
    return text.strip()


@dataclass(frozen=True)
class Settings:
    check_in_interval: float = 15.0
    console_check_in_interval: float = 1.0
    offline_after: float = 45.0
    claim_wait: float = 30.0
    # A parked heartbeat claim ends at a moment drawn from the last CLAIM_WAIT_SPREAD seconds
    # of its wait (at most a quarter of it), so a fleet re-parked together by a stall spreads
    # out again (gg.domain.runners.parked_wait, docs/server.md "Parked claims").
    claim_wait_spread: float = 4.0
    lease_ttl: float = 60.0
    lease_renew_at: float = 20.0
    # A runner that could not renew a lease stops its flight LEASE_MARGIN before the lease
    # runs out, and its launcher kills the flight's whole tree half of it before
    # (docs/lease-protocol.md, "The runner stops what it cannot renew"); runners use at most
    # half of LEASE_RENEW_AT.
    lease_margin: float = 10.0
    runner_credential_ttl: float = 30 * 86400.0
    member_code_ttl: float = 600.0
    member_credential_ttl: float = 12 * 3600.0
    enrol_token_ttl: float = 3600.0
    person_token_ttl: float = 90 * 86400.0  # `gg person add` / `--rotate` without --ttl
    key_nonce_ttl: float = 120.0  # a nonce signed to prove a key at registration (docs/enrolment.md)
    maintenance_check_interval: float = 300.0
    pool_attestation_stale: float = 900.0
    max_expiries: int = 5
    # A flight's `started` fact is sent with its first output or its hand-back, and alone
    # only when neither has left the runner within this (docs/lease-protocol.md).
    started_within: float = 0.5
    # Server-only settings (not protocol constants).
    max_body_bytes: int = 1_048_576
    header_timeout: float = 10.0  # a connection must send complete request headers within this
    keep_alive_timeout: float = 5.0  # an idle keep-alive connection is closed after this
    max_connections: int = 0  # 0: from the file limit (gg.server.connections.default_cap)
    # Connections one peer address may hold with no whole request in hand (idle, half a
    # request, a body still arriving, a WebSocket); 0: a quarter of the cap. Behind a proxy,
    # raise it to the cap (docs/server.md).
    max_connections_per_source: int = 0
    body_timeout: float = 30.0  # a request's whole body must arrive within this of its headers
    # The listening socket's accept queue: a fleet of 10,000 runners reconnecting at once (a
    # restart) must not find it full; the kernel caps it at net.core.somaxconn.
    listen_backlog: int = 4096
    # Requests read and neither answered nor waiting (a parked claim, a long poll); while this
    # many are in hand, a runner's next call is left unread until its turn (docs/server.md)
    max_requests_in_hand: int = 1024
    # glibc's malloc gives each thread that allocates an arena of its own, up to eight a
    # core, and memory freed in one is not handed back to another: a server of 20 threads
    # held ~30 MB more under 10,000 runners. Bounded at start (0: glibc's own rule; a
    # MALLOC_ARENA_MAX in the environment wins; docs/server.md).
    malloc_arenas: int = 2
    max_parked_claims: int = 4  # parked claims per runner; one more is answered 429 at once
    # Runner credential checks: a bounded cache from a token's hash to its runner, each entry
    # dropped at once when that credential is renewed, superseded or retired (and after this
    # long in any case); 0 entries turns it off (docs/server.md).
    credential_cache_size: int = 20000
    credential_cache_ttl: float = 300.0
    # Meanings (docs/environments.md): the static cost a meaning may have to be charted, and
    # how long one evaluation may run in a worker process before it reads "took too long".
    meaning_cost_limit: int = 10_000
    meaning_deadline: float = 0.25
    # A runner's never-seen facts are evaluated NEW_FACTS_BURST times at once, then once every
    # NEW_FACTS_EVERY (its labels keep their last verdicts meanwhile); a check-in waits at
    # most CHECK_IN_VERDICT_WAIT for its own new facts' verdicts, which land on their own.
    new_facts_burst: int = 3
    new_facts_every: float = 10.0
    check_in_verdict_wait: float = 0.5
    # Hooks (docs/operations.md): one attempt (connect, send, the whole answer) ends at
    # HOOK_TIMEOUT, and reads at most HOOK_ANSWER_LIMIT bytes of the answer; a failed
    # delivery is tried again after HOOK_BACKOFF, doubling, at most HOOK_BACKOFF_CAP apart,
    # for as long as the hook exists; the outbox is looked at every HOOK_POLL when nothing
    # wakes it, and delivered rows older than HOOK_RETAIN are forgotten.
    hook_timeout: float = 10.0
    hook_answer_limit: int = 64 * 1024
    hook_backoff: float = 1.0
    hook_backoff_cap: float = 300.0
    hook_poll: float = 1.0
    hook_retain: float = 30 * 86400.0  # delivered rows (and their answers) are kept this long
    # Key-proof nonces one address may ask for a minute (POST /v1/key-nonces needs no token);
    # more are answered 429. A nonce stores nothing until it is spent (docs/enrolment.md).
    key_nonce_rate: int = 120
    # The longest a flight may run (gg fly --timeout, docs/operations.md); 0: no maximum.
    # With a maximum, a flight that names no limit (and whose environment has none) gets it.
    flight_timeout_max: float = 0.0
    # Output caps (docs/operations.md): a flight's stored output, unless `gg fly --output-limit`
    # asks otherwise (never above the maximum), and the tail of what was cut kept past it.
    output_limit_default: int = 10 * 1024 ** 2
    output_limit_max: int = 1024 ** 3
    output_tail: int = 64 * 1024
    # Artifacts (docs/work-graphs.md): the bytes every flight's artifacts take together on this
    # server, each content stored once (gg server --artifact-quota); 0: no quota.
    artifact_quota: int = 0
    # Retention (docs/operations.md): ended flights and events older than these are pruned in
    # batches of RETENTION_BATCH rows per table, one short transaction each, looked for every
    # RETENTION_PERIOD. A window of 0 keeps everything.
    retain_flights: float = 90 * 86400.0
    retain_events: float = 90 * 86400.0
    retention_batch: int = 200
    retention_period: float = 60.0
    # The web console (docs/web-console.md): a session lasts CONSOLE_SESSION_TTL from sign-in;
    # a page's long poll is held at most CONSOLE_WAIT before the page looks again anyway.
    console_session_ttl: float = 12 * 3600.0
    console_wait: float = 20.0
    # A console to a machine (docs/console.md): the runner must dial in within
    # CONSOLE_JOIN_WAIT of the request (it hears of it on its parked claim at once, or at its
    # next check-in, so keep this above CHECK_IN_INTERVAL), or the person is told it did not.
    console_join_wait: float = 40.0
    # Start estimates (docs/waiting.md): each new duration fades a kind's older ones by
    # 1/ESTIMATE_WINDOW; at most ESTIMATE_KINDS kinds of flight are remembered (the ones
    # not seen longest are forgotten); the estimates flights started with are kept for
    # ESTIMATE_RETAIN, for `gg estimate accuracy`. A forecast of the whole queue is reused
    # for ESTIMATE_REUSE seconds while no event was recorded (the pages of one listing, many
    # people looking at once): 0 computes it for every read.
    estimate_window: int = 200
    estimate_kinds: int = 2000
    estimate_retain: float = 30 * 86400.0
    estimate_reuse: float = 2.0
    # From FORECAST_AWAY ready flights on, the forecast is played in a process of its own
    # (gg.control.forecaster), so its CPU never holds the server's interpreter lock from the
    # event loop; below, it costs a few milliseconds and is played here. 0: always here.
    forecast_away: int = 500
    high_priority: str = "admins"  # who may open a flight with --priority high: admins|everyone
    # Services (docs/services.md), told to the runner in each service's spec: the first
    # restart waits SERVICE_BACKOFF, doubling up to SERVICE_BACKOFF_CAP; a new generation must
    # be ready within SERVICE_READY_TIMEOUT; an old one is stopped (SIGTERM, this grace,
    # SIGKILL) once its connections finish or SERVICE_STOP_GRACE passes; a service that
    # exited SERVICE_DEGRADED_AFTER times in a row without getting ready reads degraded.
    service_backoff: float = 0.5
    service_backoff_cap: float = 30.0
    service_ready_timeout: float = 60.0
    service_stop_grace: float = 10.0
    service_degraded_after: int = 3
    # Pull-mode runners (docs/runner-modes.md): a signed request or answer is good within
    # PULL_SIGNATURE_SKEW of the receiver's clock, once; one call to a listening runner waits
    # at most PULL_TIMEOUT. The control plane polls each attached runner every
    # CHECK_IN_INTERVAL, and every PULL_BUSY_INTERVAL while it flies something.
    pull_signature_skew: float = 60.0
    pull_timeout: float = 10.0
    pull_busy_interval: float = 1.0
    # Storage (docs/scale-out.md): a postgresql:// URL puts the control plane in that database,
    # shared by every replica given the same URL; empty keeps SQLite in the data dir. Each
    # replica reads through a pool of at most DATABASE_POOL connections (plus one writer). A
    # write transaction that sits idle for DATABASE_HOLD_TIMEOUT (its replica frozen or cut off
    # mid-transaction) is ended by the database, which frees the write lock for the others.
    database_url: str = ""
    database_pool: int = 8
    database_hold_timeout: float = 10.0
    # Replicas (docs/scale-out.md): each background duty (the liveness watch, retention, the
    # hooks' deliveries) is held by one replica for DUTY_TTL and renewed well before; a
    # replica that went away hands its duties on within DUTY_TTL.
    duty_ttl: float = 10.0
    # Identity tokens (docs/jobs.md): the issuer URL every token's ``iss`` and the discovery
    # document name; empty: the URL each request reached the server at.
    issuer: str = ""
    # Secrets (docs/jobs.md): the key file values are sealed under; empty: secrets.key in the
    # data dir. Every replica must name the same key.
    secrets_key_file: str = ""
    # "on": a store call made on the server's event loop raises (gg.store.loop_guard), armed
    # once the server has started up; the test suite turns it on for every server it starts.
    loop_guard: str = "off"
    dev: bool = False

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides) -> "Settings":
        """Defaults, then ``GG_<NAME>`` variables, then explicit overrides."""
        env = os.environ if env is None else env
        values: dict = {}
        for f in fields(cls):
            if f.name == "dev":
                continue
            raw = env.get("GG_" + f.name.upper())
            if raw is None or raw == "":
                continue
            try:
                if f.name in _TEXTS:
                    values[f.name] = raw
                elif f.name in _SIZES:
                    values[f.name] = parse_size(raw)
                elif f.name in CHOICES:
                    values[f.name] = _choice(raw, CHOICES[f.name])
                elif f.type in (int, "int"):
                    values[f.name] = _whole(raw)
                    if values[f.name] < 0:  # a count, a size in bytes or a limit: never below 0
                        raise ValueError(f"{raw.strip()!r} is below 0")
                else:
                    values[f.name] = parse_duration(raw)
            except ValueError as exc:
                raise ValueError(f"GG_{f.name.upper()}: {exc}") from None
        settings = cls(**values)
        return replace(settings, **overrides) if overrides else settings

    def protocol(self) -> dict:
        """The intervals a runner is told (it never hard-codes them)."""
        return {
            "check_in_interval": self.check_in_interval,
            "console_check_in_interval": self.console_check_in_interval,
            "claim_wait": self.claim_wait,
            "lease_ttl": self.lease_ttl,
            "lease_renew_at": self.lease_renew_at,
            "lease_margin": self.lease_margin,
            "maintenance_check_interval": self.maintenance_check_interval,
            "started_within": self.started_within,
            "hand_back_claims": True,
            "hand_back_usage": True,
        }


_TEXTS = ("database_url", "issuer", "secrets_key_file")  # taken as written
# in bytes, or 512k, 10MB
_SIZES = ("output_limit_default", "output_limit_max", "output_tail", "hook_answer_limit",
          "artifact_quota")

# The defaults themselves: what a runner uses until its first check-in tells it the server's.
DEFAULTS = Settings()
