"""The console in a real headless Chromium (Debian's ``chromium``, driven by Playwright)
against a real ``gg server`` and real runner processes: sign in, watch a flight land while
the page stays open, follow a flight's output as it comes, cancel it from its button, see a
killed runner go offline. Every wait
is a bounded wait on what the page shows, never a sleep.

With ``CONSOLE_SCREENSHOTS=DIR`` set, the run also saves the pictures docs/web-console.md
shows into DIR.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from support import wait_until

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
playwright = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium")
SHOWN = 30_000  # ms: the longest the page may take to show a change, on a loaded machine
# The page looks again at least every CONSOLE_WAIT, so a runner's silence shows in seconds.
QUICK = {"GG_CONSOLE_WAIT": "2"}


@pytest.fixture
def chromium():
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM)
        try:
            yield browser
        finally:
            browser.close()


def _signed_in(chromium, fleet, **context):
    page = chromium.new_context(**context).new_page()
    page.set_default_timeout(SHOWN)
    page.on("dialog", lambda dialog: dialog.accept())  # "Cancel flight …?": yes
    page.goto(fleet.url + "/")
    page.wait_for_url("**/ui/login")
    page.fill("#token", fleet.server.owner_token())
    page.click("button[type=submit]")
    page.wait_for_url("**/ui/flights")
    playwright.expect(page.locator("#live-status")).to_have_text("live")
    return page


def _shoot(page, name: str) -> None:
    where = os.environ.get("CONSOLE_SCREENSHOTS")
    if where:  # a flight's workspace is a path of the machine the test ran on: masked
        page.screenshot(path=str(Path(where) / name), full_page=True,
                        mask=[page.locator("li", has_text="workspace=")], mask_color="#d0d7de")


def _stage(page, flight_id: str):
    return page.locator(f'[data-flight="{flight_id}"] [data-stage]')


def test_a_signed_in_page_shows_a_flight_land_and_cancels_one_without_a_reload(
        make_fleet, chromium):
    fleet = make_fleet(QUICK)
    fleet.runner("r1", workers=2)
    fleet.wait_online("r1")
    page = _signed_in(chromium, fleet)
    page.evaluate("window.sameDocument = true")  # gone if the page were ever reloaded

    api = fleet.api()
    landing = api.open_flight({"command": ["sh", "-c", "echo hello from the console"]})["id"]
    playwright.expect(_stage(page, landing)).to_have_text("landed")
    long = api.open_flight({"command": ["sh", "-c", "sleep 2; echo still going; sleep 300"],
                            "title": "a long one"})["id"]
    playwright.expect(_stage(page, long)).to_have_text("flying")
    assert page.evaluate("window.sameDocument") is True
    _shoot(page, "web-console-flights.png")

    page.click(f'a[href="/ui/flights/{long}"]')  # its page: the output arrives as it is sent
    page.evaluate("window.sameDocument = true")
    playwright.expect(page.locator("#output")).to_contain_text("still going")
    page.locator("button.danger").click()
    playwright.expect(page.locator("#stage")).to_have_text("cancelled")
    assert page.evaluate("window.sameDocument") is True
    assert api.flight(long)["stage"] == "cancelled"

    page.goto(f"{fleet.url}/ui/flights/{landing}")
    playwright.expect(page.locator("#output")).to_contain_text("hello from the console")
    playwright.expect(page.locator("#stage")).to_have_text("landed")
    _shoot(page, "web-console-flight.png")
    phone = _signed_in(chromium, fleet, viewport={"width": 390, "height": 844},
                       device_scale_factor=1, is_mobile=True)
    overflow = phone.evaluate("document.documentElement.scrollWidth > window.innerWidth")
    assert overflow is False  # no sideways scrolling on a phone
    _shoot(phone, "web-console-phone.png")


def test_a_runner_killed_while_its_page_is_open_shows_offline(make_fleet, chromium):
    fleet = make_fleet(QUICK)
    runner = fleet.runner("r2")
    fleet.wait_online("r2")
    page = _signed_in(chromium, fleet)
    page.click('nav a[href="/ui/runners"]')
    liveness = page.locator('[data-runner="r2"] [data-liveness]')
    playwright.expect(liveness).to_have_text("online")
    _shoot(page, "web-console-runners.png")
    page.evaluate("window.sameDocument = true")
    runner.proc.kill()  # SIGKILL: no goodbye, it just goes silent
    wait_until(lambda: runner.proc.poll() is not None, what="the runner process gone")
    playwright.expect(liveness).to_have_text("offline")
    assert page.evaluate("window.sameDocument") is True


def test_the_pending_queue_shows_a_held_flight_s_sentence_and_an_admin_clears_its_gate(
        make_fleet, chromium):
    fleet = make_fleet(QUICK)
    api = fleet.api()
    fleet.chart("ui")
    gate = api.request("POST", "/v1/environments", json={"name": "ui", "means": "false"})["gate"]
    opened = api.open_flight({"command": ["true"], "environment": "ui", "title": "held"})
    held = api.flight(opened["id"])  # the open answers the row; the sentence is read after
    page = _signed_in(chromium, fleet)
    page.click('nav a[href="/ui/pending"]')
    playwright.expect(page.locator("#pending")).to_contain_text(held["waiting"])
    playwright.expect(page.locator("#pending")).to_contain_text(held["remedy"])
    _shoot(page, "web-console-pending.png")
    page.evaluate("window.sameDocument = true")
    page.locator(f'form[action="/ui/gates/{gate}/clear"] button').click()
    playwright.expect(page.locator("#pending")).not_to_contain_text(held["id"])
    assert page.evaluate("window.sameDocument") is True
    assert api.gate(gate)["status"] == "cleared"
