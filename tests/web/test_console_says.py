"""The web console says what the CLI says (issue 24, point 7): a runner's page lists the
flights it flies, a gate only the machine may clear offers no button, an event's fields stand
apart, and the refusal of a bad token reads as plain words."""

from __future__ import annotations

import re

import pytest

from console_support import ORIGIN, sign_in
from gg.control import leases
from gg.control.people import authenticate_person
from gg.settings import Settings
from support import auth, check_in, make_runner

STORES = ("sqlite",)


@pytest.fixture
def settings() -> Settings:
    """A --dev control plane: a runner with no capability report may fly (isolation none)."""
    return Settings(console_wait=2.0, dev=True)


def test_the_runners_page_lists_the_flight_a_runner_flies(browser, owner, app):
    core = app.state.core
    runner = make_runner(core, authenticate_person(core, owner), name="r1")
    flight = browser.post("/v1/flights", json={"command": ["sleep", "60"]},
                          headers=auth(owner)).json()["id"]
    check_in(core, runner)
    claimed = leases.try_claim(core, runner.id)
    assert claimed is not None, browser.get(f"/v1/flights/{flight}", headers=auth(owner)).json()["waiting"]
    sign_in(browser, owner)
    page = browser.get("/ui/runners?part=1").text
    assert f'<a href="/ui/flights/{flight}">{flight}</a>' in page
    assert "flights: none" not in page


def test_a_gate_only_the_machine_may_clear_offers_no_clear_button(browser, owner, app):
    core = app.state.core
    gate = browser.post("/v1/environments", json={"name": "ui", "means": "true"},
                        headers=auth(owner)).json()["gate"]
    sign_in(browser, owner)
    assert f"/ui/gates/{gate}/clear" in browser.get("/ui/gates?part=1").text  # an admin's gate
    core.store.update_gate(gate, clearer="machine")  # as a maintenance gate is made
    page = browser.get("/ui/gates?part=1").text
    assert gate in page and f"/ui/gates/{gate}/clear" not in page


def test_an_events_fields_stand_apart(browser, owner):
    browser.post("/v1/flights", json={"command": ["true"]}, headers=auth(owner))
    sign_in(browser, owner)
    page = browser.get("/ui/events?part=1").text
    opened = next(line for line in re.findall(r"<li>.*?</li>", page, re.S)
                  if "info:flight:opened" in line)
    text = re.sub(r"<[^>]+>", "", opened)
    assert re.search(r"info:flight:opened by \S+ f_\S+ ", text), text


def test_a_refused_token_is_told_in_plain_words(browser):
    page = browser.get("/ui/login")
    token = re.search(r'name="form_token" value="([^"]+)"', page.text).group(1)
    refused = browser.post("/ui/login", data={"token": "ggp_nope", "form_token": token},
                           headers={"origin": ORIGIN})
    assert refused.status_code == 401
    assert "`" not in refused.text
    assert "paste the person token that gg login uses" in refused.text
