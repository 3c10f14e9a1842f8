"""A control-level world for placement tests: a real store, a fake clock, use cases only."""

from __future__ import annotations

import pytest

from gg.control import environments, gates, people, runners
from gg.control.core import Core
from gg.control.people import bootstrap
from gg.settings import Settings
from gg.store import open_store

from support import Clock, make_runner

LINUX = {"os": "Linux", "arch": "x86_64", "cpu_count": 8, "memory_total": 16 * 2**30}


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def core(tmp_path, clock):
    c = Core(store=open_store(tmp_path), settings=Settings(dev=True, claim_wait=30, lease_ttl=60,
                                                           offline_after=45), clock=clock)
    bootstrap(c, tmp_path)
    return c


@pytest.fixture
def owner(core):
    return core.store.person_by_name("owner")


@pytest.fixture
def ada(core, owner):
    people.add_person(core, owner, "ada", admin=False)
    return core.store.person_by_name("ada")


@pytest.fixture
def bob(core, owner):
    people.add_person(core, owner, "bob", admin=False)
    return core.store.person_by_name("bob")


def runner(core, owner, name, labels=None, inventory=None, workers=1):
    r = make_runner(core, owner, name, labels=labels, workers=workers)
    if inventory is not None:
        check_in(core, r, inventory=inventory)
    return core.store.runner(r.id)


def check_in(core, r, inventory=None, labels=None):
    runners.check_in(core, core.store.runner(r.id), readings={}, inventory=inventory,
                     capabilities=None, version=None, held=[], peer_address=None, labels=labels)


def charted(core, owner, name, means='os == "linux"'):
    """Chart an environment and clear its gate: the meaning is in force."""
    env = environments.chart(core, owner, name, means)
    gates.clear_gate(core, env["gate"], person=owner)
    return core.store.environment(name)
