"""Fixtures for the use-case tests: a real store (SQLite; PostgreSQL too in modules that
name both in ``STORES``), a hand-moved clock (``clock``, from
``tests/conftest.py``), no server.

``core`` is bootstrapped (the owner exists, its token is in ``tmp_path``); a test file that
needs other settings overrides ``settings``. ``owner`` is the bootstrapped admin, ``ada``
and ``bob`` are members.
"""

from __future__ import annotations

import pytest

from gg.control import people
from gg.control.core import Core
from gg.control.people import bootstrap
from gg.control.wiring import wired
from gg.settings import Settings
from gg.store import open_store


@pytest.fixture
def settings() -> Settings:
    """Dev (isolation none by default, so runners are healthy without a capability report),
    and the protocol's waits in round numbers."""
    return Settings(dev=True, claim_wait=30, lease_ttl=60, offline_after=45)


@pytest.fixture
def core(tmp_path, clock, settings, store_url, store_dir) -> Core:
    """On SQLite in ``tmp_path`` (a copy of a migrated store, ``store_dir``), or on a
    PostgreSQL database of its own when the test module runs on both stores (``STORES``,
    tests/conftest.py)."""
    c = Core(store=open_store(store_dir, store_url), settings=settings, clock=clock, wiring=wired())
    bootstrap(c, tmp_path)
    yield c
    c.store.close()  # its connections, not left to the worker's end


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
