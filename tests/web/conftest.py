"""Fixtures for the console's HTTP tests: the real app in-process over a real SQLite file,
with the hand-moved clock, and a way to sign in as a browser does (the sign-in page's form
token, then the form post from this origin)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from gg.server.app import create_app
from gg.settings import Settings
from gg.store import open_store

from console_support import ORIGIN


@pytest.fixture
def app(tmp_path, clock):
    return create_app(Settings(), open_store(tmp_path), clock=clock, data_dir=tmp_path)


@pytest.fixture
def owner(tmp_path) -> str:
    return (tmp_path / "owner-token").read_text().strip()


@pytest.fixture
def browser(app):
    """A client that keeps cookies, as a browser would (not signed in yet)."""
    with TestClient(app, base_url=ORIGIN) as c:
        yield c
