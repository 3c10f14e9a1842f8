"""Retries at the hand-back and at the claim (gg.domain.retries decides; docs/jobs.md).

A failed hand-back asks :func:`decide` inside its transaction; a retry moves the flight back
to ``ready`` through ``lifecycle.move`` (the edge ``flying --failed--> ready``) and
:func:`note` keeps why in the same transaction. A retry with a delay is *held*
(``flight_retries.held``: the claim's reads skip it) until :func:`release_due`, run by
whoever looks first at or after its time (the claim, a dispatch pass, a listing), exactly as
an expired lease is noticed: the dispatcher arranges a look at the earliest time due
(``Store.next_lease_expiry`` includes it), never a timer that decides.
"""

from __future__ import annotations

from gg.control.core import Core
from gg.domain import retries
from gg.domain.flights import Flight
from gg.domain.matching import Seat, elsewhere
from gg.domain.retries import Decision, Retry
from gg.errors import BadRequest


def settle(core: Core, asked: Retry | None, environment: str | None) -> Retry | None:
    """A new flight's retry settings: as asked, else its environment's ``retries:`` in the
    root envelope (None: it has no retries)."""
    default = core.store.root_retries().get(environment) if environment else None
    settled = retries.settle(asked, default)
    if settled is None and asked is not None and asked.retries is None and (
            asked.on is not None or asked.delay is not None or asked.elsewhere):
        raise BadRequest("--retry-on, --retry-delay and --retry-elsewhere need --retries N "
                         "(or retries: for its environment in the root envelope)")
    return settled


def keep(core: Core, flight_id: str, settled: Retry | None) -> None:
    """In the opening's transaction: a row only for a flight with retries."""
    if settled is not None:
        core.store.set_retry(flight_id, settled)


def decide(core: Core, flight: Flight, *, outcome: str, exit_code: int | None,
           reason: str | None, runner_id: str, now: float) -> Decision | None:
    """Whether this hand-back's attempt is retried (read in the hand-back's transaction)."""
    if outcome != retries.FAILED:
        return None
    state = core.store.retry_state(flight.id)
    if state is None:
        return None
    return retries.decide(state.retry, state.retried, outcome=outcome, exit_code=exit_code,
                          reason=reason, runner_id=runner_id, now=now)


def note(core: Core, flight: Flight, decision: Decision, *, runner_id: str, now: float) -> None:
    """The retry was applied: keep its number, its delay and why (same transaction)."""
    core.store.note_retry(flight.id, decision, epoch=flight.epoch, runner_id=runner_id, at=now)


def release_due(core: Core, now: float) -> int:
    """Offer again every retry whose delay is over (:func:`gg.domain.retries.due`, the clock
    comparison); the number released. Cheap when none is held: one indexed read."""
    due_at = core.store.next_retry_due()
    if due_at is None or due_at > now:
        return 0
    held = core.store.held_retries()
    return core.store.release_retries([fid for fid, p in held.items()
                                       if retries.due(p.offer_at, now)])


def avoid_for(core: Core, flights: list[Flight], seats: list[Seat] | None = None,
              now: float | None = None) -> dict[str, str]:
    """flight id -> the runner a ``--retry-elsewhere`` retry is not offered to now, for those
    of ``flights`` where another runner could take it (:func:`gg.domain.matching.elsewhere`
    over the whole fleet's seats: ``seats``, else read here when some flight needs them)."""
    avoided = core.store.avoided_runners([f.id for f in flights]) if flights else {}
    if not avoided:
        return {}
    if seats is None:
        from gg.control import estimates as estimate_ops  # the fleet's seats, read once

        seats = estimate_ops.fleet_seats(core, core.now() if now is None else now)
    by_id = {f.id: f for f in flights}
    return {fid: runner for fid, runner in avoided.items()
            if elsewhere(by_id[fid], runner, seats)}


def view(core: Core, flight_id: str) -> dict:
    """What ``gg show`` and the flight's answer say of its retries and reruns."""
    state = core.store.retry_state(flight_id)
    out: dict = {"retry": None, "retried": 0, "rerun_of": core.store.rerun_of(flight_id),
                 "reruns": core.store.reruns(flight_id)}
    if state is not None:
        r = state.retry
        out["retry"] = {"retries": r.retries, "on": list(r.on or retries.ON_DEFAULT),
                        "delay": r.delay, "elsewhere": bool(r.elsewhere), "text": r.text}
        out["retried"] = state.retried
    return out


def attempts(core: Core, flight: Flight, *, grants: list[dict], facts: list[dict],
             names: dict[str, str]) -> list[dict]:
    """Its attempts (one per grant), each with how it ended and why, read from the facts of
    its epoch: the holder's ``exit`` or ``returned`` hand-back, the control plane's
    ``expired``; a retried failure with its retry's sentence; the last with the flight's own
    ending when that came otherwise (cancelled)."""
    retried = core.store.retried_attempts(flight.id) if grants else {}
    ends: dict[int, dict] = {}
    for fact in facts:
        kind, body = fact["kind"], fact.get("body") or {}
        if kind == "exit":
            ends[fact["epoch"]] = {"ended": body.get("outcome"), "exit_code": body.get("exit_code"),
                                   "reason": body.get("reason") or _exit_words(body)}
        elif kind == "returned":
            ends[fact["epoch"]] = {"ended": "returned", "reason": body.get("reason")}
        elif kind == "expired" and fact.get("runner_id") is None:
            ends[fact["epoch"]] = {"ended": "expired", "reason": "its lease expired"}
    out = []
    for i, g in enumerate(grants):
        epoch = g["epoch"]
        row = {"attempt": i + 1, "epoch": epoch, "runner": g["runner_id"],
               "runner_name": names[g["runner_id"]], "granted_at": g["granted_at"],
               "ended": None, "exit_code": None, "reason": None, "retry": None,
               "offered_at": None}
        row.update(ends.get(epoch, {}))
        if row["ended"] is None and epoch == flight.epoch and flight.final:
            row.update(ended=flight.stage, reason=flight.ended_reason)
        if epoch in retried:
            r = retried[epoch]
            row["retry"] = f"retry {r['retry']} of {r['of']} {r['cause']}"
            row["offered_at"] = r["offer_at"]
        out.append(row)
    return out


def _exit_words(body: dict) -> str | None:
    code = body.get("exit_code")
    return f"exit {code}" if code is not None else None
