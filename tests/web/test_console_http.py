"""The console over HTTP, no browser, on both stores: its sessions (made, ended, kept only as
hashes), what its pages read from the store, what its forms change there, and no 5xx whatever
a page is asked. The guards that never read the store are in test_console_guards.py."""

from __future__ import annotations

import html
import re

from fastapi.testclient import TestClient

from gg.control import leases
from gg.domain import tokens
from gg.server.app import create_app
from gg.settings import Settings
from gg.store import open_store

from console_support import ORIGIN, PAGES, open_flight, page_token, post_form, sign_in
from support import auth, check_in, make_runner

STORES = ("sqlite", "postgresql")  # sessions and pages read the store: each test runs on both


def _sessions(app) -> list[str]:
    """The hashes the store keeps of console sessions."""
    return [row[0] for row in app.state.core.store.db.all(
        "SELECT token_hash FROM console_sessions")]


def test_signing_in_sets_an_httponly_strict_session_cookie_and_stores_only_its_hash(
        browser, owner, app):
    answer = sign_in(browser, owner)
    assert answer.status_code == 303 and answer.headers["location"] == "/ui/flights"
    cookie = next(c for c in answer.headers.get_list("set-cookie") if c.startswith("gg_session="))
    flags = [f.strip().lower() for f in cookie.split(";")]
    assert "httponly" in flags and "samesite=strict" in flags and "path=/" in flags
    assert "secure" not in flags  # plain http here; over TLS it is Secure (test_console_guards.py)
    secret = cookie.split(";")[0].split("=", 1)[1]
    assert secret.startswith(tokens.SESSION) and owner not in cookie
    assert _sessions(app) == [tokens.digest(secret)]  # the hash, never the secret itself
    assert browser.get("/ui/flights").status_code == 200
    sign_in(browser, owner)  # signing in again: a new session, and the one before ends
    assert _sessions(app) == [tokens.digest(browser.cookies["gg_session"])]


def test_a_session_ends_at_its_expiry(browser, owner, clock, app):
    sign_in(browser, owner)
    assert browser.get("/ui/flights", follow_redirects=False).status_code == 200
    clock.advance(app.state.core.settings.console_session_ttl + 1)
    gone = browser.get("/ui/flights", follow_redirects=False)
    assert gone.status_code == 303 and gone.headers["location"] == "/ui/login"
    assert browser.get("/ui/wait").status_code == 401


def test_signing_out_deletes_the_session_so_its_cookie_works_no_more_and_both_are_events(
        browser, owner, app):
    sign_in(browser, owner)
    secret = browser.cookies["gg_session"]
    out = browser.post("/ui/logout", data={"form_token": page_token(browser)},
                       headers={"origin": ORIGIN}, follow_redirects=False)
    assert out.status_code == 303 and out.headers["location"] == "/ui/login"
    assert _sessions(app) == []
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
    assert _sessions(app) == []  # its row gone at its next use


def test_rotating_a_person_s_token_ends_the_console_sessions_made_with_the_old_one_at_once(
        browser, owner, app):
    added = browser.post("/v1/people", json={"name": "mo", "admin": False},
                         headers=auth(owner)).json()
    sign_in(browser, added["token"])
    kept = browser.cookies["gg_session"]
    assert browser.get("/ui/flights", follow_redirects=False).status_code == 200
    assert browser.get("/ui/wait").status_code == 200
    rotated = browser.post("/v1/people/mo/token", json={}, headers=auth(owner))
    assert rotated.status_code == 200, rotated.text
    gone = browser.get("/ui/flights", follow_redirects=False)
    assert gone.status_code == 303 and gone.headers["location"] == "/ui/login"
    browser.cookies.set("gg_session", kept)  # a copy kept of the old cookie
    assert browser.get("/ui/wait").status_code == 401
    assert _sessions(app) == []  # its row gone at its next use
    browser.cookies.clear()  # the copy set by hand would shadow the next session's cookie
    again = sign_in(browser, rotated.json()["token"])  # the new token signs in as usual
    assert again.status_code == 303, again.text
    assert browser.get("/ui/flights", follow_redirects=False).status_code == 200


def test_a_member_cannot_cancel_another_persons_flight_from_the_console(browser, owner):
    member = browser.post("/v1/people", json={"name": "mo", "admin": False},
                          headers=auth(owner)).json()["token"]
    theirs = open_flight(browser, owner, "true")
    mine = open_flight(browser, member, "true")
    sign_in(browser, member)
    page = browser.get("/ui/flights").text
    assert f"/ui/flights/{mine}/cancel" in page and f"/ui/flights/{theirs}/cancel" not in page
    assert "/ui/runners/" not in page and "cordon" not in browser.get("/ui/runners").text
    refused = browser.post(f"/ui/flights/{theirs}/cancel",
                           data={"form_token": page_token(browser)}, headers={"origin": ORIGIN})
    assert refused.status_code == 403
    assert "only the flight's opener or an admin may cancel it" in html.unescape(refused.text)
    assert browser.get(f"/v1/flights/{theirs}", headers=auth(owner)).json()["stage"] == "ready"


def test_no_console_path_answers_a_server_error(browser, owner):
    asked = [browser.get(p) for p in ("/", "/ui", *PAGES)]  # signed out: to the sign-in
    sign_in(browser, owner)
    token = page_token(browser)
    flight = open_flight(browser, owner, "true")
    past = 2**63  # one past the largest seq: SQLite cannot even bind it
    asked += [browser.get(p) for p in (
        *PAGES, "/ui/flights?stage=bogus", "/ui/flights/f_nope", "/ui/gates?status=bogus",
        "/ui/static/../app.py", "/ui/static/nope.js", "/ui/static/gg.py", "/ui/wait?after=-1",
        "/ui/wait?flight=f_nope", "/ui/flights/f_nope?part=1", f"/ui/wait?after={past}",
        f"/ui/wait?flight={flight}&facts={past}")]
    asked += [browser.post(p, data={"form_token": token}, headers={"origin": ORIGIN})
              for p in ("/ui/flights/f_nope/cancel", "/ui/gates/g_nope/clear",
                        "/ui/runners/nobody/cordon", "/ui/runners/nobody/explode")]
    asked.append(browser.post("/ui/login", content=b"\xff\xfe=%%%", headers={"origin": ORIGIN}))
    assert [a.status_code for a in asked if a.status_code >= 500] == []
    assert all("Traceback" not in a.text for a in asked)


def test_a_nul_character_in_what_a_page_is_asked_is_refused_on_both_stores(browser, owner):
    """PostgreSQL's text cannot hold U+0000: a page or form naming one is a plain 400 page on
    both stores (it was a server error on PostgreSQL), and nothing is changed."""
    ada = browser.post("/v1/people", json={"name": "ada", "admin": True},
                       headers=auth(owner)).json()["token"]
    held = browser.post("/v1/flights", json={"command": ["true"], "approval": True},
                        headers=auth(owner)).json()["id"]
    sign_in(browser, ada)
    asked = [browser.get(p) for p in ("/ui/flights/f_%00", "/ui/flights/f_%00?part=1",
                                      "/ui/wait?flight=f_%00")]
    asked += [post_form(browser, p) for p in ("/ui/flights/f_%00/cancel", "/ui/gates/g_%00/clear",
                                               "/ui/runners/r%00/cordon")]
    asked.append(post_form(browser, f"/ui/flights/{held}/reject", reason="not\x00today"))
    assert [a.status_code for a in asked] == [400] * len(asked)
    assert all("NUL character" in a.text for a in asked)
    assert browser.get(f"/v1/flights/{held}", headers=auth(owner)).json()["stage"] == "gated"


def test_an_admin_cordons_drains_and_resumes_a_runner_from_the_console(browser, owner, app):
    from gg.control.people import authenticate_person

    from support import make_runner

    core = app.state.core
    make_runner(core, authenticate_person(core, owner), name="r1")
    sign_in(browser, owner)
    for action, state in (("cordon", "cordoned"), ("drain", "drained"), ("resume", "active")):
        assert post_form(browser, f"/ui/runners/r1/{action}").status_code == 303
        assert f'data-state="{state}"' in browser.get("/ui/runners?part=1").text
    member = browser.post("/v1/people", json={"name": "mo", "admin": False},
                          headers=auth(owner)).json()["token"]
    sign_in(browser, member)
    refused = post_form(browser, "/ui/runners/r1/cordon")
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
    assert post_form(browser, f"/ui/gates/{gate}/clear", back="/ui/pending").status_code == 303
    assert held["id"] not in browser.get("/ui/pending?part=1").text
    assert browser.get(f"/v1/gates/{gate}", headers=auth(owner)).json()["status"] == "cleared"


def test_the_page_s_long_poll_answers_with_the_newest_event_after_its_own(browser, owner):
    sign_in(browser, owner)
    start = browser.get("/ui/wait?after=0").json()["after"]
    flight = open_flight(browser, owner, "true")
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
    refused = post_form(browser, f"/ui/flights/{first}/approve", back="/ui/pending")
    assert refused.status_code == 403
    assert "someone else must approve it" in html.unescape(refused.text)
    assert browser.get(f"/v1/flights/{first}", headers=auth(owner)).json()["stage"] == "gated"
    sign_in(browser, ada)
    assert post_form(browser, f"/ui/flights/{first}/approve", back="/ui/pending").status_code == 303
    assert browser.get(f"/v1/flights/{first}", headers=auth(owner)).json()["stage"] == "ready"
    assert post_form(browser, f"/ui/flights/{second}/reject", back="/ui/pending",
                 reason="not today").status_code == 303
    ended = browser.get(f"/v1/flights/{second}", headers=auth(owner)).json()
    assert (ended["stage"], ended["ended_reason"]) == ("cancelled", "rejected by ada: not today")


def test_a_waiting_flight_shows_its_start_estimate_or_why_there_is_none(browser, owner):
    waiting = open_flight(browser, owner, "true")
    shown = browser.get(f"/v1/flights/{waiting}", headers=auth(owner)).json()
    said = shown["expected_start"] or shown["expected_start_basis"]
    assert shown["waiting"] and said  # no runner at all: the basis says why there is no time
    sign_in(browser, owner)
    for page in ("/ui/flights", f"/ui/flights/{waiting}"):
        assert html.escape(said) in browser.get(page).text


def test_a_waiting_flight_with_runners_and_history_shows_when_it_is_expected_to_start(
        tmp_path, clock, store_url):
    """The row and the flight's page give the time (not only the basis) when there is one:
    a --dev server (a runner without a sandbox takes work), one runner, builds that landed."""
    store = open_store(tmp_path, store_url)
    app = create_app(Settings(dev=True), store, clock=clock, data_dir=tmp_path)
    owner = (tmp_path / "owner-token").read_text().strip()
    try:
        with TestClient(app, base_url=ORIGIN) as browser:
            _expected_start_shown(app.state.core, browser, owner, clock)
    finally:
        if store_url:
            store.close()


def _expected_start_shown(core, browser, owner, clock):
    runner = make_runner(core, core.store.person_by_name("owner"), "r1")
    for _ in range(2):  # the history: two builds of 30 s that landed
        built = open_flight(browser, owner, "build")
        check_in(core, runner)
        _, grant = leases.try_claim(core, runner.id)
        clock.advance(30)
        leases.hand_back(core, runner, built, epoch=grant.epoch, outcome="landed", exit_code=0,
                         reason=None, key=None)
    open_flight(browser, owner, "build")
    check_in(core, runner)
    leases.try_claim(core, runner.id)  # flying: the one below waits for it
    waiting = open_flight(browser, owner, "build")
    shown = browser.get(f"/v1/flights/{waiting}", headers=auth(owner)).json()
    assert shown["expected_start_at"] is not None
    said = shown["expected_start"]
    assert re.fullmatch(r"expected to start in ~\d+ s \(0 flights ahead on 1 runner\)", said)
    sign_in(browser, owner)
    for page in ("/ui/flights", f"/ui/flights/{waiting}"):
        assert f'<p class="estimate">{html.escape(said)}</p>' in browser.get(page).text


def test_a_changed_flight_shows_its_change_and_an_approval_for_what_was_shown_before_is_refused(
        browser, owner):
    ada = browser.post("/v1/people", json={"name": "ada", "admin": True},
                       headers=auth(owner)).json()["token"]
    opened = browser.post("/v1/flights", json={"command": ["echo harmless"], "approval": True,
                                               "service": {}}, headers=auth(owner))
    assert opened.status_code == 201, opened.text
    flight = opened.json()["id"]
    sign_in(browser, ada)
    before = re.search(r'name="digest" value="([^"]+)"', browser.get("/ui/pending?part=1").text)
    changed = browser.post(f"/v1/services/{flight}/update", json={"command": ["echo pwned"]},
                           headers=auth(owner))
    assert changed.status_code == 200 and changed.json()["approval"], changed.text
    digest = browser.get(f"/v1/flights/{flight}", headers=auth(ada)).json()["approval"]["digest"]
    change = "changed by owner: command: `'echo harmless'` -> `'echo pwned'`"
    for path in ("/ui/pending?part=1", f"/ui/flights/{flight}?part=1"):
        page = html.unescape(browser.get(path).text)
        assert digest in page and "echo pwned" in page and change in page, path
    refused = post_form(browser, f"/ui/flights/{flight}/approve", back="/ui/pending",
                        digest=before.group(1))
    assert refused.status_code == 409 and "changed since you looked" in html.unescape(refused.text)
    assert post_form(browser, f"/ui/flights/{flight}/approve", back="/ui/pending",
                     digest=digest).status_code == 303
    shown = browser.get(f"/v1/flights/{flight}", headers=auth(ada)).json()
    assert (shown["stage"], shown["approval"]["approved"]["digest"]) == ("ready", digest)


def test_the_flight_page_shows_its_concurrency_key_and_its_grace(browser, owner):
    shown = browser.post("/v1/flights", headers=auth(owner), json={
        "command": ["true"], "grace": 30,
        "concurrency": {"key": "deploy-prod", "limit": 2, "cancel_in_progress": True}})
    assert shown.status_code == 201, shown.text
    sign_in(browser, owner)
    page = browser.get(f"/ui/flights/{shown.json()['id']}").text
    assert "deploy-prod (at most 2 at once, cancels older ones in progress)" in page
    assert "30s from SIGTERM to SIGKILL" in page


def test_the_flight_page_shows_its_note_as_text_and_the_api_answers_it(browser, owner):
    note = "release 4.2 <b>for the auditors</b>\nsecond line"
    shown = browser.post("/v1/flights", headers=auth(owner), json={
        "command": ["true"], "note": note})
    assert shown.status_code == 201, shown.text
    flight_id = shown.json()["id"]
    assert browser.get(f"/v1/flights/{flight_id}", headers=auth(owner)).json()["note"] == note
    sign_in(browser, owner)
    page = browser.get(f"/ui/flights/{flight_id}").text
    assert html.escape(note, quote=False) in page  # shown as text: no tag of its own
    assert "<b>for the auditors</b>" not in page


def test_a_note_with_a_control_character_is_refused_in_one_sentence_and_opens_nothing(
        browser, owner, app):
    before = len(app.state.core.store.db.all("SELECT id FROM flights"))
    refused = browser.post("/v1/flights", headers=auth(owner), json={
        "command": ["true"], "note": "clear the screen \x1b[2J"})
    assert refused.status_code == 400, refused.text
    assert "control characters" in refused.json()["error"]["message"]
    assert len(app.state.core.store.db.all("SELECT id FROM flights")) == before


def test_the_flight_page_names_its_secrets_and_never_shows_a_value(browser, owner):
    value = "web-s3cret-value"
    put = browser.put("/v1/secrets/DEPLOY_TOKEN", headers=auth(owner), json={"value": value})
    assert put.status_code == 200 and value not in put.text, put.text
    shown = browser.post("/v1/flights", headers=auth(owner), json={
        "command": ["true"], "secrets": [{"name": "DEPLOY_TOKEN", "envvar": "TOKEN"}]})
    assert shown.status_code == 201, shown.text
    sign_in(browser, owner)
    page = browser.get(f"/ui/flights/{shown.json()['id']}").text
    assert "DEPLOY_TOKEN as $TOKEN" in page and value not in page
    listed = browser.get("/v1/secrets", headers=auth(owner))
    assert listed.json()[0]["name"] == "DEPLOY_TOKEN" and value not in listed.text


def test_the_flight_page_lists_the_identity_tokens_minted_for_it_and_never_a_token(
        tmp_path, clock, store_url):
    """A --dev server (a runner without a sandbox takes work), one runner flying the flight,
    one token minted for it through the use case the runner's route calls."""
    store = open_store(tmp_path, store_url)
    app = create_app(Settings(dev=True), store, clock=clock, data_dir=tmp_path)
    owner = (tmp_path / "owner-token").read_text().strip()
    try:
        with TestClient(app, base_url=ORIGIN) as browser:
            _id_tokens_shown(app.state.core, browser, owner)
    finally:
        if store_url:
            store.close()


def _id_tokens_shown(core, browser, owner):
    from gg.control import id_tokens
    from gg.domain.runners import RunnerIdentity

    runner = make_runner(core, core.store.person_by_name("owner"), "r1")
    flight_id = open_flight(browser, owner, "true")
    check_in(core, runner)
    flight, grant = leases.try_claim(core, runner.id)
    assert flight.id == flight_id
    minted = id_tokens.mint(core, RunnerIdentity.of(runner), flight_id, epoch=grant.epoch,
                            audience="sts.example", base_url=ORIGIN)
    shown = browser.get(f"/v1/flights/{flight_id}", headers=auth(owner)).json()
    assert [(t["audience"], t["jti"]) for t in shown["id_tokens"]] == [
        ("sts.example", minted["jti"])]
    sign_in(browser, owner)
    page = browser.get(f"/ui/flights/{flight_id}").text
    assert "identity tokens" in page and "for sts.example (epoch 1" in page
    assert minted["token"] not in page
