"""What every use case needs: the store, the settings, the clock, and the signals.

Use cases are plain functions ``fn(core, …)``: load what the domain needs, let it decide,
persist in one transaction, then raise a signal so the server can wake parked requests.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from gg import __version__, build_commit
from gg.control.credential_cache import CredentialCache
from gg.control.verdicts import Verdicts
from gg.domain import hooks as hook_rules
from gg.domain.durations import Summary
from gg.domain.events import EventKind
from gg.settings import Settings
from gg.store import Store

CONTROL_PLANE = "control-plane"


@dataclass
class Signals:
    """In-process wake-ups. The server subscribes; use cases call after they commit."""

    on_ready: list[Callable[[], None]] = field(default_factory=list)
    on_flight: list[Callable[[str], None]] = field(default_factory=list)
    on_event: list[Callable[[], None]] = field(default_factory=list)
    on_instruction: list[Callable[[str, str], None]] = field(default_factory=list)

    def ready_changed(self) -> None:
        for fn in self.on_ready:
            fn()

    def flight_changed(self, flight_id: str) -> None:
        for fn in self.on_flight:
            fn(flight_id)

    def event_added(self) -> None:
        for fn in self.on_event:
            fn()

    def instruct(self, runner_id: str, kind: str) -> None:
        """Tell a runner something at once (an :class:`gg.domain.runners.Instruction`): the
        server answers its parked claim with it (gg.server.dispatch.Dispatcher.instruct)."""
        for fn in self.on_instruction:
            fn(runner_id, kind)


@dataclass
class Core:
    store: Store
    settings: Settings
    clock: Callable[[], float] = time.time
    version: str = __version__
    commit: str = field(default_factory=build_commit)  # gg.build_commit: version skew
    signals: Signals = field(default_factory=Signals)
    started_at: float = 0.0
    silence_scanned_at: float = 0.0
    owner_token_path: object = None
    verdicts: Verdicts | None = None  # the meanings' verdicts (gg.control.verdicts)
    # flight id -> (shown at, at, low, high): the last start estimate shown for a waiting
    # flight, kept beside its start by the grant (gg.control.estimates); memory only
    shown_estimates: dict = field(default_factory=dict)
    # runner id -> when it last handed a flight back, and the summary of the time it then
    # took to start the next waiting one (gg.control.estimates); memory only
    lease_ended: dict = field(default_factory=dict)
    turnaround: Summary = field(default_factory=Summary)
    credentials: CredentialCache | None = None  # runner credential checks (its module)

    def __post_init__(self) -> None:
        if self.verdicts is None:
            self.verdicts = Verdicts(self.settings.meaning_deadline)
        if self.credentials is None:
            self.credentials = CredentialCache(self.settings.credential_cache_size,
                                               self.settings.credential_cache_ttl,
                                               lambda: self.clock())

    def now(self) -> float:
        return self.clock()

    def event(self, kind: EventKind, *, actor: str | None = None, runner_id: str | None = None,
              flight_id: str | None = None, at: float | None = None, **body) -> None:
        kind = EventKind(kind)
        at = self.now() if at is None else at
        with self.store.atomic():  # the event and its hooks' outbox rows: one transaction
            seq = self.store.add_event(kind.value, at, actor=actor, runner_id=runner_id,
                                       flight_id=flight_id, body=body)
            if kind.value in hook_rules.NAME_OF:
                self._queue_for_hooks(dict(seq=seq, kind=kind.value, at=at, actor=actor,
                                           runner_id=runner_id, flight_id=flight_id, body=body))

    def _queue_for_hooks(self, event: dict) -> None:
        """An outbox row for every hook that hears ``event`` (gg.domain.hooks)."""
        hooks = self.store.hooks()
        if not hooks:
            return
        flight_id = event["flight_id"]
        environment = self.store.flight_environment(flight_id) if flight_id else None
        for hook in hooks:
            if not hook_rules.hears(hook, event["kind"], environment):
                continue
            delivery_id = hook_rules.new_delivery_id()
            self.store.add_hook_delivery(
                id=delivery_id, hook_id=hook["id"], event_seq=event["seq"], kind=event["kind"],
                flight_id=flight_id, now=self.now(),
                body=hook_rules.body(delivery_id=delivery_id, hook_id=hook["id"], event=event,
                                     environment=environment))
