"""Signing in to the web console as a browser does: the sign-in page's form token, then the
form posted from the console's own origin; and the console's forms posted the same way.
Shared by tests/web."""

from __future__ import annotations

import re

from support import auth

ORIGIN = "http://testserver"
PAGES = ("/ui/flights", "/ui/runners", "/ui/pools", "/ui/gates", "/ui/pending", "/ui/events")


def form_token(html: str) -> str:
    return re.search(r'name="form_token" value="([^"]+)"', html).group(1)


def sign_in(browser, token: str, origin: str = ORIGIN):
    """Post the sign-in form as the page does; the answer (a redirect when it worked)."""
    page = browser.get("/ui/login")
    return browser.post("/ui/login", data={"token": token, "form_token": form_token(page.text)},
                        headers={"origin": origin}, follow_redirects=False)


def open_flight(browser, token: str, *command: str) -> str:
    """Open a flight through the API as ``token``'s person; its id."""
    answer = browser.post("/v1/flights", json={"command": list(command)}, headers=auth(token))
    assert answer.status_code == 201, answer.text
    return answer.json()["id"]


def page_token(browser, path: str = "/ui/flights") -> str:
    """The form token a signed-in page carries."""
    return form_token(browser.get(path).text)


def post_form(browser, path: str, **fields):
    """Post one of the console's forms as its page does (its token, this origin)."""
    return browser.post(path, data={"form_token": page_token(browser), **fields},
                        headers={"origin": ORIGIN}, follow_redirects=False)
