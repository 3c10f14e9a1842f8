"""Several maintainers, one pool: who is live, and what ``gg pools`` shows of each.

A maintainer checks in for its pool every time it asks for the plan (saying how many members
its host can hold) and records its own attestation; the control plane keeps both in
``maintainer_checkins`` and splits the plan among the live ones
(:func:`gg.domain.pool_shares.share_plan`). Live is the usual silence rule of every runner:
its runner row is online (a check-in within ``offline_after``, no goodbye since) and not
retired. A maintainer that goes silent stops counting at once: its members are orphans the
plan removes, and its share of the starts goes to the others.
"""

from __future__ import annotations

from gg.control.core import Core
from gg.domain.pool_shares import Seat
from gg.domain.pools import PoolMember
from gg.domain.runners import Runner, is_online


def live_seats(core: Core, pool: str, now: float, asking: Runner | None = None) -> list[Seat]:
    """The pool's live maintainers, as they last checked in. ``asking`` (the maintainer whose
    request this is) is live whatever its last check-in says."""
    seats = []
    checkins = core.store.maintainer_checkins(pool)
    runners = {r.id: r for r in core.store.runners(ids=[c["runner_id"] for c in checkins])}
    for c in checkins:
        runner = runners.get(c["runner_id"])
        if runner is None or runner.retired_at is not None:
            continue
        if (asking is not None and runner.id == asking.id) or is_online(
                runner, now, core.settings.offline_after):
            seats.append(Seat(runner.id, c["capacity"], c["failing"]))
    if asking is not None and all(s.maintainer_id != asking.id for s in seats):
        seats.append(Seat(asking.id))
    return seats


def maintainers_view(core: Core, pool: str, *, members: list[PoolMember], now: float,
                     live: set[str]) -> list[dict]:
    """``gg pools``' rows for each maintainer that checked in: whether it is live, its host's
    capacity, its members, and its last attestation's backoff."""
    checkins = core.store.maintainer_checkins(pool)
    runners = {r.id: r for r in core.store.runners(ids=[c["runner_id"] for c in checkins])}
    out = []
    for c in checkins:
        runner = runners.get(c["runner_id"])
        if runner is None or runner.retired_at is not None:
            continue
        held = [m.id for m in members if m.maintainer_id == runner.id]
        if runner.id not in live and not held:
            continue  # gone, holding nothing: history only
        attestation = c["attestation"] or {}
        out.append({"id": runner.id, "name": runner.name, "online": runner.id in live,
                    "capacity": c["capacity"], "failing": c["failing"],
                    "checked_in_at": c["checked_in_at"], "attested_at": c["attested_at"],
                    "members": held, "backoff": attestation.get("backoff")})
    return out
