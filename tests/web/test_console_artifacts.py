"""The flight page links each artifact the flight left; the link downloads it, signed in
only (docs/work-graphs.md, docs/web-console.md)."""

from __future__ import annotations

import hashlib

import pytest

from gg.control import artifacts, flights, leases
from gg.domain.flight_spec import FlightSpec
from gg.settings import Settings

from console_support import sign_in
from support import make_runner


@pytest.fixture
def settings() -> Settings:
    return Settings(console_wait=2.0, dev=True)  # a runner healthy without a capability report


def test_the_flight_page_links_each_artifact_and_the_link_downloads_it_signed_in_only(
        app, browser, owner, tmp_path):
    core = app.state.core
    person = core.store.person_by_name("owner")
    runner = make_runner(core, person, "r1")
    f = flights.open_flight(core, person, FlightSpec(command=["true"]))
    _, grant = leases.try_claim(core, runner.id)
    data = b"the build's output\n" * 100
    spooled = tmp_path / "spooled"
    spooled.write_bytes(data)
    artifacts.uploaded(core, core.store.runner(runner.id), f.id, epoch=grant.epoch,
                       name="dist/app bin.txt", digest=hashlib.sha256(data).hexdigest(),
                       size=len(data), spooled=spooled)
    link = f"/ui/flights/{f.id}/artifacts/dist/app%20bin.txt"
    assert browser.get(link, follow_redirects=False).status_code in (303, 401)  # not signed in
    sign_in(browser, owner)
    page = browser.get(f"/ui/flights/{f.id}").text
    assert f'<a href="{link}" download>dist/app bin.txt</a>' in page
    got = browser.get(link)
    assert got.status_code == 200 and got.content == data
    assert got.headers["x-gg-sha256"] == hashlib.sha256(data).hexdigest()
    missing = browser.get(f"/ui/flights/{f.id}/artifacts/nope.txt")
    assert missing.status_code == 404
    assert f"flight {f.id} has no artifact &#39;nope.txt&#39;" in missing.text
