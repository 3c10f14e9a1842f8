"""Placement by size: load what :mod:`gg.domain.sizes` reads (each runner's room, the limits
each flight asked) for the claim, the waiting sentence and ``gg plan`` alike.

A runner's room costs one read of the flights it flies now with their limits (only for a
runner that flies any; the index ``flights_holder``), and a pass's flights their limits in
one primary-key read: nothing at all when no flight of the pass asked a limit.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from gg.control.core import Core
from gg.domain.limits import Limits
from gg.domain.matching import Seat
from gg.domain.runners import Runner
from gg.domain.sizes import Room, room

_NAMED = 200  # more runners than this flying: read every flying flight, not an IN-list


def rooms(core: Core, now: float, runners: list[Runner],
          live: Mapping[str, int]) -> dict[str, Room | None]:
    """runner id -> its room now (None: it reports no size). ``live``: how many flights
    each flies (a runner that flies none needs no read)."""
    flying_ids = [r.id for r in runners if live.get(r.id)]
    flying = (core.store.flying_limits(now, flying_ids if len(flying_ids) <= _NAMED else None)
              if flying_ids else {})
    return {r.id: room(r.inventory, r.policy, (_limits(d) for d in flying.get(r.id, ())))
            for r in runners}


def asked(core: Core, flight_ids: list[str]) -> dict[str, Limits]:
    """flight id -> the limits it asked, for those of ``flight_ids`` that asked any."""
    return {fid: _limits(d) for fid, d in core.store.limits_of(flight_ids).items()}


def with_sizes(core: Core, seats: list[Seat], flight_ids: list[str]) -> list[Seat]:
    """``seats`` knowing the limits ``flight_ids`` asked (one mapping shared by all): the
    same seats when none asked any or no seat reports a size."""
    if not any(s.room is not None for s in seats):
        return seats
    sizes = asked(core, flight_ids)
    if not sizes:
        return seats
    return [replace(s, sizes=sizes) for s in seats]


def _limits(data: Mapping | None) -> Limits:
    try:
        return Limits.from_dict(data)
    except ValueError:  # kept by an older rule: it limits nothing it cannot say
        return Limits()
