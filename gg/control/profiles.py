"""Applying fleet profiles (SPEC 9): narrowings at once, widenings behind ONE gate.

``apply_profile`` judges the new profile against the profile *in force* with
``gg.domain.profile_gate.judge_profile_change``. When nothing widens, the new profile is in
force at once. When something widens, the narrowings take effect now
(``effective_profile``) and the whole new profile waits behind a gate of kind ``profile``
that an admin clears; a later apply supersedes that gate (``gates.open_gate`` does that), so
there is never more than one open gate per profile. Clearing it brings the profile it
guarded into force (:func:`bring_into_force`, its gate's clearing hook), and every machine enrolled
with the profile gets its labels, policy and limits in the same transaction.

A widening can never take effect before its gate is cleared: the only writer of
``in_force`` other than the hook is ``effective_profile``, which withholds every widening.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gg.airspace.errors import AirspaceError
from gg.airspace.profiles import profile_from_mapping
from gg.control import gates, health
from gg.control import labels as label_ops
from gg.control.core import Core
from gg.control.people import require_admin
from gg.domain.enrolment import ProfileRecord, enrolled_labels
from gg.domain.events import EventKind
from gg.domain.gates import Gate
from gg.domain.people import Person
from gg.domain.profile_gate import ProfileChange, effective_profile, judge_profile_change
from gg.domain.profiles import Profile
from gg.domain.runners import Instruction, Runner, is_online
from gg.errors import NotFound

__all__ = ["apply_profile", "list_profiles", "profile_view", "sync_runner"]

_GATE_SUFFIX = " (opens a gate)"


def apply_profile(core: Core, person: Person, name: str, mapping: Any) -> dict:
    """Apply ``mapping`` (a profile as YAML says it) as profile ``name``; returns what
    applied now and what waits behind which gate."""
    require_admin(person)
    profile = profile_from_mapping(name, mapping)
    if profile.policy.isolation == "none" and not core.settings.dev:
        raise AirspaceError("none is allowed only on a control plane started with --dev",
                            file="<request>", key="policy.isolation")
    now = core.now()
    with core.store.atomic():
        record = core.store.profile_record(name)
        if record is not None and record.applied == profile:
            return _answer(core, record, None, unchanged=True)
        in_force = record.in_force if record else None
        change = judge_profile_change(in_force, profile)
        version = (record.version if record else 0) + 1
        gate: Gate | None = None
        if change.needs_gate:
            gate = gates.open_gate(
                core, kind="profile", subject=f"profile:{name}",
                guards=_guards(name, version, change),
                why=f"profile {name} version {version} lets its machines do more",
                clearer="admin", actor=person.name,
                payload={"profile": name, "version": version})
            new_record = ProfileRecord(
                name=name, version=version, applied=profile, applied_at=now,
                applied_by=person.name, in_force=effective_profile(in_force, profile),
                in_force_version=record.in_force_version if record else None,
                narrowed_by=version if change.narrowings else (record.narrowed_by if record
                                                               else None),
                gate_id=gate.id)
        else:
            if record is not None and record.gate_id is not None:
                _supersede(core, record.gate_id, person.name, now)
            new_record = ProfileRecord(
                name=name, version=version, applied=profile, applied_at=now,
                applied_by=person.name, in_force=profile, in_force_version=version,
                narrowed_by=None, gate_id=None)
        core.store.save_profile_record(new_record)
        changes = [c.to_dict() for c in change.changes]
        core.store.add_profile_version(name, version, profile.to_dict(), changes,
                                       gate.id if gate else None, now, person.name)
        core.event(EventKind.PROFILE_APPLIED, actor=person.name, at=now, profile=name,
                   version=version, gate=gate.id if gate else None,
                   applied_now=[c.description for c in change.narrowings],
                   waiting=[c.description for c in change.widenings])
        sync_profile_runners(core, new_record)
        answer = _answer(core, new_record, change)
    core.signals.ready_changed()
    return answer


def bring_into_force(core: Core, gate: Gate) -> None:
    """The gate guarded the whole applied profile: it is in force from now on."""
    name = str(gate.payload.get("profile", ""))
    record = core.store.profile_record(name)
    if record is None or record.gate_id != gate.id:
        return
    new_record = replace(record, in_force=record.applied, in_force_version=record.version,
                         narrowed_by=None, gate_id=None)
    core.store.save_profile_record(new_record)
    core.event(EventKind.PROFILE_IN_FORCE, actor=gate.cleared_by, profile=name,
               version=record.version, gate=gate.id)
    sync_profile_runners(core, new_record)
    core.signals.ready_changed()  # labels changed: parked claims may match now


def sync_profile_runners(core: Core, record: ProfileRecord) -> int:
    """Every machine enrolled with the profile takes what is in force (inside the caller's
    transaction)."""
    runners = core.store.runners_with_profile(record.name)
    for runner in runners:
        sync_runner(core, runner, record.in_force)
        # An idle runner's parked claim is its only check-in: it hears of the change now (a
        # full check-in brings the profile, and its maintenance checks at once), not at its
        # next restart.
        core.signals.instruct(runner.id, Instruction.CHECK_IN)
    return len(runners)


def sync_runner(core: Core, runner: Runner, in_force: Profile | None) -> None:
    """An enrolled machine's labels, policy and limits follow its profile in force.

    Labels are exactly ``environment=<env>`` while a profile is in force and nothing
    otherwise. Policy follows the profile while one is in force; without one the machine
    keeps the policy it had (it takes no work anyway: ``gg.domain.fitness``).
    """
    values: dict[str, Any] = {"labels": enrolled_labels(in_force),
                              "profile_in_force": in_force.to_dict() if in_force else {}}
    core.store.update_runner(runner.id, **values)
    # Policy follows through the one rule that assigns it (default < profile < admin), and
    # the new labels get their dispositions (a meaning in force may refute them).
    health.judge(core, core.runner_again(runner.id), core.now(), checked=False)
    label_ops.refresh(core, core.runner_again(runner.id))


def list_profiles(core: Core) -> list[dict]:
    return [profile_view(core, r) for r in core.store.profile_records()]


def show_profile(core: Core, name: str) -> dict:
    record = core.store.profile_record(name)
    if record is None:
        raise NotFound(f"no profile {name} has been applied (gg fleet apply {name})")
    return profile_view(core, record)


def profile_view(core: Core, record: ProfileRecord) -> dict:
    now = core.now()
    pending = [{"id": g.id, "guards": g.guards, "opened_at": g.opened_at,
                "who_may_clear": g.cleared_by_words}
               for g in core.store.gates(status="open", subject=f"profile:{record.name}")]
    enrolled = [{"id": r.id, "name": r.name,
                 "online": is_online(r, now, core.settings.offline_after),
                 "labels": r.labels}
                for r in core.store.runners_with_profile(record.name)]
    return {
        "name": record.name,
        "version": record.version,
        "applied_version": record.version,
        "applied": record.applied.to_dict(),
        "applied_at": record.applied_at,
        "applied_by": record.applied_by,
        "in_force": record.in_force.to_dict() if record.in_force else None,
        "in_force_version": record.in_force_version,
        "narrowed_by": record.narrowed_by,
        "wholly_in_force": record.wholly_in_force,
        "pending_gates": pending,
        "enrolled": enrolled,
    }


def _answer(core: Core, record: ProfileRecord, change: ProfileChange | None, *,
            unchanged: bool = False) -> dict:
    gate = core.store.gate(record.gate_id) if record.gate_id else None
    changes = list(change.changes) if change else []
    return {
        "profile": record.name,
        "version": record.version,
        "unchanged": unchanged,
        "first_apply": bool(change and change.first_apply),
        "applied_now": [c.description for c in changes if not c.widening],
        "waiting": [c.description for c in changes if c.widening],
        "changes": [c.to_dict() for c in changes],
        "gate": ({"id": gate.id, "guards": gate.guards, "who_may_clear": gate.cleared_by_words}
                 if gate is not None and gate.open else None),
        "in_force_version": record.in_force_version,
        "narrowed_by": record.narrowed_by,
    }


def _guards(name: str, version: int, change: ProfileChange) -> str:
    items = [c.description.removesuffix(_GATE_SUFFIX) for c in change.widenings]
    text = f"profile {name} version {version}: " + "; ".join(items)
    return text if len(text) <= 300 else text[:299] + "…"


def _supersede(core: Core, gate_id: str, actor: str, now: float) -> None:
    gate = core.store.gate(gate_id)
    if gate is not None and gate.open:
        core.store.update_gate(gate_id, status="superseded", cleared_at=now, cleared_by=actor)
