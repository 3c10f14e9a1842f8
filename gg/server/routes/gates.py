"""Gates: list, show, clear."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends, Request

from gg.api import paths
from gg.api.gates import Gate
from gg.control import answers, gates
from gg.domain.people import Person
from gg.server import auth
from gg.server.json_body import JsonRoute

router = APIRouter(route_class=JsonRoute)


@router.get(paths.GATES, response_model=list[Gate])
def list_gates(request: Request, person: Person = Depends(auth.person),
                     status: Literal["open", "cleared", "superseded", "rejected", "all"] = "open") -> list[dict]:
    return gates.list_gates(request.app.state.core, None if status == "all" else status)


@router.get(paths.GATE, response_model=Gate)
def show_gate(gate_id: str, request: Request, person: Person = Depends(auth.person)) -> dict:
    return answers.gate_shown(request.app.state.core, gate_id)


@router.post(paths.GATE_CLEAR, response_model=Gate)
async def clear_gate(gate_id: str, request: Request, person: Person = Depends(auth.person)) -> dict:
    return await answers.gate_cleared(request.app.state.core, person, gate_id)
