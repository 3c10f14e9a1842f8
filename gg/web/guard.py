"""What every console request passes: its session, its form token, its origin; and the
headers every console answer carries (a strict Content-Security-Policy among them)."""

from __future__ import annotations

from typing import TypeVar
from urllib.parse import parse_qs, urlsplit

from fastapi import Request
from fastapi.responses import Response

from gg.control import console
from gg.domain import console as rules
from gg.domain import tokens
from gg.domain.people import Person
from gg.errors import Forbidden

R = TypeVar("R", bound=Response)

SESSION_COOKIE = "gg_session"
LOGIN_COOKIE = "gg_login"  # the sign-in form's double-submit token (no session exists yet)

# No inline script or style anywhere: every script and style is a file of gg's own.
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
       "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; "
       "object-src 'none'")
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    # same-origin, not no-referrer: with no-referrer a browser sends `Origin: null` on a
    # form post, and the origin check below could not tell the console from anyone.
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Permissions-Policy": "camera=(), microphone=(), geolocation=()",
}
NO_STORE = {"Cache-Control": "no-store"}
STALE_FORM = ("this form did not come from this console, or its page is too old: "
              "reload the page and try again")


def secured(response: R, *, cache: bool = False) -> R:
    response.headers.update(HEADERS)
    if not cache:
        response.headers.update(NO_STORE)
    return response


def is_tls(request: Request) -> bool:
    return request.url.scheme == "https"


def session_secret(request: Request) -> str | None:
    return request.cookies.get(SESSION_COOKIE)


def person(request: Request) -> Person:
    """The signed-in person (401 Unauthorized when the session is missing or ended)."""
    return console.signed_in(request.app.state.core, session_secret(request))


def set_session(response: Response, request: Request, secret: str, ttl: float) -> None:
    response.set_cookie(SESSION_COOKIE, secret, max_age=int(ttl), path="/", httponly=True,
                        samesite="strict", secure=is_tls(request))


def end_session(response: Response, request: Request) -> None:
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict",
                           secure=is_tls(request))


def new_login_token() -> str:
    return tokens.digest(tokens.mint(tokens.SESSION))  # random, and never a usable secret


def set_login_token(response: Response, request: Request, value: str) -> None:
    response.set_cookie(LOGIN_COOKIE, value, max_age=3600, path="/ui/login", httponly=True,
                        samesite="strict", secure=is_tls(request))


async def form(request: Request) -> dict[str, str]:
    """The posted form (urlencoded; the body limit applies before this reads it)."""
    body = (await request.body()).decode("utf-8", "replace")
    return {k: v[0] for k, v in parse_qs(body, keep_blank_values=True).items()}


def check_origin(request: Request) -> None:
    """A post must come from a page of this console: its Origin (or, without one, its
    Referer) names this host. Behind a proxy that keeps the Host header this still holds."""
    sent = request.headers.get("origin") or request.headers.get("referer")
    if sent is None:
        raise Forbidden(STALE_FORM)
    host = request.headers.get("host", "")
    if sent == "null" or urlsplit(sent).netloc.lower() != host.lower():
        raise Forbidden(STALE_FORM)


def check_form(request: Request, fields: dict[str, str]) -> None:
    """A signed-in post: right origin, and the session's form token."""
    check_origin(request)
    if not rules.form_token_matches(session_secret(request) or "", fields.get("form_token")):
        raise Forbidden(STALE_FORM)


def check_login_form(request: Request, fields: dict[str, str]) -> None:
    """The sign-in post: right origin, and the form field equal to its cookie."""
    check_origin(request)
    cookie = request.cookies.get(LOGIN_COOKIE) or ""
    given = fields.get("form_token") or ""
    if not cookie or not given or not tokens.same_digest(cookie, given):
        raise Forbidden(STALE_FORM)
