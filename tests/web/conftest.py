"""Fixtures for the console's HTTP tests: the real app in-process over a real store (an SQLite
file; a PostgreSQL database of its own too in modules that name both stores in ``STORES``,
tests/conftest.py), with the hand-moved clock, and a way to sign in as a browser does (the
sign-in page's form token, then the form post from this origin)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from gg.server.app import create_app
from gg.settings import Settings
from gg.store import open_store

from console_support import ORIGIN


@pytest.fixture
def settings() -> Settings:
    """A page's long poll that finds nothing new answers after 2 s rather than 20: the page
    then looks again, and a test that waits it out waits less."""
    return Settings(console_wait=2.0)


@pytest.fixture
def app(tmp_path, clock, settings, store_url, store_dir):
    """The app; the owner is made on its first start (on PostgreSQL: once per database) and
    its token written into ``tmp_path`` either way."""
    store = open_store(store_dir, store_url)
    yield create_app(settings, store, clock=clock, data_dir=tmp_path)
    store.close()  # its connections, not left to the worker's end


@pytest.fixture
def owner(tmp_path, app) -> str:
    return (tmp_path / "owner-token").read_text().strip()


@pytest.fixture
def browser(app):
    """A client that keeps cookies, as a browser would (not signed in yet)."""
    with TestClient(app, base_url=ORIGIN) as c:
        yield c
