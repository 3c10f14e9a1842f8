"""Helpers for placement tests on the use cases: runners with facts, charted environments
(the ``core``, ``owner``, ``ada`` and ``bob`` fixtures are in ``tests/control/conftest.py``)."""

from __future__ import annotations

from gg.control import environments, gates

from support import check_in, make_runner

LINUX = {"os": "Linux", "arch": "x86_64", "cpu_count": 8, "memory_total": 16 * 2**30}


def runner(core, owner, name, labels=None, inventory=None, workers=1):
    r = make_runner(core, owner, name, labels=labels, workers=workers)
    if inventory is not None:
        check_in(core, r, inventory=inventory)
    return core.store.runner(r.id)


def charted(core, owner, name, means='os == "linux"'):
    """Chart an environment and clear its gate: the meaning is in force."""
    env = environments.chart(core, owner, name, means)
    gates.clear_gate(core, env["gate"], person=owner)
    return core.store.environment(name)
