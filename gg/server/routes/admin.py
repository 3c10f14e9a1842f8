"""Admin endpoints on runners: cordon, drain (one, or all advertising labels), resume,
retire, forget (DELETE), policy. Thin: schema -> control -> the runner's view."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from gg.api import paths
from gg.api.schemas import DrainSelection, PolicySet
from gg.control import admin, views
from gg.server import auth
from gg.server.json_body import JsonRoute

router = APIRouter(route_class=JsonRoute)


def _state_change(action: str):
    async def change(ref: str, request: Request, person: dict = Depends(auth.person)) -> dict:
        core = request.app.state.core
        change = admin.change_state(core, person, ref, action)
        return {**change, "view": views.runner_view(core, core.store.runner(change["runner"]))}

    change.__name__ = f"{action}_runner"
    return change


@router.post(paths.RUNNERS_DRAIN)
async def drain_labelled(body: DrainSelection, request: Request,
                         person: dict = Depends(auth.person)) -> list[dict]:
    return admin.drain_labelled(request.app.state.core, person, body.labels)


for _action, _path in (("cordon", paths.RUNNER_CORDON), ("drain", paths.RUNNER_DRAIN),
                       ("resume", paths.RUNNER_RESUME)):
    router.post(_path)(_state_change(_action))


@router.post(paths.RUNNER_RETIRE)
async def retire(ref: str, request: Request, person: dict = Depends(auth.person)) -> dict:
    core = request.app.state.core
    runner, stopping = admin.retire(core, person, ref)
    request.app.state.dispatcher.release(runner.id)  # its parked claim answers now; the next is refused
    return {"runner": runner.id, "name": runner.name, "state": runner.admin_state,
            "retired_at": runner.retired_at, "stopping": stopping}


@router.delete(paths.RUNNER)
async def forget(ref: str, request: Request, person: dict = Depends(auth.person)) -> dict:
    core = request.app.state.core
    runner = admin.forget(core, person, ref)
    request.app.state.dispatcher.release(runner.id)
    return {"runner": runner.id, "name": runner.name, "forgotten": True}


@router.post(paths.RUNNER_POLICY)
async def set_policy(ref: str, body: PolicySet, request: Request,
                     person: dict = Depends(auth.person)) -> dict:
    core = request.app.state.core
    runner = admin.set_policy(core, person, ref, isolation=body.isolation, egress=body.egress,
                              workers=body.workers)
    return views.runner_view(core, runner, detail=True)
