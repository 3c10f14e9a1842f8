"""Dependencies between flights (``--after``): checked at opening, settled when one ends.

A dependency's ending is settled in the transaction that records it: :func:`ended` is called
by :func:`gg.control.lifecycle.move` for every change to a final stage, whoever made it (a
hand-back, an expiry, a cancel, an attended flight not taken), so no timer or poll ever
looks for ended dependencies. A dependent whose last dependency landed is released at once
(the claim may offer it: the signal wakes a parked claim before the commit), and one whose
dependency failed is cancelled, and its own dependents in turn (docs/work-graphs.md).
"""

from __future__ import annotations

from collections.abc import Callable

from gg.control.core import CONTROL_PLANE, Core
from gg.domain import approvals
from gg.domain import dependencies as rules
from gg.domain.dependencies import Dependency
from gg.domain.flights import Change, Flight, Stage
from gg.errors import BadRequest

# Cancels one dependent (as read in this transaction) with a reason and the dependency that
# failed first; False when it moved on meanwhile. gg.control.lifecycle hands its own ``move``
# in, so that this module, which ``move`` calls, does not import it back.
Cancel = Callable[[Flight, str, str], bool]


def check_open(core: Core, asked: list[str], any_end: bool) -> tuple[list[str], bool]:
    """The distinct dependencies of a flight about to open, and whether they hold it back;
    BadRequest (one sentence, nothing opened) when it may not open after them."""
    ids = rules.distinct(asked)
    if len(ids) > rules.MAX_DEPENDENCIES:  # refused before reading a hundred flights
        raise BadRequest(rules.open_refusal(ids, {}, any_end) or "")
    found = core.store.dependency_flights(ids)
    if problem := rules.open_refusal(ids, found, any_end):
        raise BadRequest(problem)
    return ids, rules.holding([found[i] for i in ids], any_end) is not None


def record(core: Core, flight_id: str, *, ids: list[str], any_end: bool, held: bool) -> None:
    """The new flight's dependencies, in the transaction that opens it."""
    if ids:
        core.store.add_dependencies(flight_id, ids, any_end=any_end, held=held)


def ended(core: Core, flight: Flight, change: Change, *, now: float, cancel: Cancel) -> None:
    """``flight`` just ended (``change``, applied in this transaction): release the
    dependents it was the last to hold, and cancel those it fails, however deep (a walk,
    not a recursion: a chain may be long)."""
    work: list[tuple[str, str, str | None, tuple[str, str] | None]] = [
        (flight.id, Stage(change.to).value, change.values.get("ended_reason"), None)]
    while work:
        ended_id, stage, reason, origin = work.pop(0)
        word = rules.ended_word(stage, reason)
        for dependent, any_end in core.store.waiting_dependents(ended_id):
            if word is None or any_end:
                _release_if_free(core, dependent.id, any_end)
                continue
            first = origin or (ended_id, word)
            why = rules.cancel_reason(*first)
            if not cancel(dependent, why, first[0]):
                continue  # it moved meanwhile (a stale reading): nothing was written
            withdraw_approvals(core, dependent.id, now)
            core.signals.flight_changed(dependent.id)
            work.append((dependent.id, Stage.CANCELLED.value, why, first))


def withdraw_approvals(core: Core, flight_id: str, now: float) -> None:
    """A dependent cancelled before its approval: its open approval gate is closed
    ``superseded``, as gg.control.approvals.withdraw does for a cancel (that module moves
    flights through gates, which this one, called by every move, may not import)."""
    for gate in core.store.flight_gates(flight_id, kind=approvals.KIND):
        core.store.update_gate(gate.id, status="superseded", cleared_at=now,
                               cleared_by=CONTROL_PLANE)


def _release_if_free(core: Core, flight_id: str, any_end: bool) -> None:
    if rules.holding(core.store.dependencies_of(flight_id), any_end) is not None:
        return
    if core.store.release_dependent(flight_id):
        core.signals.ready_changed()  # a parked claim is offered it in this group commit
        core.signals.flight_changed(flight_id)


def held_by(core: Core, flight_id: str) -> tuple[Dependency | None, bool]:
    """The first dependency that still holds the flight back (None: none does), and whether
    any ending of its dependencies will do."""
    after = core.store.after_of(flight_id)
    if after is None or not after[1]:
        return None, bool(after and after[0])
    any_end = after[0]
    return rules.holding(core.store.dependencies_of(flight_id), any_end), any_end


def view(core: Core, flight_id: str) -> dict:
    """What ``gg show`` and the flight's answer carry: its dependencies (in the order
    given), whether any ending will do, and the flights opened after it."""
    after = core.store.after_of(flight_id)
    return {"after": [_brief(d) for d in core.store.dependencies_of(flight_id)]
            if after else [],
            "after_any": bool(after and after[0]),
            "dependents": [_brief(d) for d in core.store.dependents_of(flight_id)]}


_LINKED = ("id", "title", "stage", "ended_reason")  # gg.api.flights.Linked


def _brief(d: Dependency) -> dict:
    return {name: getattr(d, name) for name in _LINKED}
