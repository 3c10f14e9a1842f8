"""The console over HTTP, no browser: its session cookie, its forms' guards, its headers,
its refusals as plain pages, and no 5xx whatever a page is asked."""

from __future__ import annotations

import html
import re
import sqlite3

from fastapi.testclient import TestClient

from console_support import ORIGIN, form_token, sign_in
from gg.control import leases
from gg.domain import tokens
from gg.server.app import create_app
from gg.settings import Settings
from gg.store import open_store
from support import auth, check_in, make_runner

PAGES = ("/ui/flights", "/ui/runners", "/ui/pools", "/ui/gates", "/ui/pending", "/ui/events")


def _open(browser, token, *command):
    answer = browser.post("/v1/flights", json={"command": list(command)}, headers=auth(token))
    assert answer.status_code == 201, answer.text
    return answer.json()["id"]


def _page_token(browser, path="/ui/flights") -> str:
    return form_token(browser.get(path).text)


def test_signing_in_sets_an_httponly_strict_session_cookie_and_stores_only_its_hash(
        browser, owner, tmp_path):
    answer = sign_in(browser, owner)
    assert answer.status_code == 303 and answer.headers["location"] == "/ui/flights"
    cookie = next(c for c in answer.headers.get_list("set-cookie") if c.startswith("gg_session="))
    flags = [f.strip().lower() for f in cookie.split(";")]
    assert "httponly" in flags and "samesite=strict" in flags and "path=/" in flags
    assert "secure" not in flags  # plain http here; over TLS it is Secure (the next test)
    secret = cookie.split(";")[0].split("=", 1)[1]
    assert secret.startswith(tokens.SESSION) and owner not in cookie
    rows = sqlite3.connect(tmp_path / "gg.sqlite3").execute(
        "SELECT token_hash FROM console_sessions").fetchall()
    assert rows == [(tokens.digest(secret),)]  # the hash, never the secret itself
    assert browser.get("/ui/flights").status_code == 200
    sign_in(browser, owner)  # signing in again: a new session, and the one before ends
    assert sqlite3.connect(tmp_path / "gg.sqlite3").execute(
        "SELECT token_hash FROM console_sessions").fetchall() == [
            (tokens.digest(browser.cookies["gg_session"]),)]


def test_over_tls_the_session_cookie_is_secure(app, owner):
    with TestClient(app, base_url="https://testserver") as tls:
        answer = sign_in(tls, owner, origin="https://testserver")
    cookie = next(c for c in answer.headers.get_list("set-cookie") if c.startswith("gg_session="))
    assert "secure" in [f.strip().lower() for f in cookie.split(";")]


def test_every_console_answer_carries_a_strict_content_security_policy(browser, owner):
    login = browser.get("/ui/login")
    sign_in(browser, owner)
    flight = _open(browser, owner, "true")
    for answer in [login, *(browser.get(p) for p in (*PAGES, f"/ui/flights/{flight}",
                                                       "/ui/flights?part=1", "/ui/static/gg.js"))]:
        csp = answer.headers["content-security-policy"]
        assert "default-src 'self'" in csp and "frame-ancestors 'none'" in csp
        assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["x-frame-options"] == "DENY"
    page = browser.get("/ui/flights").text
    assert "<script>" not in page and "style=" not in page and "<style" not in page
    assert re.findall(r"<script[^>]*>", page) == ['<script src="/ui/static/gg.js" defer>']


def test_a_form_without_its_token_or_from_another_origin_is_refused(browser, owner):
    sign_in(browser, owner)
    flight = _open(browser, owner, "true")
    token = _page_token(browser)
    cancel = f"/ui/flights/{flight}/cancel"
    refused = [
        browser.post(cancel, data={}, headers={"origin": ORIGIN}),
        browser.post(cancel, data={"form_token": "0" * 64}, headers={"origin": ORIGIN}),
        browser.post(cancel, data={"form_token": token}, headers={"origin": "https://evil.test"}),
        browser.post(cancel, data={"form_token": token}, headers={"origin": "null"}),
        browser.post(cancel, data={"form_token": token}),  # neither Origin nor Referer
    ]
    for answer in refused:
        assert answer.status_code == 403 and "reload the page" in answer.text
        assert answer.headers["content-type"].startswith("text/html")
    assert browser.get(f"/v1/flights/{flight}", headers=auth(owner)).json()["stage"] == "ready"
    # The sign-in form has its own token (double-submitted: cookie and field).
    assert browser.post("/ui/login", data={"token": owner, "form_token": "x"},
                        headers={"origin": ORIGIN}).status_code == 403
    done = browser.post(cancel, data={"form_token": token, "back": "/ui/flights"},
                        headers={"origin": ORIGIN}, follow_redirects=False)
    assert done.status_code == 303 and done.headers["location"] == "/ui/flights"
    assert browser.get(f"/v1/flights/{flight}", headers=auth(owner)).json()["stage"] == "cancelled"


def test_a_form_returns_only_to_a_console_page(browser, owner):
    sign_in(browser, owner)
    flight = _open(browser, owner, "true")
    done = browser.post(f"/ui/flights/{flight}/cancel",
                        data={"form_token": _page_token(browser), "back": "https://evil.test/"},
                        headers={"origin": ORIGIN}, follow_redirects=False)
    assert done.headers["location"] == f"/ui/flights/{flight}"


def test_a_session_ends_at_its_expiry(browser, owner, clock, app):
    sign_in(browser, owner)
    assert browser.get("/ui/flights", follow_redirects=False).status_code == 200
    clock.advance(app.state.core.settings.console_session_ttl + 1)
    gone = browser.get("/ui/flights", follow_redirects=False)
    assert gone.status_code == 303 and gone.headers["location"] == "/ui/login"
    assert browser.get("/ui/wait").status_code == 401


def test_signing_out_deletes_the_session_so_its_cookie_works_no_more_and_both_are_events(
        browser, owner, tmp_path):
    sign_in(browser, owner)
    secret = browser.cookies["gg_session"]
    out = browser.post("/ui/logout", data={"form_token": _page_token(browser)},
                       headers={"origin": ORIGIN}, follow_redirects=False)
    assert out.status_code == 303 and out.headers["location"] == "/ui/login"
    assert sqlite3.connect(tmp_path / "gg.sqlite3").execute(
        "SELECT count(*) FROM console_sessions").fetchone() == (0,)
    browser.cookies.set("gg_session", secret)  # a copy kept of the old cookie
    assert browser.get("/ui/flights", follow_redirects=False).headers["location"] == "/ui/login"
    kinds = [e["kind"] for e in browser.get("/v1/events", headers=auth(owner)).json()]
    assert kinds[-2:] == ["info:person:signed_in", "info:person:signed_out"]
    assert secret not in browser.get("/v1/events", headers=auth(owner)).text


def test_removing_a_person_ends_their_console_sessions(browser, owner, app):
    added = browser.post("/v1/people", json={"name": "mo", "admin": False},
                         headers=auth(owner)).json()
    sign_in(browser, added["token"])
    assert browser.get("/ui/flights", follow_redirects=False).status_code == 200
    assert browser.delete("/v1/people/mo", headers=auth(owner)).status_code == 200
    assert browser.get("/ui/flights", follow_redirects=False).status_code == 303


def test_a_member_cannot_cancel_another_persons_flight_from_the_console(browser, owner):
    member = browser.post("/v1/people", json={"name": "mo", "admin": False},
                          headers=auth(owner)).json()["token"]
    theirs = _open(browser, owner, "true")
    mine = _open(browser, member, "true")
    sign_in(browser, member)
    page = browser.get("/ui/flights").text
    assert f"/ui/flights/{mine}/cancel" in page and f"/ui/flights/{theirs}/cancel" not in page
    assert "/ui/runners/" not in page and "cordon" not in browser.get("/ui/runners").text
    refused = browser.post(f"/ui/flights/{theirs}/cancel",
                           data={"form_token": _page_token(browser)}, headers={"origin": ORIGIN})
    assert refused.status_code == 403
    assert "only the flight's opener or an admin may cancel it" in html.unescape(refused.text)
    assert browser.get(f"/v1/flights/{theirs}", headers=auth(owner)).json()["stage"] == "ready"


def test_a_bad_token_gets_a_plain_error_page(browser, owner):
    for bad in ("ggp_not-a-token", "", "ggr_" + "x" * 30, owner + "x"):
        answer = sign_in(browser, bad)
        assert answer.status_code == 401
        assert answer.headers["content-type"].startswith("text/html")
        assert "that token was not accepted" in answer.text
        assert "Traceback" not in answer.text and "gg_session" not in browser.cookies


def test_no_console_path_answers_a_server_error(browser, owner):
    asked = [browser.get(p) for p in ("/", "/ui", *PAGES)]  # signed out: to the sign-in
    sign_in(browser, owner)
    token = _page_token(browser)
    asked += [browser.get(p) for p in (
        *PAGES, "/ui/flights?stage=bogus", "/ui/flights/f_nope", "/ui/gates?status=bogus",
        "/ui/static/../app.py", "/ui/static/nope.js", "/ui/static/gg.py", "/ui/wait?after=-1",
        "/ui/wait?flight=f_nope", "/ui/flights/f_nope?part=1")]
    asked += [browser.post(p, data={"form_token": token}, headers={"origin": ORIGIN})
              for p in ("/ui/flights/f_nope/cancel", "/ui/gates/g_nope/clear",
                        "/ui/runners/nobody/cordon", "/ui/runners/nobody/explode")]
    asked.append(browser.post("/ui/login", content=b"\xff\xfe=%%%", headers={"origin": ORIGIN}))
    assert [a.status_code for a in asked if a.status_code >= 500] == []
    assert all("Traceback" not in a.text for a in asked)


def _post(browser, path, **fields):
    return browser.post(path, data={"form_token": _page_token(browser), **fields},
                        headers={"origin": ORIGIN}, follow_redirects=False)


def test_an_admin_cordons_drains_and_resumes_a_runner_from_the_console(browser, owner, app):
    from gg.control.people import authenticate_person
    from support import make_runner

    core = app.state.core
    make_runner(core, authenticate_person(core, owner), name="r1")
    sign_in(browser, owner)
    for action, state in (("cordon", "cordoned"), ("drain", "drained"), ("resume", "active")):
        assert _post(browser, f"/ui/runners/r1/{action}").status_code == 303
        assert f'data-state="{state}"' in browser.get("/ui/runners?part=1").text
    member = browser.post("/v1/people", json={"name": "mo", "admin": False},
                          headers=auth(owner)).json()["token"]
    sign_in(browser, member)
    refused = _post(browser, "/ui/runners/r1/cordon")
    assert refused.status_code == 403 and "only an admin may do that" in refused.text
    assert browser.get("/v1/runners/r1", headers=auth(owner)).json()["state"] == "active"


def test_the_pending_queue_shows_a_gate_and_the_flights_it_holds_until_it_is_cleared(
        browser, owner):
    def chart(means):
        return browser.post("/v1/environments", json={"name": "ui", "means": means},
                            headers=auth(owner)).json()["gate"]

    browser.post(f"/v1/gates/{chart('true')}/clear", headers=auth(owner))
    gate = chart("false")  # re-charting: a flight opened meanwhile waits behind its gate
    held = browser.post("/v1/flights", json={"command": ["true"], "environment": "ui"},
                        headers=auth(owner)).json()
    assert held["stage"] == "gated"
    held = browser.get(f"/v1/flights/{held['id']}", headers=auth(owner)).json()  # with its sentence
    sign_in(browser, owner)
    pending = browser.get("/ui/pending?part=1").text
    assert gate in pending and held["id"] in pending
    assert html.escape(held["waiting"]) in pending  # the domain's sentence, as it is
    assert _post(browser, f"/ui/gates/{gate}/clear", back="/ui/pending").status_code == 303
    assert held["id"] not in browser.get("/ui/pending?part=1").text
    assert browser.get(f"/v1/gates/{gate}", headers=auth(owner)).json()["status"] == "cleared"


def test_the_page_s_long_poll_answers_with_the_newest_event_after_its_own(browser, owner):
    sign_in(browser, owner)
    start = browser.get("/ui/wait?after=0").json()["after"]
    flight = _open(browser, owner, "true")
    seen = browser.get(f"/ui/wait?after={start}").json()
    assert seen["after"] > start
    assert browser.get(f"/ui/wait?after={seen['after']}&flight={flight}&facts=0").status_code == 200


def test_the_pools_page_shows_a_pool_s_maintainer_members_and_attestation_age(
        browser, owner, clock):
    from support import http_proof

    def ok(answer):
        assert answer.status_code in (200, 201), answer.text
        return answer.json()

    def admin(method, path, **kw):
        return ok(browser.request(method, path, headers=auth(owner), **kw))

    gate = admin("POST", "/v1/environments", json={"name": "ui", "means": "true"})["gate"]
    admin("POST", f"/v1/gates/{gate}/clear")
    strategy = {"environment": "ui", "inventory": {"name": "ui-pool", "size": 2, "warm": 1},
                "image": {"ref": "ui-image", "digest": "sha256:" + "c" * 64}}
    applied = admin("PUT", "/v1/strategies/ui", json={"strategy": strategy})
    admin("POST", f"/v1/gates/{applied['gate']['id']}/clear")
    keeper = admin("POST", "/v1/runners", json={"name": "keeper",
                                                **http_proof(browser, "register")})["credential"]
    ok(browser.post("/v1/runner/check-in", json={}, headers=auth(keeper)))
    admin("POST", "/v1/pools/ui-pool/allow", json={"runner": "keeper"})
    code = ok(browser.post("/v1/pools/ui-pool/actions", json={"action": "start"},
                           headers=auth(keeper)))["code"]
    ok(browser.post("/v1/members/join", json=http_proof(browser, "join"), headers=auth(code)))
    ok(browser.post("/v1/pools/ui-pool/attest", json={}, headers=auth(keeper)))
    clock.advance(75)
    sign_in(browser, owner)
    page = browser.get("/ui/pools?part=1").text
    shown = admin("GET", "/v1/pools/ui-pool")
    assert "ui-pool" in page and "maintainer keeper" in page
    assert "attested 75s ago" in page
    assert shown["members"] and all(m["name"] in page for m in shown["members"])


def test_an_approval_is_given_or_refused_from_the_pending_queue_never_by_its_opener(
        browser, owner):
    ada = browser.post("/v1/people", json={"name": "ada", "admin": True},
                       headers=auth(owner)).json()["token"]
    first = browser.post("/v1/flights", json={"command": ["true"], "approval": True},
                         headers=auth(owner)).json()["id"]
    second = browser.post("/v1/flights", json={"command": ["true"], "approval": True},
                          headers=auth(owner)).json()["id"]
    sign_in(browser, owner)  # the opener, an admin: separation of duties still refuses
    page = browser.get("/ui/pending?part=1").text
    assert f"/ui/flights/{first}/approve" in page and f"/ui/flights/{second}/reject" in page
    refused = _post(browser, f"/ui/flights/{first}/approve", back="/ui/pending")
    assert refused.status_code == 403
    assert "someone else must approve it" in html.unescape(refused.text)
    assert browser.get(f"/v1/flights/{first}", headers=auth(owner)).json()["stage"] == "gated"
    sign_in(browser, ada)
    assert _post(browser, f"/ui/flights/{first}/approve", back="/ui/pending").status_code == 303
    assert browser.get(f"/v1/flights/{first}", headers=auth(owner)).json()["stage"] == "ready"
    assert _post(browser, f"/ui/flights/{second}/reject", back="/ui/pending",
                 reason="not today").status_code == 303
    ended = browser.get(f"/v1/flights/{second}", headers=auth(owner)).json()
    assert (ended["stage"], ended["ended_reason"]) == ("cancelled", "rejected by ada: not today")


def test_a_waiting_flight_shows_its_start_estimate_or_why_there_is_none(browser, owner):
    waiting = _open(browser, owner, "true")
    shown = browser.get(f"/v1/flights/{waiting}", headers=auth(owner)).json()
    said = shown["expected_start"] or shown["expected_start_basis"]
    assert shown["waiting"] and said  # no runner at all: the basis says why there is no time
    sign_in(browser, owner)
    for page in ("/ui/flights", f"/ui/flights/{waiting}"):
        assert html.escape(said) in browser.get(page).text


def test_a_waiting_flight_with_runners_and_history_shows_when_it_is_expected_to_start(
        tmp_path, clock):
    """The row and the flight's page give the time (not only the basis) when there is one:
    a --dev server (a runner without a sandbox takes work), one runner, builds that landed."""
    app = create_app(Settings(dev=True), open_store(tmp_path), clock=clock, data_dir=tmp_path)
    owner = (tmp_path / "owner-token").read_text().strip()
    with TestClient(app, base_url=ORIGIN) as browser:
        _expected_start_shown(app.state.core, browser, owner, clock)


def _expected_start_shown(core, browser, owner, clock):
    runner = make_runner(core, core.store.person_by_name("owner"), "r1")
    for _ in range(2):  # the history: two builds of 30 s that landed
        built = _open(browser, owner, "build")
        check_in(core, runner)
        _, grant = leases.try_claim(core, runner.id)
        clock.advance(30)
        leases.hand_back(core, runner, built, epoch=grant.epoch, outcome="landed", exit_code=0,
                         reason=None, key=None)
    _open(browser, owner, "build")
    check_in(core, runner)
    leases.try_claim(core, runner.id)  # flying: the one below waits for it
    waiting = _open(browser, owner, "build")
    shown = browser.get(f"/v1/flights/{waiting}", headers=auth(owner)).json()
    assert shown["expected_start_at"] is not None
    said = shown["expected_start"]
    assert re.fullmatch(r"expected to start in ~\d+ s \(0 flights ahead on 1 runner\)", said)
    sign_in(browser, owner)
    for page in ("/ui/flights", f"/ui/flights/{waiting}"):
        assert f'<p class="estimate">{html.escape(said)}</p>' in browser.get(page).text
