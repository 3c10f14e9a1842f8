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
loop and recomputes that runner, a task per runner, within the runner's allowance of new
facts; the routes that change dispositions await :func:`settled` before they answer, so
what they answer is already the verdict, except a check-in, which waits at most
CHECK_IN_VERDICT_WAIT (its answer shows no verdict; the stored dispositions change when it
lands, and whoever waits for a runner to become ready is woken).

A runner whose stored dispositions were computed for other labels than it has now (labels
set by some other path) is treated as nothing refuted until the next computation: unknown
is never refutation. ``gg runner labels`` recomputes such stale rows when it looks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from functools import lru_cache
from typing import Any, Callable, TypeVar

from gg.control import verdicts as verdict_rules
from gg.control.core import CONTROL_PLANE, Core
from gg.control.verdicts import digest, facts_read
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
from gg.error_codes import ErrorCode
from gg.errors import BadRequest

T = TypeVar("T")
log = logging.getLogger("gg.server")

# Only a registered or pull-mode runner states its own labels (`gg runner up [--listen]
# --labels`); enrolled machines and pool members get theirs from their profile or strategy,
# so a check-in cannot change them.
SELF_LABELLED = ("registered", PULL_KIND)


def checked(labels: dict[str, str] | None) -> dict[str, str]:
    """Labels from a request, refused with one sentence if any is malformed or a reading."""
    try:
        return check_labels(labels or {})
    except ValueError as exc:
        raise BadRequest(str(exc), code=ErrorCode.INVALID_LABEL) from None


@lru_cache(maxsize=1024)
def _compiled(text: str, cost_limit: int) -> Meaning:
    from gg.control.cel import compile_meaning  # celpy and lark: loaded by the first meaning

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
    missed: dict = {}

    def judge(pair: str, meaning: Meaning):
        def verdict(facts: dict):
            answer = verdicts.decide(meaning, facts)
            if answer is Verdict.PENDING:
                pending.add(pair)
                missed[digest(meaning, facts)] = (meaning, facts_read(meaning, facts))
            return answer
        return verdict

    found = dispositions(runner.labels, {p: judge(p, m) for p, m in meanings.items()}, facts)
    before = core.store.dispositions_of(runner.id)
    if pending:
        _schedule(core, runner.id, missed)
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


def _schedule(core: Core, runner_id: str, missed: dict) -> None:
    """Queue the verdicts ``runner_id``'s latest facts miss (they replace any its earlier
    facts missed), and make sure its own :func:`settle` runs. A task starting now spends one
    of the runner's evaluations of new facts, or waits for one (the runner is ``held``).

    Only reached on the event loop's thread, or on one doing a use case for it (then handed
    to the loop); elsewhere a verdict is computed on the spot."""
    loop = verdict_rules.serving()
    if loop is not None:  # the writer or a worker thread, for the loop: queued there
        loop.call_soon_threadsafe(_schedule_here, core, runner_id, missed)
        return
    _schedule_here(core, runner_id, missed)


def _schedule_here(core: Core, runner_id: str, missed: dict) -> None:
    verdicts = core.verdicts
    verdicts.queued[runner_id] = missed
    task = verdicts.tasks.get(runner_id)
    if task is not None and not task.done():
        return  # its next round takes these
    wait = _allow(core, runner_id)
    if wait:
        verdicts.held.add(runner_id)
    verdicts.tasks[runner_id] = asyncio.get_running_loop().create_task(
        settle(core, runner_id, wait))


def _allow(core: Core, runner_id: str) -> float:
    return core.verdicts.allow(runner_id, core.now(), burst=core.settings.new_facts_burst,
                               every=core.settings.new_facts_every)


async def settle(core: Core, runner_id: str, wait: float = 0.0) -> None:
    """Evaluate the verdicts ``runner_id`` misses, off the loop, then recompute it (a
    transaction per round; nothing in it evaluates CEL), until its facts stop changing.

    Each runner has a task of its own, so a check-in never waits for another runner's
    verdicts; and each round past the first spends one of its evaluations of new facts
    (NEW_FACTS_BURST at once, then one every NEW_FACTS_EVERY), so a runner that reports new
    facts on every check-in waits for its own allowance and takes the workers from no one."""
    verdicts = core.verdicts
    try:
        while verdicts.queued.get(runner_id):
            while wait:  # over its allowance: its labels keep their last verdicts meanwhile
                verdicts.held.add(runner_id)
                await asyncio.sleep(wait)
                wait = _allow(core, runner_id)
            verdicts.held.discard(runner_id)
            misses = verdicts.queued.pop(runner_id, {})
            try:
                await asyncio.gather(*(verdicts.evaluate(m, f) for m, f in misses.values()))
                await run(core, _recompute, runner_id)  # in the writer's turn
            except Exception as exc:  # noqa: BLE001 -- the labels stay as they are until a
                log.warning("meaning verdicts: %s: %s", type(exc).__name__, exc)  # check-in
                verdicts.queued.pop(runner_id, None)
            core.signals.ready_changed()  # a label may have become usable, or been refuted
            if verdicts.queued.get(runner_id):
                wait = _allow(core, runner_id)
    finally:
        verdicts.held.discard(runner_id)
        if verdicts.tasks.get(runner_id) is asyncio.current_task():
            del verdicts.tasks[runner_id]


def _recompute(core: Core, runner_id: str) -> None:
    runner = core.store.runner(runner_id)
    if runner is not None:
        refresh(core, runner)  # queues what its newer facts miss, if any


async def run(core: Core, fn: Callable[..., T], *args: Any, durable: bool = True,
              **kwargs: Any) -> T:
    """``core.run(fn, ...)`` for a use case that may recompute labels: on the writer, which
    decides as the loop would (a verdict not cached is queued for :func:`settle`, never
    waited for there)."""
    loop = asyncio.get_running_loop()

    def unit(core: Core, *args: Any, **kwargs: Any) -> T:
        with verdict_rules.for_the_loop(loop):
            return fn(core, *args, **kwargs)

    return await core.run(unit, *args, durable=durable, **kwargs)


async def settled(core: Core, runner_id: str | None = None, *,
                  within: float | None = None) -> bool:
    """Wait until the verdicts the last use case missed are in (all runners', or those of
    ``runner_id``), at most ``within`` seconds when given. A runner waiting for its allowance
    is not waited for. True when there was something to wait for."""
    verdicts = core.verdicts
    if runner_id is not None:
        running = {runner_id: verdicts.tasks.get(runner_id)}
    else:
        running = dict(verdicts.tasks)
    tasks = [t for r, t in running.items()
             if t is not None and not t.done() and r not in verdicts.held]
    if not tasks:
        return False
    with contextlib.suppress(asyncio.TimeoutError):  # past it, the verdicts land on their own
        await asyncio.wait_for(asyncio.shield(asyncio.gather(*tasks)), timeout=within)
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
    refresh(core, core.runner_again(runner.id))
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
