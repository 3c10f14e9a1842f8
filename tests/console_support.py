"""Signing in to the web console as a browser does: the sign-in page's form token, then the
form posted from the console's own origin. Shared by tests/web."""

from __future__ import annotations

import re

ORIGIN = "http://testserver"


def form_token(html: str) -> str:
    return re.search(r'name="form_token" value="([^"]+)"', html).group(1)


def sign_in(browser, token: str, origin: str = ORIGIN):
    """Post the sign-in form as the page does; the answer (a redirect when it worked)."""
    page = browser.get("/ui/login")
    return browser.post("/ui/login", data={"token": token, "form_token": form_token(page.text)},
                        headers={"origin": origin}, follow_redirects=False)
