"""Retention: pruning ended flights and old events, one bounded batch per transaction.

The server's retention duty (``gg.server.retention``) calls :func:`prune_batch` again and
again, yielding between calls, until a batch finds nothing left; each call is one short
transaction touching at most ``RETENTION_BATCH`` rows of each table. A flight is pruned only
once it is final (landed, failed, cancelled) and ended longer than RETAIN_FLIGHTS ago, with
its facts, grants and events; events are pruned after RETAIN_EVENTS, except those of a flight
that is not final, and so are console sessions closed longer than RETAIN_EVENTS ago (a
session is a record of who reached which machine, kept as long as the events that tell it).
A window of 0 keeps everything.
"""

from __future__ import annotations

from dataclasses import dataclass

from gg.control import artifacts as artifact_ops
from gg.control.core import Core


@dataclass(frozen=True)
class Pruned:
    flights: int = 0
    rows: int = 0  # facts, grants and events of pruned flights
    events: int = 0  # events past their own window
    consoles: int = 0  # console sessions closed longer than the events' window ago

    @property
    def full(self) -> bool:
        """Did this batch do work (so another may find more)?"""
        return bool(self.flights or self.rows or self.events or self.consoles)


def prune_batch(core: Core) -> Pruned:
    """One bounded batch of pruning in one transaction."""
    settings, now = core.settings, core.now()
    limit = max(1, settings.retention_batch)
    flights = rows = events = consoles = 0
    with core.store.atomic():
        if settings.retain_flights > 0:
            cutoff = now - settings.retain_flights
            ids = core.store.prunable_flights(cutoff, limit)
            if ids:
                digests = artifact_ops.named_by(core, ids)  # their blobs, once unnamed
                for table in core.store.flight_children:
                    rows += core.store.delete_flight_children(table, ids, limit - rows)
                    if rows >= limit:
                        break
                else:
                    flights = core.store.delete_ended_flights(ids, cutoff)
                rows += artifact_ops.sweep(core, digests)
        if settings.retain_events > 0:
            cutoff = now - settings.retain_events
            events = core.store.prune_events(cutoff, limit)
            if events:
                core.store.note_events_pruned(cutoff)
            consoles = core.store.prune_closed_consoles(cutoff, limit)
    return Pruned(flights=flights, rows=rows, events=events, consoles=consoles)


def server_facts(core: Core) -> dict:
    """The retained windows and the store's size, for ``whoami`` and ``/metrics``."""
    return {"retain_flights": core.settings.retain_flights,
            "retain_events": core.settings.retain_events,
            "database_bytes": core.store.database_bytes()}
