"""A runner's assigned policy and its health, judged on every check-in and policy change.

The runner reports what it can enforce (its capability report); the control plane decides
what it must enforce (:func:`gg.domain.runner_policy.assigned_policy`) and compares the two
with :func:`gg.domain.health.judge_health`, the same rule the runner applies before it starts
a flight. What is stored:

- ``policy``: the assigned policy, as the check-in answer carries it down;
- ``health``: ``ok`` or ``degraded: <the one missing piece>`` (matching reads this);
- ``workers``: the slots matching may fill, ``min(policy.workers, started_workers)``;
- ``checks_at``: when a check-in last judged a capability report;
- ``policy_changed_at``: when the assigned policy last changed (``checks pending`` until the
  next check-in confirms it on the host).

A runner that becomes degraded records ``warn:runner:degraded``; one that meets its policy
again records ``info:runner:recovered`` and wakes parked claims.
"""

from __future__ import annotations

from typing import Any

import orjson

from gg.control.core import CONTROL_PLANE, Core
from gg.domain import health as rules
from gg.domain.events import EventKind
from gg.domain.policy import Policy
from gg.domain.runner_policy import assigned_policy
from gg.domain.runners import Runner

# What a runner reads before its first capability report (not a degradation to recover from).
NEVER_REPORTED = rules.Health(ok=False, missing=rules.NO_REPORT).text


def profile_policy(core: Core, runner: Runner) -> dict[str, Any] | None:
    """The runner's fleet profile's ``policy:`` block while it is in force (enrolled
    runners; :func:`gg.control.profiles.sync_runner` keeps ``profile_in_force`` current)."""
    return (runner.profile_in_force or {}).get("policy") or None


def policy_for(core: Core, runner: Runner, override: dict | None = None) -> Policy:
    return assigned_policy(dev=core.settings.dev, started_workers=runner.started_workers,
                           profile=profile_policy(core, runner),
                           override=runner.policy_override if override is None else override)


def initial(core: Core, started_workers: int) -> dict[str, Any]:
    """Policy, health and slots of a runner that has just registered (judged silently:
    nothing has *become* degraded yet; the first check-in brings the report)."""
    policy = assigned_policy(dev=core.settings.dev, started_workers=started_workers)
    verdict = rules.judge_health(policy, None, dev=core.settings.dev,
                                 started_workers=started_workers)
    return {"policy": policy.to_dict(), "health": verdict.text,
            "workers": rules.effective_workers(policy, started_workers)}


def judge(core: Core, runner: Runner, now: float, *, checked: bool) -> bool:
    """Recompute policy, health and slots and store them; True if the runner may now take
    more work than before (recovered, or more slots), so parked claims should be woken.

    ``checked`` is True on a check-in (the host has just spoken for its report), False when
    only the policy changed (the verdict reads ``checks pending`` until the next check-in).
    Runs inside the caller's transaction.
    """
    policy = policy_for(core, runner)
    verdict = rules.judge_health(policy, runner.capabilities or None, dev=core.settings.dev,
                                 started_workers=runner.started_workers)
    values: dict[str, Any] = {}
    if policy.to_dict() != runner.policy:
        values["policy"] = policy.to_dict()
        values["policy_changed_at"] = now
    if checked and runner.capabilities:
        values["checks_at"] = now
    workers = rules.effective_workers(policy, runner.started_workers)
    if workers != runner.workers:
        values["workers"] = workers
    if verdict.text != runner.health:
        values["health"] = verdict.text
        if not verdict.ok:
            core.event(EventKind.RUNNER_DEGRADED, actor=CONTROL_PLANE, runner_id=runner.id, at=now,
                       missing=verdict.missing, was=runner.health, policy=policy.to_dict())
        elif runner.checks_at is not None or runner.health != NEVER_REPORTED:
            # (a new runner's first report is not a recovery: it was never judged before)
            core.event(EventKind.RUNNER_RECOVERED, actor=CONTROL_PLANE, runner_id=runner.id,
                       at=now, was=runner.health)
    if values:
        core.store.update_runner(runner.id, **values)
    return verdict.ok and (not runner.healthy or workers > runner.workers)


def describe(core: Core, runner: Runner, now: float, *,
             policies: dict | None = None) -> dict[str, Any]:
    """What ``gg runners`` and ``gg runner show`` print about checks: every check that
    decides health, the one-phrase verdict, and notes (a restart needed for more workers).
    ``policies``: the policies a listing parsed so far, by their JSON (filled here)."""
    if runner.policy:
        key = orjson.dumps(runner.policy, option=orjson.OPT_SORT_KEYS)
        parsed = policies.get(key) if policies is not None else None
        if parsed is None:
            parsed = Policy.from_dict(runner.policy)
            if policies is not None:
                policies[key] = parsed
        policy = parsed
    else:
        policy = policy_for(core, runner)
    listed = rules.checks(policy, runner.capabilities or None, dev=core.settings.dev,
                          started_workers=runner.started_workers)
    changed = (runner.policy_changed_at is not None and runner.checks_at is not None
               and runner.policy_changed_at > runner.checks_at)
    verdict = rules.checks_verdict(listed, runner.checks_at, now, core.settings.offline_after,
                                   policy_changed=changed)
    note = rules.workers_note(policy, runner.started_workers)
    return {"checks": [c.to_dict() for c in listed], "checks_verdict": verdict,
            "health_notes": [note] if note else []}
