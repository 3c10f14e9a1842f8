"""Service flights: their spec, ``gg service update`` and ``gg services`` (gg.domain.services).

Opening one is ``open_flight`` with ``service=``; the spec it stores carries the server's
service settings, so the runner that keeps it running learns them from the control plane.
An update raises the spec's generation in one transaction; the runner holding the lease
learns it at its next renewal and reconciles (docs/services.md). Under an approval the
update goes through ``approvals.change``: the runner keeps the approved spec until the new
one is approved (docs/approvals.md).
"""

from __future__ import annotations

from dataclasses import replace

from gg.control import approvals as approval_ops
from gg.control.core import Core
from gg.domain import services
from gg.domain.events import EventKind
from gg.domain.flights import Stage
from gg.domain.people import Person
from gg.error_codes import ErrorCode
from gg.errors import BadRequest, Conflict, Forbidden, NotFound


def new_spec(core: Core, command: list[str], options: dict) -> dict:
    """The first spec of a service opened with ``options`` (``port``, ``ready_cmd``,
    ``socket_activation``)."""
    port, ready_cmd = options.get("port"), options.get("ready_cmd")
    problem = services.spec_problem(port, ready_cmd)
    if problem:
        raise BadRequest(problem)
    s = core.settings
    # only when asked for: a spec without it reads as before (and digests as before)
    activation = {"socket_activation": True} if options.get("socket_activation") else {}
    return {"generation": 1, "command": list(command), "env": {}, "port": port,
            "ready_cmd": ready_cmd, **activation, "backoff": s.service_backoff,
            "backoff_cap": s.service_backoff_cap, "ready_timeout": s.service_ready_timeout,
            "stop_grace": s.service_stop_grace, "degraded_after": s.service_degraded_after}


def update(core: Core, person: Person, flight_id: str, *, command: list[str] | None,
           env: dict[str, str] | None) -> tuple[dict, str | None]:
    """A new generation of a service (its opener or an admin): a new command, and/or
    environment variables set; the rest of the spec is kept. The spec asked for, and the
    approval gate it waits behind (None: it applies at once)."""
    if not command and not env:
        raise BadRequest("say what changes: gg service update F -- NEWCMD, or --set K=V")
    problem = services.env_problem(env or {})
    if problem:
        raise BadRequest(problem)
    now = core.now()
    with core.store.atomic():
        flight = core.store.flight(flight_id)
        if flight is None:
            raise NotFound(f"no flight {flight_id}")
        if flight.kind != services.KIND or flight.service is None:
            raise Conflict(f"flight {flight_id} is not a service", code=ErrorCode.NOT_A_SERVICE)
        if not person.is_admin and flight.opened_by != person.id:
            raise Forbidden("only the service's opener or an admin may update it")
        if flight.final:
            raise Conflict(f"service {flight_id} has {flight.stage}; open a new one",
                           code=ErrorCode.FLIGHT_FINAL)
        asked = approval_ops.as_asked(core, flight).spec
        spec = dict(asked.service or {})
        spec["generation"] = spec["generation"] + 1
        if command:
            spec["command"] = list(command)
        spec["env"] = {**spec.get("env", {}), **(env or {})}
        # The flight's command is the one that runs: gg show never shows an older one.
        gate = approval_ops.change(core, person, flight,
                                   replace(asked, command=tuple(spec["command"]), service=spec))
        core.event(EventKind.SERVICE_UPDATED, actor=person.name, flight_id=flight_id, at=now,
                   generation=spec["generation"], command=command is not None,
                   env=sorted((env or {}).keys()), approval=gate.id if gate else None)
    if gate is not None:
        core.signals.ready_changed()  # a waiting flight moved behind its new gate
    core.signals.flight_changed(flight_id)
    return spec, gate.id if gate else None


def list_services(core: Core, *, ended: bool = False) -> list[dict]:
    """Every service (not ended ones unless ``ended``), oldest first, with its state."""
    now = core.now()
    stages = None if ended else (Stage.GATED.value, Stage.READY.value, Stage.FLYING.value)
    names = {r.id: r.name for r in core.store.runners()}
    rows = []
    for values in core.store.flight_values(stages=stages, limit=100000):
        if values["kind"] != services.KIND or not values.get("service"):
            continue
        spec = values["service"]
        flying = values["stage"] == Stage.FLYING.value
        st = services.status(core.store.facts(values["id"]), epoch=values["epoch"],
                             wanted=spec["generation"],
                             degraded_after=spec.get("degraded_after", 3)) if flying else None
        rows.append({
            **{key: values[key] for key in ("id", "title", "stage", "epoch", "opened_at")},
            "runner": values["lease_runner"] if flying else None,
            "runner_name": names.get(values["lease_runner"]) if flying else None,
            "port": spec.get("port"),
            "generation": st.generation if st else None, "wanted_generation": spec["generation"],
            "restarts": st.restarts if st else 0, "ready": bool(st and st.ready),
            "uptime": (now - st.started_at) if st and st.started_at and st.ready else None,
            "health": st.health if st else values["stage"],
            "last_exit": st.last_exit if st else None, "update": st.update if st else None,
        })
    rows.sort(key=lambda r: r["opened_at"])
    return rows
