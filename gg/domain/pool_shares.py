"""Several maintainers, one pool: which maintainer carries out which of the plan's actions.

A pool's plan (:func:`gg.domain.pool_planner.plan_pool`) is one decision for the whole pool,
whatever the number of hosts serving it. Each live maintainer checks in (it asks for the
plan) saying how many members its host can hold; the control plane then hands every action
to exactly one maintainer with :func:`share_plan`, inside the write transaction that checks
the action, so two maintainers asking at once never both make the same machine and the
pool's bounds count every host's members together:

- an action on a member (remove, reset, roll, replace) goes to the maintainer holding it;
- a member whose maintainer went silent (its runner offline, the usual silence rule) is an
  **orphan**: the planner removes it (never while it holds a lease), and the removal goes to
  the first live maintainer by id (the control plane's side retires the member; its machine
  is on the silent host, which cleans it up when it comes back);
- the plan's one ``Start(count)`` is split one member at a time, each to the live
  maintainer that will hold the fewest members (healthy ones before one whose last cycle
  failed, then by id), skipping a maintainer whose host is full (``capacity``). A start no
  maintainer has room for is ``unplaced``: nobody is asked to make it.

Deterministic: the same plan, members and maintainers in any order give the same shares. A
maintainer that goes silent stops counting at once, so its share of the starts goes to the
others on the next plan.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gg.domain.pool_planner import Action, PoolPlan, Remove, Start


@dataclass(frozen=True)
class Seat:
    """A live maintainer of the pool, as it last checked in."""

    maintainer_id: str
    capacity: int | None = None  # most members its host holds; None: no limit of its own
    failing: bool = False  # its last cycle's actions failed: it backs off


@dataclass(frozen=True)
class Shares:
    """Each live maintainer's actions, in the plan's order, and the starts nobody can host."""

    actions: Mapping[str, tuple[Action, ...]]
    holds: Mapping[str, int]  # members each one holds once the plan is carried out
    unplaced: int = 0

    def of(self, maintainer_id: str) -> tuple[Action, ...]:
        return tuple(self.actions.get(maintainer_id, ()))


def share_plan(plan: PoolPlan, owners: Mapping[str, str | None],
               seats: Sequence[Seat]) -> Shares:
    """Split ``plan`` among the live maintainers ``seats``. ``owners`` maps every member of the
    pool to the maintainer holding it (None, or a maintainer not in ``seats``: an orphan)."""
    ordered = sorted(seats, key=lambda s: s.maintainer_id)
    if not ordered:
        return Shares({}, {}, unplaced=plan.started)
    live = {s.maintainer_id for s in ordered}
    first = ordered[0].maintainer_id
    removed = {a.member_id for a in plan.actions if isinstance(a, Remove)}
    holds = {s.maintainer_id: 0 for s in ordered}
    for member_id, owner in owners.items():
        if owner in live and member_id not in removed:
            holds[owner] += 1
    actions: dict[str, list[Action]] = {s.maintainer_id: [] for s in ordered}
    unplaced = 0
    for action in plan.actions:
        if not isinstance(action, Start):
            owner = owners.get(action.member_id)
            actions[owner if owner in live else first].append(action)
            continue
        given = dict.fromkeys(holds, 0)
        for _ in range(action.count):
            room = [s for s in ordered
                    if s.capacity is None or holds[s.maintainer_id] < s.capacity]
            if not room:
                unplaced += 1
                continue
            seat = min(room, key=lambda s: (s.failing, holds[s.maintainer_id], s.maintainer_id))
            holds[seat.maintainer_id] += 1
            given[seat.maintainer_id] += 1
        for maintainer_id, count in given.items():
            if count:
                actions[maintainer_id].append(Start(count, action.digest))
    return Shares({k: tuple(v) for k, v in actions.items()}, holds, unplaced)
