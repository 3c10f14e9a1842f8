"""Concurrency keys at the grant, and when a flight of a key ends (gg.domain.concurrency
decides; docs/jobs.md; opening is gg.control.keys_opened).

The grant's check holds across replicas: :func:`may_grant` runs inside the transaction that
grants, takes the key's lock (``Store.hold_concurrency_key``: on PostgreSQL an advisory lock
until the commit, tried, not waited for), counts the flights of the key flying as this
transaction sees them after the lock (every earlier grant of the key committed, its own
included) and asks the domain's rule again: no two replicas ever both start the (N+1)th
flight of a key. A key whose lock another replica's writer holds is passed by in this pass.
"""

from __future__ import annotations

from typing import Iterable

from gg.control.core import Core
from gg.domain.concurrency import GRACE_DEFAULT, Concurrency, Keys, held
from gg.domain.flights import Flight


def keys_for(core: Core, flights: Iterable[Flight]) -> Keys:
    """The keys of ``flights`` and who flies with each now (one read each; none when no
    flight has a key)."""
    of = core.store.concurrency_of([f.id for f in flights])
    flying = core.store.flying_with_keys({c.key for c in of.values()}) if of else {}
    return Keys(of, flying)


def may_grant(core: Core, flight: Flight, keys: Keys) -> bool | None:
    """Whether ``flight`` may be granted now, asked inside the granting transaction under
    its key's lock, from a fresh count (True for a flight without a key); None when another
    replica's writer holds the key's lock (ask again in the next pass)."""
    c = keys.of.get(flight.id)
    if c is None:
        return True
    if not core.store.hold_concurrency_key(c.key):
        return None
    flying = core.store.flying_with_keys([c.key]).get(c.key, [])
    return held(c, [f for f in flying if f != flight.id]) is None


def frees_a_key(core: Core, flight_id: str) -> bool:
    """Whether ``flight_id`` ending may let a flight held back by its key start (raise
    ``ready_changed``: a parked claim is granted it at once)."""
    return bool(core.store.concurrency_of([flight_id]))


def of_flight(core: Core, flight_id: str) -> dict:
    """What ``gg show`` and the flight's answer say of its key and grace."""
    c = core.store.concurrency_of([flight_id]).get(flight_id)
    grace = core.store.graces_of([flight_id]).get(flight_id)
    return fields(c, grace)


def fields(c: Concurrency | None, grace: float | None) -> dict:
    return {"concurrency": c.to_wire() if c is not None else None,
            "grace": grace if grace is not None else GRACE_DEFAULT}
