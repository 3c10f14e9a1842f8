"""What one feature brings to another's use case is registered where the app is built
(gg.control.wiring.wired), never by importing a module."""

from __future__ import annotations

from gg.control import environments, gates
from gg.control.core import Core
from gg.control.people import bootstrap
from gg.control.wiring import wired
from gg.store import open_store


def _named(fns) -> list[str]:
    return [f"{fn.__module__}.{fn.__name__}" for fn in fns]


def test_the_app_wires_each_gate_kinds_clearing_hook_and_every_environment_provider():
    wiring = wired()
    assert {kind: _named(hooks) for kind, hooks in wiring.cleared.items()} == {
        "environment": ["gg.control.environments.meaning_in_force"],
        "profile": ["gg.control.profiles.bring_into_force"],
        "strategy": ["gg.control.strategies.bring_into_force"],
        "maintenance": ["gg.control.maintenance.land_if_done"],
        "approval": ["gg.control.approvals.approved"],
    }
    assert _named(wiring.providers) == ["gg.control.environments.live_runners",
                                        "gg.control.pools.pools_providing"]


def test_a_core_built_without_the_wiring_brings_no_meaning_into_force_and_knows_no_provider(
        tmp_path, clock, settings):
    """Every feature module is imported (gg.control.wiring imports them all), yet a Core built
    without ``wired()`` runs no feature's hook: importing registered nothing."""
    core = Core(store=open_store(tmp_path), settings=settings, clock=clock)
    bootstrap(core, tmp_path)
    owner = core.store.person_by_name("owner")
    charted = environments.chart(core, owner, "ui", 'os == "linux"')
    gates.clear_gate(core, charted["gate"], person=owner)
    assert core.store.gate(charted["gate"]).status == "cleared"
    assert core.store.environment("ui").meaning is None  # the hook was not wired
    assert environments.providers_of(core, "ui") == []

    wired_core = Core(store=core.store, settings=settings, clock=clock, wiring=wired())
    again = environments.chart(wired_core, owner, "ui", 'os == "linux"')
    gates.clear_gate(wired_core, again["gate"], person=owner)
    assert wired_core.store.environment("ui").meaning == 'os == "linux"'
