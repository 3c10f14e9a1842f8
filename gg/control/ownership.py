"""Claim, unclaim, reserve, release a runner, and set whose it is (SPEC 11).

The rules are :mod:`gg.domain.ownership`; this applies them in one transaction, records an
event for every change, and wakes the dispatcher when a runner may now take more (a release,
an unclaim), since the matcher reads ``reserved`` and ``owner`` from the runner's row.
"""

from __future__ import annotations

from gg.control.core import Core
from gg.control.runners import resolve
from gg.control.views import runner_view
from gg.domain.ownership import Change, decide, decide_ownership
from gg.domain.people import Person


def change(core: Core, person: Person, ref: str, action: str) -> dict:
    with core.store.atomic():
        runner = resolve(core, ref)
        owner = core.store.person(runner.owner) if runner.owner else None
        outcome = decide(action, runner, person, owner.name if owner else None)
        _apply(core, person, runner.id, outcome)
    return _after(core, runner.id, outcome)


def set_ownership(core: Core, person: Person, ref: str, state: str) -> dict:
    with core.store.atomic():
        runner = resolve(core, ref)
        outcome = decide_ownership(state, runner, person)
        _apply(core, person, runner.id, outcome, before=runner.ownership)
    return _after(core, runner.id, outcome)


def _apply(core: Core, person: Person, runner_id: str, outcome: Change, *,
           before: str | None = None) -> None:
    if not outcome.values or outcome.event is None:  # a repeat: no values and no event
        return
    core.store.update_runner(runner_id, **outcome.values)
    body = dict(outcome.values)
    if before is not None:
        body["before"] = before
    core.event(outcome.event, actor=person.name, runner_id=runner_id, **body)


def _after(core: Core, runner_id: str, outcome: Change) -> dict:
    if outcome.values:
        core.signals.ready_changed()  # a release or unclaim may let it take waiting flights
    view = runner_view(core, core.runner_again(runner_id))
    view["changed"] = bool(outcome.values)
    return view
