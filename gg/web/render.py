"""Jinja2 for the console: one environment, autoescaped, and the few filters that turn
seconds into words. Sentences themselves come from the control layer, never from here."""

from __future__ import annotations

import time
from pathlib import Path

from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, pass_context, select_autoescape

from gg.domain.flights import Stage
from gg.web.guard import secured

HERE = Path(__file__).parent
STATIC = HERE / "static"

NAV = (("/ui/flights", "flights"), ("/ui/pending", "pending"), ("/ui/runners", "runners"),
       ("/ui/pools", "pools"), ("/ui/gates", "gates"), ("/ui/events", "events"))


@pass_context
def ago(context, at: float | None) -> str:
    """How long ago ``at`` was, by the server's clock (``now`` in the page's context)."""
    if at is None:
        return "never"
    return age(max(0.0, context.get("now", time.time()) - at)) + " ago"


def age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = int(seconds)
    if s < 90:
        return f"{s}s"
    if s < 90 * 60:
        return f"{s // 60}m"
    if s < 36 * 3600:
        return f"{s // 3600}h {s % 3600 // 60}m"
    return f"{s // 86400}d"


def when(at: float | None) -> str:
    return "-" if at is None else time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(at))


def words(values: dict | None, prefix: str = "") -> str:
    """``key=value`` words (a nested mapping as ``key.inner=value``; nothing for an unset
    value), never a Python literal."""
    out = []
    for key, value in sorted((values or {}).items()):
        if isinstance(value, dict):
            out.append(words(value, f"{prefix}{key}.") if value else "")
        elif isinstance(value, (list, tuple)):
            out.append(f"{prefix}{key}={','.join(str(v) for v in value)}")
        elif value is not None:
            out.append(f"{prefix}{key}={value}")
    return " ".join(w for w in out if w and w != "-") or "-"


def is_final(stage: str) -> bool:
    return Stage(stage).final


_ENV = Environment(loader=FileSystemLoader(HERE / "templates"),
                   autoescape=select_autoescape(("html",), default=True),
                   trim_blocks=True, lstrip_blocks=True)
_ENV.filters.update(ago=ago, age=age, when=when, words=words)
_ENV.globals.update(is_final=is_final, nav=NAV)


def page(template: str, context: dict, *, code: int = 200) -> HTMLResponse:
    return secured(HTMLResponse(_ENV.get_template(template).render(**context), status_code=code))


def part(template: str, context: dict) -> HTMLResponse:
    """Only the live part of a page, for the page's script to swap in."""
    return page(f"parts/{template}", context)
