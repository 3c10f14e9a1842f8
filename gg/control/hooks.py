"""Hooks: an admin adds, lists, shows and removes them; the server's outbox delivers.

The rules (which names exist, what a hook hears, the body and its signature, when to try
again) are :mod:`gg.domain.hooks`; outbox rows are written by ``Core.event`` in the
transaction that records the event. The secret is returned once, by :func:`add_hook`.
"""

from __future__ import annotations

from typing import Collection

from gg.control.core import Core
from gg.control.people import require_admin
from gg.domain import hooks as rules
from gg.domain import tokens
from gg.domain.events import EventKind
from gg.domain.people import Person
from gg.errors import BadRequest, NotFound

SHOWN_DELIVERIES = 20  # `gg hook show`: this many of the newest deliveries


def add_hook(core: Core, actor: Person, *, url: str, on: str | list[str],
             environment: str | None = None) -> tuple[dict, str]:
    require_admin(actor)
    url = rules.check_url(url)
    events = rules.parse_on(on if isinstance(on, str) else ",".join(on))
    if environment is not None and not environment.strip():
        raise BadRequest("--env names an environment")
    secret = rules.new_secret()
    with core.store.atomic():
        hook = core.store.add_hook(id=tokens.new_id("h_"), url=url, events=events,
                                   environment=environment, secret=secret,
                                   created_by=actor.name, now=core.now())
        core.event(EventKind.HOOK_ADDED, actor=actor.name, hook=hook["id"], url=url,
                   events=events, environment=environment)
    return public_hook(hook), secret


def list_hooks(core: Core, actor: Person) -> list[dict]:
    require_admin(actor)
    return [public_hook(h) for h in core.store.hooks()]


def _hook(core: Core, hook_id: str) -> dict:
    hook = core.store.hook(hook_id)
    if hook is None or hook["removed_at"] is not None:
        raise NotFound(f"no hook {hook_id}")
    return hook


def show_hook(core: Core, actor: Person, hook_id: str) -> dict:
    require_admin(actor)
    hook = _hook(core, hook_id)
    deliveries = core.store.hook_deliveries(hook_id, SHOWN_DELIVERIES)
    for d in deliveries:
        d["event"] = rules.NAME_OF.get(d["kind"], d["kind"])
        d.pop("seq")
    return {"hook": public_hook(hook), "deliveries": deliveries}


def remove_hook(core: Core, actor: Person, hook_id: str) -> dict:
    """Remove the hook: nothing more is sent to it, undelivered rows included."""
    require_admin(actor)
    with core.store.atomic():
        hook = _hook(core, hook_id)
        now = core.now()
        core.store.remove_hook(hook_id, now)
        core.event(EventKind.HOOK_REMOVED, actor=actor.name, at=now, hook=hook_id,
                   url=hook["url"])
    removed = core.store.hook(hook_id)
    assert removed is not None, "a removed hook is marked so, and its row kept"
    return public_hook(removed)


def due(core: Core, limit: int, *, sending: Collection[int] = (),
        busy: Collection[str] = ()) -> list[dict]:
    """Outbox rows to try now (each with its hook's URL and secret), in order per flight;
    none of the rows ``sending`` nor of the hooks ``busy`` (the outbox's own bookkeeping)."""
    return core.store.due_hook_deliveries(core.now(), limit, sending=sending, busy=busy)


def next_due(core: Core, *, sending: Collection[int] = (),
             busy: Collection[str] = ()) -> float | None:
    return core.store.next_hook_due(sending=sending, busy=busy)


def answered(core: Core, row: dict, *, status: int | None, error: str | None) -> bool:
    """Record one attempt's answer; a 2xx delivers the row, anything else schedules the next
    attempt (capped backoff). True when delivered."""
    now = core.now()
    ok = rules.delivered(status)
    with core.store.atomic():
        attempt = core.store.hook_delivery_attempts(row["seq"]) + 1
        later = rules.next_try(attempt, now, base=core.settings.hook_backoff,
                               cap=core.settings.hook_backoff_cap)
        core.store.record_hook_attempt(row["seq"], attempt=attempt, at=now, status=status,
                                       error=error, delivered=ok, next_at=now if ok else later)
    return ok


def prune(core: Core, limit: int) -> int:
    """Forget up to ``limit`` delivered (or dropped) rows older than HOOK_RETAIN."""
    with core.store.atomic():
        return core.store.prune_hook_deliveries(core.now() - core.settings.hook_retain, limit)


def public_hook(hook: dict) -> dict:
    """A hook as it is shown: never its secret."""
    return {k: hook.get(k) for k in ("id", "url", "events", "environment", "created_by",
                                     "created_at", "removed_at")}
