"""Pool strategies on the control plane: apply (with the gate rule), pin a built image, list.

::

    apply --first apply, or any change that lets the pool do more--> gate (strategy, admin)
                                          --cleared--> the whole applied strategy is in force
    apply --only fewer machines--> in force at once (any open gate is superseded)
    gg strategy build --> the built digest is pinned at once, on the applied strategy and on
                          the one in force (a new digest rolls the pool)

A strategy's pool name (``inventory.name``) belongs to it for good: another strategy may not
take it, and the strategy may not rename it (its members carry the name).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gg.airspace import strategy_from_mapping
from gg.control import gates as gate_ops
from gg.control.core import Core
from gg.control.people import require_admin
from gg.domain.events import EventKind
from gg.domain.gates import Gate
from gg.domain.people import Person
from gg.domain.pools import StrategyRecord, strategy_changes
from gg.domain.strategies import Strategy, digest_problem
from gg.errors import BadRequest, Conflict, NotFound

GATE_KIND = "strategy"


def apply(core: Core, person: Person, name: str, mapping: Any) -> dict:
    """Validate and apply strategy ``name``; widening changes wait behind a gate."""
    require_admin(person)
    strategy = strategy_from_mapping(name, mapping)
    pool = strategy.inventory.name
    now = core.now()
    gate: Gate | None = None
    with core.store.atomic():
        record = core.store.strategy(name)
        owner = core.store.strategy_for_pool(pool)
        if owner is not None and owner.name != name:
            raise Conflict(f"pool {pool} belongs to strategy {owner.name} already; "
                           "a pool has one strategy")
        if record is not None and record.pool != pool:
            raise Conflict(f"strategy {name} runs pool {record.pool}; a pool cannot be renamed "
                           f"(its members carry the name): apply pool {pool} under another "
                           "strategy name")
        if record is not None and strategy.image.digest is None and record.applied.image.digest:
            # A file that pins nothing keeps what gg strategy build pinned.
            strategy = _with_digest(strategy, record.applied.image.digest)
        base = record.in_force if record else None
        changes = strategy_changes(base, strategy)
        if record is not None and record.gate_id and record.applied == strategy:
            status, gate = "gated", core.store.gate(record.gate_id)
        elif any(c.gated for c in changes):
            status = "gated"
            gate = gate_ops.open_gate(
                core, kind=GATE_KIND, subject=f"strategy:{name}",
                guards=f"pool strategy {name} (pool {pool}, environment {strategy.environment})",
                why="; ".join(c.text for c in changes if c.gated), clearer="admin",
                actor=person.name, payload={"strategy": name, "pool": pool})
            _save(core, record, strategy=strategy, now=now, person=person, gate_id=gate.id)
        else:
            status = "applied" if changes else "unchanged"
            if record is not None and record.gate_id:
                core.store.update_gate(record.gate_id, status="superseded", cleared_at=now,
                                       cleared_by=person.name)
            _save(core, record, strategy=strategy, now=now, person=person, gate_id=None,
                  in_force=True)
        core.event(EventKind.STRATEGY_APPLIED, actor=person.name, at=now, strategy=name,
                   pool=pool, status=status, changes=[c.text for c in changes])
        record = _record(core, name)
    return {"strategy": view(record), "status": status,
            "changes": [c.to_dict() for c in changes],
            "gate": gate_ops.view(core, gate) if gate else None}


def _save(core: Core, record: StrategyRecord | None, *, strategy: Strategy, now: float,
          person: Person, gate_id: str | None, in_force: bool = False) -> None:
    values: dict[str, Any] = {"applied": strategy, "applied_at": now,
                              "applied_by": person.name, "gate_id": gate_id}
    if in_force:
        values.update(in_force=strategy, in_force_at=now)
    if record is None:
        core.store.insert_strategy(StrategyRecord(name=strategy.name,
                                                  pool=strategy.inventory.name, **values))
    else:
        core.store.update_strategy(record.name, **values)


def bring_into_force(core: Core, gate: Gate) -> None:
    """The whole strategy the gate guarded comes into force (inside clear_gate's transaction)."""
    record = core.store.strategy_by_gate(gate.id)
    if record is None:
        return
    core.store.update_strategy(record.name, in_force=record.applied, in_force_at=core.now(),
                               gate_id=None)


def pin_digest(core: Core, person: Person, name: str, digest: str) -> dict:
    """Pin the image ``gg strategy build`` made; a digest that differs rolls the pool."""
    require_admin(person)
    problem = digest_problem(digest)
    if problem:
        raise BadRequest(f"digest {problem}")
    now = core.now()
    with core.store.atomic():
        record = _record(core, name)
        was = record.applied.image.digest
        values: dict[str, Any] = {"applied": _with_digest(record.applied, digest)}
        if record.in_force is not None:
            values["in_force"] = _with_digest(record.in_force, digest)
        core.store.update_strategy(name, **values)
        core.event(EventKind.STRATEGY_PINNED, actor=person.name, at=now, strategy=name,
                   pool=record.pool, digest=digest, was=was)
        record = _record(core, name)
    return {"strategy": view(record), "changed": was != digest, "was": was}


def list_strategies(core: Core) -> list[dict]:
    return [view(r) for r in core.store.strategies()]


def show(core: Core, name: str) -> dict:
    return view(_record(core, name))


def view(record: StrategyRecord) -> dict:
    strategy = record.in_force or record.applied
    return {
        "name": record.name,
        "pool": record.pool,
        "environment": strategy.environment,
        "driver": strategy.driver,
        "digest": strategy.image.digest,
        "in_force": record.in_force is not None,
        "gate": record.gate_id,
        "applied": record.applied.to_dict(),
        "strategy_in_force": record.in_force.to_dict() if record.in_force else None,
        "pending": ([c.to_dict() for c in strategy_changes(record.in_force, record.applied)]
                    if record.gate_id else []),
        "applied_at": record.applied_at,
        "applied_by": record.applied_by,
        "in_force_at": record.in_force_at,
    }


def _record(core: Core, name: str) -> StrategyRecord:
    record = core.store.strategy(name)
    if record is None:
        raise NotFound(f"no strategy {name}: apply it with gg strategy apply {name} FILE")
    return record


def _with_digest(strategy: Strategy, digest: str) -> Strategy:
    return replace(strategy, image=replace(strategy.image, digest=digest))
