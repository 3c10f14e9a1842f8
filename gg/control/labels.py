"""Label dispositions, computed when something they depend on changes, and stored.

A disposition depends on three things: the runner's labels, its reported facts (inventory
and capabilities), and the meanings in force. So it is recomputed when a runner registers
or checks in with new labels, inventory or capabilities, and when an environment's meaning
comes into force; the result is stored (``label_dispositions``) and the matcher only reads
it. Evaluating CEL on every claim would cost about 0.2 ms per runner; reading a stored
list costs nothing.

The verdicts come from ``core.verdicts`` (``gg.control.verdicts``): cached per facts, and
computed in a worker process under a deadline, never on the event loop. When a verdict is
not cached yet, :func:`refresh` keeps the label's last verdict (or stores it as stated,
"being evaluated", when it has none) and schedules :func:`settle`, which evaluates off the
loop and recomputes the runners concerned; the routes that change dispositions await
:func:`settled` before they answer, so what they answer is already the verdict.

A runner whose stored dispositions were computed for other labels than it has now (labels
set by some other path) is treated as nothing refuted until the next computation: unknown
is never refutation. ``gg runner labels`` recomputes such stale rows when it looks.
"""

from __future__ import annotations

import asyncio
import logging
from functools import lru_cache

from gg.control.cel import compile_meaning
from gg.control.core import CONTROL_PLANE, Core
from gg.domain.environments import label_pair
from gg.domain.events import EventKind
from gg.domain.labels import (
    Disposition,
    LabelDisposition,
    Verdict,
    check_labels,
    dispositions,
    refuted_pairs,
)
from gg.domain.meanings import Meaning, facts_from_inventory
from gg.domain.pull import KIND as PULL_KIND
from gg.domain.runners import Runner, is_online
from gg.errors import BadRequest

log = logging.getLogger("gg.server")
_ROUNDS = 8  # settle rounds in a row at most (facts that keep changing wait for a check-in)

# Only a registered or pull-mode runner states its own labels (`gg runner up [--listen]
# --labels`); enrolled machines and pool members get theirs from their profile or strategy,
# so a check-in cannot change them.
SELF_LABELLED = ("registered", PULL_KIND)


def checked(labels: dict[str, str] | None) -> dict[str, str]:
    """Labels from a request, refused with one sentence if any is malformed or a reading."""
    try:
        return check_labels(labels or {})
    except ValueError as exc:
        raise BadRequest(str(exc), code="invalid_label") from None


@lru_cache(maxsize=1024)
def _compiled(text: str, cost_limit: int) -> Meaning:
    return compile_meaning(text, cost_limit)


def meanings_in_force(core: Core) -> dict[str, Meaning]:
    """``"environment=X"`` -> compiled meaning, for every environment with one in force."""
    found = {}
    for env in core.store.environments():
        if env.meaning:
            try:
                found[label_pair(env.name)] = _compiled(env.meaning,
                                                        core.settings.meaning_cost_limit)
            except Exception:  # noqa: BLE001 -- a stored meaning always compiled once; if a
                continue  # newer gg refuses it, the label is left stated, never refuted
    return found


def refresh(core: Core, runner: Runner, meanings: dict[str, Meaning] | None = None) -> list[dict]:
    """Recompute and store ``runner``'s dispositions (inside the caller's transaction).

    Records ``warn:runner:label_refuted`` for each label that has just become refuted. A
    label whose verdict is still being evaluated keeps its last measured or refuted
    disposition until the verdict arrives (:func:`settle`), so new facts never make a
    refuted label usable before they are checked; with none, it is not usable meanwhile
    (and no refutation is recorded for it: it is only waiting).
    """
    if meanings is None:
        meanings = meanings_in_force(core)
    facts = facts_from_inventory(runner.inventory, runner.capabilities, runner.labels)
    verdicts = core.verdicts
    pending: set[str] = set()

    def judge(pair: str, meaning: Meaning):
        def verdict(facts: dict):
            answer = verdicts.decide(meaning, facts)
            if answer is Verdict.PENDING:
                pending.add(pair)
            return answer
        return verdict

    found = dispositions(runner.labels, {p: judge(p, m) for p, m in meanings.items()}, facts)
    before = core.store.dispositions_of(runner.id)
    if pending:
        _schedule(core, runner.id)
        last = {d["pair"]: d for d in (before or {}).get("dispositions", [])
                if d["disposition"] != Disposition.STATED.value}
        found = [LabelDisposition(d.key, d.value, Disposition(last[d.pair]["disposition"]),
                                  last[d.pair]["reason"])
                 if d.pair in pending and d.pair in last else d for d in found]
    refuted = refuted_pairs(found)
    was = set(before["refuted"]) if before else set()
    rows = [{"key": d.key, "value": d.value, "pair": d.pair,
             "disposition": d.disposition.value, "reason": d.reason} for d in found]
    core.store.save_dispositions(runner.id, labels=dict(runner.labels), dispositions=rows,
                                 refuted=sorted(refuted), at=core.now())
    slow = {d.pair for d in found if d.disposition is Disposition.REFUTED
            and d.reason != f"the runner's facts contradict the meaning of {d.pair}"}
    for pair in sorted(refuted - was - pending):
        reason = (f"the meaning of {pair} took too long on the facts of runner {runner.name}"
                  if pair in slow else
                  f"the facts of runner {runner.name} contradict the meaning of {pair}")
        core.event(EventKind.RUNNER_LABEL_REFUTED, actor=CONTROL_PLANE, runner_id=runner.id,
                   label=pair, reason=reason)
    return rows


def _schedule(core: Core, runner_id: str) -> None:
    """Remember that ``runner_id`` waits for a verdict, and make sure :func:`settle` runs.

    Only reached on the event loop's thread (elsewhere a verdict is computed on the spot)."""
    verdicts = core.verdicts
    verdicts.waiting.add(runner_id)
    if verdicts.task is None or verdicts.task.done():
        verdicts.task = asyncio.get_running_loop().create_task(settle(core))


async def settle(core: Core) -> None:
    """Evaluate the verdicts that were missing, off the loop, then recompute the runners
    that waited for them (a transaction per round; nothing in it evaluates CEL)."""
    verdicts = core.verdicts
    for _ in range(_ROUNDS):
        if not verdicts.waiting:
            return
        misses, verdicts.misses = list(verdicts.misses.values()), {}
        verdicts.settling, verdicts.waiting = set(verdicts.waiting), set()
        try:
            await asyncio.gather(*(verdicts.evaluate(m, f) for m, f in misses))
            with core.store.atomic():
                for runner_id in sorted(verdicts.settling):
                    runner = core.store.runner(runner_id)
                    if runner is not None:
                        refresh(core, runner)
        except Exception as exc:  # noqa: BLE001 -- the labels stay stated until a check-in
            log.warning("meaning verdicts: %s: %s", type(exc).__name__, exc)
            verdicts.waiting.clear()
        finally:
            verdicts.settling = set()
        core.signals.ready_changed()  # a label may have become usable, or been refuted
    verdicts.waiting.clear()  # still changing after every round: the next check-in retries
    verdicts.misses.clear()


async def settled(core: Core, runner_id: str | None = None) -> bool:
    """Wait until the verdicts the last use case missed are in (all of them, or those of
    ``runner_id``). True when there was something to wait for."""
    verdicts = core.verdicts
    task = verdicts.task
    if task is None or task.done():
        return False
    if runner_id is not None and runner_id not in verdicts.waiting | verdicts.settling:
        return False
    await asyncio.shield(task)
    return True


def refresh_advertising(core: Core, pair: str) -> int:
    """Recompute every runner that states ``pair`` (a meaning for it changed)."""
    key, _, value = pair.partition("=")
    meanings = meanings_in_force(core)
    count = 0
    for runner in core.store.runners():
        if runner.labels.get(key) == value:
            refresh(core, runner, meanings)
            count += 1
    return count


def after_check_in(core: Core, runner: Runner, *, labels: dict[str, str] | None,
                   facts_changed: bool) -> bool:
    """Apply a check-in's labels (registered runners only) and recompute dispositions when
    labels or facts changed. Inside the caller's transaction; True when anything changed
    that might make a flight offerable."""
    changed = facts_changed
    if labels is not None and runner.kind in SELF_LABELLED:
        labels = checked(labels)
        if labels != runner.labels:
            core.store.update_runner(runner.id, labels=labels)
            core.event(EventKind.RUNNER_LABELS_CHANGED, actor=f"runner:{runner.name}",
                       runner_id=runner.id, before=runner.labels, after=labels)
            changed = True
    if not changed:
        stored = core.store.dispositions_of(runner.id)
        if stored is not None and stored["labels"] == runner.labels:
            return False
    refresh(core, core.store.runner(runner.id))
    return True


def labels_view(core: Core) -> list[dict]:
    """Every runner's labels with their dispositions (``gg runner labels``)."""
    now = core.now()
    stored = core.store.all_dispositions()
    stale = [r for r in core.store.runners()
             if r.id not in stored or stored[r.id]["labels"] != r.labels]
    if stale:
        with core.store.atomic():
            meanings = meanings_in_force(core)
            for runner in stale:
                refresh(core, core.store.runner(runner.id) or runner, meanings)
        stored = core.store.all_dispositions()
    rows = []
    for runner in core.store.runners():
        entry = stored.get(runner.id) or {"dispositions": [], "computed_at": None}
        rows.append({"runner": runner.id, "name": runner.name,
                     "online": is_online(runner, now, core.settings.offline_after),
                     "labels": entry["dispositions"], "computed_at": entry["computed_at"]})
    return rows
