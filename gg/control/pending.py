"""What waits for a person: ``gg flights --pending`` (docs/approvals.md).

A gated flight is pending when one of its open gates is one a person may clear (an
approval, an environment's chart gate, a gate its opener clears); a gate only the machine
can clear is not. Each row carries the flight's waiting sentence from the domain and, per
gate, whether the person asking may clear it.
"""

from __future__ import annotations

from gg.control import flights as flight_ops
from gg.control.approvals import PERSON_CLEARERS
from gg.control.core import Core
from gg.domain.flights import Stage
from gg.domain.gates import refusal_to_clear


def pending(core: Core, person: dict, limit: int = 1000) -> list[dict]:
    """Gated flights behind a gate a person may clear (approvals among them), oldest first,
    each with its waiting sentence and, per gate, whether ``person`` may clear it."""
    now = core.now()
    rows = core.store.flight_values(stages=(Stage.GATED.value,), limit=100000)
    snap = flight_ops.Snapshot(core, now)
    people = {p["id"]: p["name"] for p in core.store.people()}
    out = []
    for values in rows:
        gates = [snap.open_gates[g] for g in values["gates"] if g in snap.open_gates]
        personal = [g for g in gates if g.clearer in PERSON_CLEARERS]
        if not personal:
            continue
        row = flight_ops._view(values, snap.waiting_of(values), snap.names, people)
        row["pending"] = [{
            "gate": g.id, "kind": g.kind, "guards": g.guards, "why": g.why,
            "who_may_clear": g.cleared_by_words,
            "you_may_clear": refusal_to_clear(g, person=person,
                                              flight_opener=values["opened_by"]) is None,
        } for g in personal]
        out.append(row)
    out.sort(key=lambda r: r["opened_at"])
    return out[:limit]
