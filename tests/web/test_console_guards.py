"""The console's guards over HTTP, no browser: its cookie over TLS, its headers, its forms'
tokens and origins, where a form may send a browser back to, its refusals as plain pages.
None of these reads what the store holds, so they run on SQLite alone; what does is in
test_console_http.py, on both stores."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from console_support import ORIGIN, PAGES, open_flight, page_token, sign_in
from support import auth


def test_over_tls_the_session_cookie_is_secure(app, owner):
    with TestClient(app, base_url="https://testserver") as tls:
        answer = sign_in(tls, owner, origin="https://testserver")
    cookie = next(c for c in answer.headers.get_list("set-cookie") if c.startswith("gg_session="))
    assert "secure" in [f.strip().lower() for f in cookie.split(";")]


def test_every_console_answer_carries_a_strict_content_security_policy(browser, owner):
    login = browser.get("/ui/login")
    sign_in(browser, owner)
    flight = open_flight(browser, owner, "true")
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
    flight = open_flight(browser, owner, "true")
    token = page_token(browser)
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
    flight = open_flight(browser, owner, "true")
    done = browser.post(f"/ui/flights/{flight}/cancel",
                        data={"form_token": page_token(browser), "back": "https://evil.test/"},
                        headers={"origin": ORIGIN}, follow_redirects=False)
    assert done.headers["location"] == f"/ui/flights/{flight}"


def test_a_bad_token_gets_a_plain_error_page(browser, owner):
    for bad in ("ggp_not-a-token", "", "ggr_" + "x" * 30, owner + "x"):
        answer = sign_in(browser, bad)
        assert answer.status_code == 401
        assert answer.headers["content-type"].startswith("text/html")
        assert "that token was not accepted" in answer.text
        assert "Traceback" not in answer.text and "gg_session" not in browser.cookies


def test_no_api_docs_page_loads_a_script_from_another_origin_and_every_html_answer_is_guarded(
        app, browser, owner):
    # The API's schema is /openapi.json; no Swagger UI or ReDoc page (they load a CDN's script).
    assert browser.get("/openapi.json").status_code == 200
    for path in ("/docs", "/redoc", "/docs/oauth2-redirect"):
        answer = browser.get(path)
        assert answer.status_code == 404, (path, answer.status_code)
        assert not answer.headers["content-type"].startswith("text/html")

    # An HTML answer from anything on the console's origin, not only the console's own pages.
    from fastapi.responses import HTMLResponse

    @app.get("/elsewhere", include_in_schema=False)
    async def elsewhere() -> HTMLResponse:
        return HTMLResponse("<p>an unguarded page</p>")

    sign_in(browser, owner)
    for path in ("/", "/ui/login", "/ui/flights", "/elsewhere"):
        answer = browser.get(path, follow_redirects=True)
        assert answer.headers["content-type"].startswith("text/html"), path
        csp = answer.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp, path
        assert answer.headers["x-frame-options"] == "DENY", path
        scripts = re.findall(r"<script[^>]*src=\"([^\"]*)\"", answer.text)
        assert all(src.startswith("/") and not src.startswith("//") for src in scripts), scripts
