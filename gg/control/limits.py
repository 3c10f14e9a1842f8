"""A flight's resource limits at its open: read, checked against the runner it names, kept.

The limits a flight asks for (gg.domain.limits) are settled where it flies, by that runner's
policy; a flight opened for one runner (``--runner R``) is checked against R's policy's
maximums here, so that asking too much is refused at ``gg fly``, not after a wait.
"""

from __future__ import annotations

from gg.control.core import Core
from gg.domain import limits as rules
from gg.domain.flight_spec import FlightSpec
from gg.errors import BadRequest


def check_open(core: Core, spec: FlightSpec, target: str | None) -> None:
    """BadRequest (one sentence) when the limits asked cannot be read, or are over the
    maximums of the policy of the runner the flight names."""
    if not spec.limits:
        return
    try:
        asked = rules.Limits.from_dict(spec.limits)
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
    if target is None:
        return
    policy = core.store.runner_policy(target) or {}
    try:
        _, maximums = rules.policy_limits(policy)
    except ValueError:
        return  # a policy its health already calls unreadable
    refusal = rules.over_maximum(asked, maximums, "the policy of that runner")
    if refusal:
        raise BadRequest(refusal)


def keep(core: Core, flight_id: str, spec: FlightSpec) -> None:
    """Store what was asked (in the open's transaction); nothing when none was."""
    if spec.limits:
        core.store.set_flight_limits(flight_id, rules.Limits.from_dict(spec.limits).to_dict())
