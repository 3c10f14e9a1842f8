"""What waits for a person: ``gg flights --pending`` (docs/approvals.md).

A gated flight is pending when one of its open gates is one a person may clear (an
approval, an environment's chart gate, a gate its opener clears); a gate only the machine
can clear is not. A flight that flies (or waits for a runner) is pending too while a change
to its spec waits for an approval. Each row carries the flight's waiting sentence from the
domain and, per gate, whether the person asking may clear it; an approval also carries the
digest of the spec approving it runs, its command, and what changed.
"""

from __future__ import annotations

from gg.control import flights as flight_ops
from gg.control.approvals import PERSON_CLEARERS, asked_for
from gg.control.core import Core
from gg.domain import approvals
from gg.domain.flights import Flight, Stage
from gg.domain.gates import Gate, refusal_to_clear
from gg.domain.people import Person


def pending(core: Core, person: Person, limit: int = 1000) -> list[dict]:
    """Gated flights behind a gate a person may clear (approvals among them), and flights
    whose changed spec waits for an approval, oldest first, each with its waiting sentence
    and, per gate, whether ``person`` may clear it."""
    now = core.now()
    rows = core.store.flight_values(stages=(Stage.GATED.value,), limit=100000)
    snap = flight_ops.Snapshot(core, now)
    snap.load_keys([values["id"] for values in rows])  # one read for the page, not one each
    proposals: dict[str, Gate] = {g.flight_id: g for g in snap.open_gates.values()
                                  if g.kind == approvals.KIND and g.flight_id
                                  and g.payload.get("proposed") is not None}
    seen = {values["id"] for values in rows}
    for flight_id in proposals:
        flight = None if flight_id in seen else core.store.flight(flight_id)
        if flight is not None and not flight.final:
            rows.append(flight_ops.view(flight, None, {}, {}))
    people = {p.id: p.name for p in core.store.people()}
    out = []
    for values in rows:
        gates = [snap.open_gates[g] for g in values["gates"] if g in snap.open_gates]
        if values["id"] in proposals:
            gates.append(proposals[values["id"]])
        personal = [g for g in gates if g.clearer in PERSON_CLEARERS]
        if not personal:
            continue
        row = flight_ops._view(values, snap.waiting_of(values), snap.names, people)
        row["pending"] = [_gate_row(g, person, values) for g in personal]
        out.append(row)
    out.sort(key=lambda r: r["opened_at"])
    return out[:limit]


def _gate_row(gate: Gate, person: Person, values: dict) -> dict:
    row = {"gate": gate.id, "kind": gate.kind, "guards": gate.guards, "why": gate.why,
           "who_may_clear": gate.cleared_by_words,
           "you_may_clear": refusal_to_clear(gate, person=person,
                                             flight_opener=values["opened_by"]) is None}
    if gate.kind == approvals.KIND:
        flight = Flight(**{k: values[k] for k in flight_ops._FLIGHT_FIELDS})
        row.update(asked_for(gate, flight))
    return row
