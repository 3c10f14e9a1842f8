"""Fixtures for the in-process HTTP tests: the real app over a real SQLite file, a hand-moved
clock (``clock``, from ``tests/conftest.py``), and the owner's token on the client.

A test file that needs other settings overrides ``settings``; one that needs more on the
client (a member, a charted environment) overrides ``client`` by asking for this one.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from fastapi.testclient import TestClient

from gg.server.app import create_app
from gg.settings import Settings
from gg.store import open_store


@pytest.fixture
def settings() -> Settings:
    return Settings()


@pytest.fixture
def client(tmp_path, clock, settings, store_url, store_dir):
    """A TestClient on a fresh app; ``client.owner`` is the owner's token, ``client.tmp`` the
    data directory. On PostgreSQL too in modules that name both stores in ``STORES``."""
    store = open_store(store_dir, store_url)
    # armed as for every server the suite starts: a store call on the app's loop raises
    app = create_app(replace(settings, loop_guard="on"), store, clock=clock, data_dir=tmp_path)
    with TestClient(app) as c:
        c.owner = (tmp_path / "owner-token").read_text().strip()
        c.tmp = tmp_path
        c.store = store
        yield c
    store.close()  # its connections, not left to the worker's end


@pytest.fixture
def framework(client) -> TestClient:
    """The app's own stack, without the calls answered ahead of it (gg/server/ahead.py): a
    request sent here meets the routes those calls are documented by."""
    app = client.app
    inner = app.middleware_stack.inner

    async def stack(scope, receive, send):
        scope["app"] = app
        await inner(scope, receive, send)

    return TestClient(stack)
