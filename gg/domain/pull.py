"""Pull mode: what the control plane and a listening runner sign, and when a signature is good.

A pull-mode runner (``gg runner up --listen``) never dials out: the control plane calls it.
Every request the control plane makes is signed with the control plane's Ed25519 key, and
the runner checks it against the key it pinned at attach; every answer is signed with the
runner's key, and the control plane checks it against the key it pinned at attach.

What is signed (one line each, joined by newlines, UTF-8)::

    request:  gg-pull-request  FOR  METHOD  PATH  TIMESTAMP  NONCE  SHA256(BODY)
    answer:   gg-pull-answer   STATUS  REQUEST-NONCE  TIMESTAMP  SHA256(BODY)

FOR is the key fingerprint of the runner the request is meant for (the key the control
plane pinned at attach), so a request signed for runner X and replayed to runner Y is not
Y's: every runner pins the same control plane key and remembers only its own nonces, so
without it a captured request would be good once at every runner. Only ``GET /v1/pull/key``,
which the control plane asks before it knows the key, is signed FOR ``ANYONE``; a runner
serves it unsigned anyway and checks FOR on every other path.

A request is good only within ``skew`` seconds of the receiver's clock and only once (its
nonce is remembered for twice the skew, after which its timestamp is stale anyway). An answer
names the nonce of the request it answers, so an old answer cannot stand for a new one.

The control plane renews a pull-mode runner's leases at its polls, and the runner stops a
flight whose lease was not renewed by its own deadline, as a dial-out runner does: so the
polls must come often enough for a renewal to reach the runner before it (:func:`renew_when`,
:func:`polls_too_slow`).
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, field

from gg.domain.leases import stop_margin
from gg.settings import Settings

TIMESTAMP_HEADER = "x-gg-timestamp"
NONCE_HEADER = "x-gg-nonce"
SIGNATURE_HEADER = "x-gg-signature"

KEY_PATH = "/v1/pull/key"
ATTACH_PATH = "/v1/pull/attach"
POLL_PATH = "/v1/pull/poll"
DELIVER_PATH = "/v1/pull/deliver"

MODE_DIAL = "dial"
MODE_PULL = "pull"
KIND = "pull"  # the runner row's kind: joined by attach, never by registration
ANYONE = "*"  # FOR of the one request made before the runner's key is known (KEY_PATH)
MAX_NONCES = 100_000  # remembered nonces; past it the oldest are forgotten first
MIN_POLL_GAP = 0.2  # seconds between two polls of one runner, however often they are woken


def digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def request_message(meant_for: str, method: str, path: str, timestamp: str, nonce: str,
                    body: bytes) -> bytes:
    """What a request to the runner whose key fingerprint is ``meant_for`` is signed over."""
    return "\n".join(("gg-pull-request", meant_for, method.upper(), path, timestamp, nonce,
                      digest(body))).encode()


def answer_message(status: int, request_nonce: str, timestamp: str, body: bytes) -> bytes:
    return "\n".join(("gg-pull-answer", str(status), request_nonce, timestamp,
                      digest(body))).encode()


def new_nonce() -> str:
    return secrets.token_hex(16)


def fresh(timestamp: str, now: float, skew: float) -> bool:
    """Whether a signed timestamp is within ``skew`` seconds of ``now``."""
    try:
        at = float(timestamp)
    except (TypeError, ValueError):
        return False
    return abs(now - at) <= skew


@dataclass
class Nonces:
    """The nonces seen lately: a nonce is accepted once while its timestamp could be fresh."""

    skew: float
    seen: dict[str, float] = field(default_factory=dict)

    def accept(self, nonce: str, now: float) -> bool:
        """True the first time ``nonce`` is seen (and remembers it); False for a replay."""
        if not nonce or len(nonce) > 128:
            return False
        self._forget(now)
        if nonce in self.seen:
            return False
        self.seen[nonce] = now
        return True

    def _forget(self, now: float) -> None:
        horizon = now - 2 * self.skew
        while self.seen:
            oldest, at = next(iter(self.seen.items()))
            if at >= horizon and len(self.seen) < MAX_NONCES:
                return
            del self.seen[oldest]


def poll_every(settings: Settings) -> float:
    """How often the control plane polls a runner that holds a lease."""
    return max(settings.pull_busy_interval, MIN_POLL_GAP)


def renew_when(settings: Settings) -> float:
    """How much of a pull-mode runner's lease is left when the control plane renews it at a
    poll: LEASE_RENEW_AT, plus the polls that might come too late for the runner's own
    deadline (one CHECK_IN_INTERVAL, one busy poll)."""
    return settings.lease_renew_at + settings.check_in_interval + poll_every(settings)


def renewal_window(settings: Settings) -> float:
    """How long the control plane has to renew a pull-mode runner's lease at one of its
    polls: from when the renewal is due (:func:`renew_when`, or at once when the lease is
    shorter) until the runner stops the flight (the stop margin before its local expiry)."""
    return (min(settings.lease_ttl, renew_when(settings))
            - stop_margin(settings.lease_margin, settings.lease_renew_at))


def polls_too_slow(settings: Settings) -> str | None:
    """Why a pull-mode runner holding a lease could see its renewal only after it stopped the
    flight, with nothing failing (no poll falls inside :func:`renewal_window`); None when the
    settings fit. ``gg server`` refuses to start with such settings."""
    every, window = poll_every(settings), renewal_window(settings)
    if every < window:
        return None
    margin = stop_margin(settings.lease_margin, settings.lease_renew_at)
    return (f"PULL_BUSY_INTERVAL ({every:g}s) must be shorter than the {max(window, 0):g}s a "
            f"pull-mode runner's lease leaves for its renewal (LEASE_TTL {settings.lease_ttl:g}s "
            f"less the runner's stop margin {margin:g}s): poll more often or make the leases "
            "longer")
