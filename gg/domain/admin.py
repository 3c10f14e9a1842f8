"""Admin state: what people decide about a runner, apart from liveness and health.

::

                 cordon                      drain (leases held)
    active  ---------------->  cordoned  ----------------------->  draining
      ^  \\                      |    ^                                |
      |   \\ drain (no lease)    |    | cordon                         | its last lease ends
      |    '------------------> drained <------------------------------'
      |                                                   (by itself, actor control-plane)
      '---- resume ----  cordoned | draining | drained

    any state --retire--> retired     (irreversible; handled apart: key tombstoned)

``cordoned``: no new work, current work goes on. ``draining``: finish current work, take
nothing new, then ``drained`` by itself. Asking for the state a runner is already in changes
nothing (and records nothing), so scripts can repeat a command safely.
"""

from __future__ import annotations

from gg.domain.runners import AdminState

ACTIONS = ("cordon", "drain", "resume")


def after_action(current: str, action: str, live_leases: int) -> str:
    """The admin state after ``action``; ValueError (one sentence) when it cannot apply."""
    if action not in ACTIONS:
        raise ValueError(f"an admin action is one of {', '.join(ACTIONS)}, not {action!r}")
    if current == AdminState.RETIRED.value:
        raise ValueError("a retired runner cannot be changed any more")
    if action == "cordon":
        return AdminState.CORDONED.value
    if action == "resume":
        return AdminState.ACTIVE.value
    if current == AdminState.DRAINED.value:
        return current
    return AdminState.DRAINING.value if live_leases > 0 else AdminState.DRAINED.value


def describe_change(name: str, before: str, after: str) -> str:
    """The one line an operator reads after an admin command."""
    if before == after:
        return f"{name} is already {after}"
    if after == AdminState.DRAINING.value:
        return f"{name}: {before} -> draining (it finishes its current work, then reads drained)"
    return f"{name}: {before} -> {after}"
