"""The web console says what the CLI says (issue 24, point 7): a runner's page lists the
flights it flies, a gate only the machine may clear offers no button, an event's fields stand
apart, and the refusal of a bad token reads as plain words."""

from __future__ import annotations

import re

import pytest

from gg.control import leases
from gg.control.people import authenticate_person
from gg.settings import Settings

from console_support import ORIGIN, post_form, sign_in
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


def test_a_flight_is_opened_from_the_page_as_gg_fly_opens_it(browser, owner):
    sign_in(browser, owner)
    page = browser.get("/ui/flights").text
    assert 'action="/ui/flights"' in page and 'name="command"' in page
    opened = post_form(browser, "/ui/flights", command="echo from the page")
    assert opened.status_code == 303
    flight_id = opened.headers["location"].rsplit("/", 1)[1]
    shown = browser.get(f"/v1/flights/{flight_id}", headers=auth(owner)).json()
    assert shown["command"] == ["echo from the page"] and shown["opened_by_name"] == "owner"
    empty = post_form(browser, "/ui/flights", command="  ")
    assert empty.status_code == 400 and "the command is empty" in empty.text
    unknown = post_form(browser, "/ui/flights", command="true", environment="nowhere")
    assert unknown.status_code in (400, 404, 409) and "nowhere" in unknown.text


def test_an_admin_forces_a_gated_flight_from_its_page(browser, owner):
    member = browser.post("/v1/people", json={"name": "mo", "admin": False},
                          headers=auth(owner)).json()["token"]
    flight_id = browser.post("/v1/flights", json={"command": ["true"], "approval": True},
                             headers=auth(member)).json()["id"]
    sign_in(browser, owner)
    page = browser.get(f"/ui/flights/{flight_id}?part=1").text
    assert f'action="/ui/flights/{flight_id}/force"' in page
    assert post_form(browser, f"/ui/flights/{flight_id}/force").status_code == 303
    assert browser.get(f"/v1/flights/{flight_id}", headers=auth(owner)).json()["stage"] == "ready"
    sign_in(browser, member)  # a member is offered no force
    assert "/force" not in browser.get(f"/ui/flights/{flight_id}?part=1").text
