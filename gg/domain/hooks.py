"""Notifications: which events a hook hears, the body it is sent and how it is signed.

An admin adds a hook with ``--on`` names (``landed``, ``failed``...); each name is one
:class:`EventKind`, written here once. The control plane records an outbox row in the same
transaction as the event; the server POSTs its body, byte for byte, signed with
HMAC-SHA256 under the hook's secret, and retries with capped exponential backoff until it
is answered 2xx. Events of one flight reach one hook in the order they were recorded.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from typing import Any
from urllib.parse import urlsplit

from gg.domain.events import EventKind
from gg.errors import BadRequest

# The names ``gg hook add --on`` accepts, and the event each stands for.
HOOK_EVENTS: dict[str, EventKind] = {
    "opened": EventKind.FLIGHT_OPENED,
    "gated": EventKind.GATE_OPENED,
    "ungated": EventKind.GATE_CLEARED,
    "claimed": EventKind.FLIGHT_CLAIMED,
    "returned": EventKind.FLIGHT_RETURNED,
    "expired": EventKind.FLIGHT_EXPIRED,
    "landed": EventKind.FLIGHT_LANDED,
    "failed": EventKind.FLIGHT_FAILED,
    "retried": EventKind.FLIGHT_RETRIED,  # a failed attempt with a retry left (docs/jobs.md)
    "cancelled": EventKind.FLIGHT_CANCELLED,
    "runner.offline": EventKind.RUNNER_AGED_OUT,
    "runner.degraded": EventKind.RUNNER_DEGRADED,
    "runner.version_skew": EventKind.RUNNER_VERSION_SKEW,
    "pool.stale": EventKind.POOL_STALE,
}
NAME_OF: dict[str, str] = {kind.value: name for name, kind in HOOK_EVENTS.items()}

SIGNATURE_HEADER = "X-GG-Signature"  # sha256=<hex of HMAC-SHA256(secret, body)>
DELIVERY_HEADER = "X-GG-Delivery"  # the delivery's id: the same on every attempt
TIMESTAMP_HEADER = "X-GG-Timestamp"  # when this attempt was sent, Unix seconds
EVENT_HEADER = "X-GG-Event"  # the --on name, e.g. landed

SECRET_PREFIX = "ggh_"
MAX_URL = 2048


def parse_on(text: str) -> list[str]:
    """The ``--on`` names in ``text`` (comma-separated), in the order of HOOK_EVENTS."""
    names = [n.strip() for n in (text or "").split(",") if n.strip()]
    if not names:
        raise BadRequest("say which events the hook hears, e.g. --on landed,failed")
    unknown = [n for n in names if n not in HOOK_EVENTS]
    if unknown:
        raise BadRequest(f"{unknown[0]} is not an event a hook can hear; choose from "
                         f"{', '.join(HOOK_EVENTS)}")
    return [n for n in HOOK_EVENTS if n in names]


def check_url(url: str) -> str:
    """An http(s) URL with a host, no credentials in it."""
    parts = urlsplit(url or "")
    if (parts.scheme not in ("http", "https") or not parts.hostname or len(url) > MAX_URL
            or parts.username or parts.password or any(c.isspace() for c in url)):
        raise BadRequest("a hook's URL is http:// or https:// with a host and no user or "
                         "password in it")
    return url


def hears(hook: dict[str, Any], kind: str, environment: str | None) -> bool:
    """Does ``hook`` want an event of ``kind`` (of a flight in ``environment``)? A hook with
    ``--env`` hears only events of flights in that environment."""
    name = NAME_OF.get(str(kind))
    if name is None or name not in hook["events"]:
        return False
    return hook.get("environment") is None or hook["environment"] == environment


def body(*, delivery_id: str, hook_id: str, event: dict[str, Any],
         environment: str | None) -> bytes:
    """The exact bytes POSTed (and signed) on every attempt of one delivery."""
    kind = str(event["kind"])
    return json.dumps({
        "delivery": delivery_id, "hook": hook_id, "event": NAME_OF[kind], "kind": kind,
        "seq": event["seq"], "at": event["at"], "flight_id": event.get("flight_id"),
        "runner_id": event.get("runner_id"), "actor": event.get("actor"),
        "environment": environment, "body": event.get("body") or {},
    }, separators=(",", ":"), sort_keys=True).encode()


def new_delivery_id() -> str:
    return "d_" + secrets.token_hex(12)


def new_secret() -> str:
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def signature(secret: str, payload: bytes) -> str:
    """The value of the signature header: ``sha256=`` + hex HMAC-SHA256 of the body."""
    return "sha256=" + hmac.new(secret.encode(), payload, hashlib.sha256).hexdigest()


def next_try(attempt: int, now: float, *, base: float, cap: float) -> float:
    """When to try again after failed attempt number ``attempt`` (1, 2, ...): doubling from
    ``base``, never more than ``cap`` apart."""
    return now + min(cap, base * 2.0 ** min(attempt - 1, 30))


def delivered(status: int | None) -> bool:
    return status is not None and 200 <= status < 300
