"""Gates: list, show, clear."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends, Request

from gg.api import paths
from gg.control import gates, labels
from gg.errors import NotFound
from gg.server import auth
from gg.server.json_body import JsonRoute

router = APIRouter(route_class=JsonRoute)


@router.get(paths.GATES)
async def list_gates(request: Request, person: dict = Depends(auth.person),
                     status: Literal["open", "cleared", "superseded", "all"] = "open") -> list[dict]:
    return gates.list_gates(request.app.state.core, None if status == "all" else status)


@router.get(paths.GATE)
async def show_gate(gate_id: str, request: Request, person: dict = Depends(auth.person)) -> dict:
    core = request.app.state.core
    gate = core.store.gate(gate_id)
    if gate is None:
        raise NotFound(f"no gate {gate_id}")
    return gates.view(core, gate)


@router.post(paths.GATE_CLEAR)
async def clear_gate(gate_id: str, request: Request, person: dict = Depends(auth.person)) -> dict:
    core = request.app.state.core
    gate = gates.clear_gate(core, gate_id, person=person)
    await labels.settled(core)  # a meaning that came into force: its verdicts
    return gates.view(core, gate)
