"""Admin endpoints on runners: cordon, drain (one, or all advertising labels), resume,
retire, forget (DELETE), policy. Thin: schema -> control -> the runner's view."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from gg.api import paths
from gg.api.runners import Forgotten, Retired, RunnerDetail, StateChange, StateChanged
from gg.api.schemas import DrainSelection, PolicySet
from gg.control import admin, answers
from gg.domain.people import Person
from gg.server import auth
from gg.server.json_body import JsonRoute
from gg.server.off_loop import off_loop

router = APIRouter(route_class=JsonRoute)


def _state_change(action: str):
    def change(ref: str, request: Request, person: Person = Depends(auth.person)) -> dict:
        return answers.state_changed(request.app.state.core, person, ref, action)

    change.__name__ = f"{action}_runner"
    return change


@router.post(paths.RUNNERS_DRAIN, response_model=list[StateChange])
def drain_labelled(body: DrainSelection, request: Request,
                         person: Person = Depends(auth.person)) -> list[dict]:
    return admin.drain_labelled(request.app.state.core, person, body.labels)


for _action, _path in (("cordon", paths.RUNNER_CORDON), ("drain", paths.RUNNER_DRAIN),
                       ("resume", paths.RUNNER_RESUME)):
    router.post(_path, response_model=StateChanged)(_state_change(_action))


@router.post(paths.RUNNER_RETIRE, response_model=Retired)
async def retire(ref: str, request: Request, person: Person = Depends(auth.person)) -> dict:
    answer = await off_loop(answers.retired, request.app.state.core, person, ref)
    request.app.state.dispatcher.release(answer["runner"])  # its parked claim answers now; the next is refused
    return answer


@router.delete(paths.RUNNER, response_model=Forgotten)
async def forget(ref: str, request: Request, person: Person = Depends(auth.person)) -> dict:
    answer = await off_loop(answers.forgotten, request.app.state.core, person, ref)
    request.app.state.dispatcher.release(answer["runner"])
    return answer


@router.post(paths.RUNNER_POLICY, response_model=RunnerDetail)
def set_policy(ref: str, body: PolicySet, request: Request,
                     person: Person = Depends(auth.person)) -> dict:
    return answers.policy_set(request.app.state.core, person, ref, **body.model_dump())
