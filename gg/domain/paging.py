"""Opaque cursors for paged listings (docs/server.md, "Listings").

A cursor names the place after the last row of a page: the kind of listing and the row's
sequence number, so a page never shifts when rows are added meanwhile (new rows are newest and
come before the first page). Callers never read it; it is URL-safe base64 so it travels in a
query string as is.
"""

from __future__ import annotations

import base64
import binascii

BAD_CURSOR = "that cursor is not one this listing gave: start again without --cursor"


def make_cursor(kind: str, seq: int) -> str:
    return base64.urlsafe_b64encode(f"{kind}:{seq}".encode()).decode().rstrip("=")


def read_cursor(cursor: str | None, kind: str) -> int | None:
    """The sequence number ``cursor`` names (None: the first page); ValueError with
    :data:`BAD_CURSOR` when it is not one of ``kind``'s cursors."""
    if cursor is None or cursor == "":
        return None
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        got, _, seq = text.partition(":")
        if got != kind or not seq.isdigit() or len(seq) > 18:
            raise ValueError
        return int(seq)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise ValueError(BAD_CURSOR) from None
