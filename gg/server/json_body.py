"""Request bodies are read as strict JSON: ``NaN``, ``Infinity`` and ``-Infinity`` are refused.

Python's ``json`` reads those three words (not JSON: RFC 8259 has no such numbers), and reads a
number too large for a float (``1e999``) as infinity. A value like that would be stored, then
break every answer that carries it (a JSON encoder refuses it, a comparison with it is always
false), so it is answered 400 at the door in the one error shape, before any use case runs.
Every router uses :class:`JsonRoute`, so every request body is read here, whatever model (or
free-form field: readings, fact bodies, inventory) it is for.

Bodies are parsed with orjson, which is strict already (no NaN, no infinities, no lone
surrogates) and several times faster than ``json``. Two cases go the ``json`` way so that the
answer is what it always was: a body orjson refuses (the refusal then names the offending
word, or ``json`` reads what it always read), and a body with an integer of 19 digits or
more (orjson reads integers beyond 64 bits as floats; ``json`` keeps them exact).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import orjson

from fastapi import Request
from fastapi.routing import APIRoute

__all__ = ["JsonRoute", "loads"]


def _refuse(word: str) -> Any:
    raise json.JSONDecodeError(f"{word} is not a number JSON allows", word, 0)


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise json.JSONDecodeError(f"{text} is too large for a number", text, 0)
    return value


_LONG_INTEGER = re.compile(rb"\d{19}")


def loads(raw: bytes | str) -> Any:
    """Strict JSON: ``json.loads`` without NaN or infinities (see the module docstring)."""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    if not _LONG_INTEGER.search(data):
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    return json.loads(raw, parse_constant=_refuse, parse_float=_finite)


class _StrictRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = loads(await self.body())
        return self._json


class JsonRoute(APIRoute):
    """An APIRoute whose handler reads the body with :func:`loads`."""

    def get_route_handler(self):
        handler = super().get_route_handler()

        async def strict(request: Request):
            return await handler(_StrictRequest(request.scope, request.receive, request._send))

        return strict
