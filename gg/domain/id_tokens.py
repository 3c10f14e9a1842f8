"""Identity tokens: what a flight's token says, how long it lives, which keys verify it.

The control plane is an OpenID Connect issuer (docs/jobs.md, "Identity tokens"). A flight asks
its runner for a token for one audience; the runner asks the control plane with its own
credential and the flight's epoch; the control plane signs the claims :func:`claims` builds.
Pure rules here, the time passed in; signing and storage are gg.control.id_tokens's.

A signing key's life::

    made (first use, or a rotation) ──> current: signs every new token
    rotated ──> retired: signs nothing, stays in the JWKS until MAX_LIFETIME after it was
                retired (no token it signed outlives that), then leaves it
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

MAX_LIFETIME = 600  # seconds: no token lives longer, and a retired key stays this long
ALGORITHM = "RS256"  # what every common verifier (cloud STS, Vault, Kubernetes) accepts
AUDIENCE_MAX = 255
SUBJECT_PREFIX = "flight:"
# The claims every token carries (``approver`` only when the flight has one).
CLAIMS = ("iss", "sub", "aud", "iat", "nbf", "exp", "jti", "attempt", "epoch", "environment",
          "opener", "approver", "runner", "group")
_WHITESPACE = re.compile(r"\s")


def audience_problem(audience: str | None) -> str | None:
    """Why ``audience`` cannot be a token's ``aud`` (one sentence), or None."""
    if not audience:
        return "an identity token needs an audience (--audience AUD), the party that verifies it"
    if len(audience) > AUDIENCE_MAX:
        return f"an audience is at most {AUDIENCE_MAX} characters (got {len(audience)})"
    if _WHITESPACE.search(audience) or not audience.isprintable():
        return f"an audience has no spaces or control characters (got {audience!r})"
    return None


def expiry(now: float, lease_expires_at: float) -> int:
    """When a token minted at ``now`` expires: MAX_LIFETIME from now, never past the lease
    (as the control plane holds it at minting); whole seconds, rounded down."""
    return int(min(now + MAX_LIFETIME, lease_expires_at))


@dataclass(frozen=True)
class Subject:
    """What a token says about the flight, as the control plane read it at minting."""

    flight_id: str
    attempt: int
    epoch: int
    environment: str | None
    opener: str
    approver: str | None
    runner: str
    group: str
    lease_expires_at: float


def claims(subject: Subject, *, issuer: str, audience: str, now: float,
           jti: str) -> dict[str, Any]:
    """The claims of one token: the registered ones (``iss``, ``sub`` = ``flight:<id>``,
    ``aud``, ``iat``, ``nbf``, ``exp``, ``jti``) and gg's own."""
    issued = int(now)
    out = {"iss": issuer, "sub": SUBJECT_PREFIX + subject.flight_id, "aud": audience,
           "iat": issued, "nbf": issued, "exp": expiry(now, subject.lease_expires_at),
           "jti": jti, "attempt": subject.attempt, "epoch": subject.epoch,
           "environment": subject.environment, "opener": subject.opener,
           "runner": subject.runner, "group": subject.group}
    if subject.approver is not None:
        out["approver"] = subject.approver
    return out


def in_jwks(retired_at: float | None, now: float) -> bool:
    """Whether a key is published: current, or retired less than MAX_LIFETIME ago (a token
    it signed may still be in use)."""
    return retired_at is None or now < retired_at + MAX_LIFETIME


def issuer_of(configured: str, base_url: str) -> str:
    """The issuer URL: the ``GG_ISSUER`` setting, else the URL the request reached the
    server at; never with a trailing slash (``iss`` must equal it character for character)."""
    return (configured or base_url).rstrip("/")


def discovery(issuer: str, jwks_path: str) -> dict[str, Any]:
    """The OpenID Connect discovery document (``/.well-known/openid-configuration``)."""
    return {"issuer": issuer, "jwks_uri": issuer + jwks_path,
            "response_types_supported": ["id_token"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": [ALGORITHM],
            "scopes_supported": ["openid"],
            "claims_supported": list(CLAIMS)}
