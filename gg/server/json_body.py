"""Request bodies are read as strict JSON: ``NaN``, ``Infinity`` and ``-Infinity`` are refused.

Python's ``json`` reads those three words (not JSON: RFC 8259 has no such numbers), and reads a
number too large for a float (``1e999``) as infinity. A value like that would be stored, then
break every answer that carries it (a JSON encoder refuses it, a comparison with it is always
false), so it is answered 400 at the door in the one error shape, before any use case runs.
Every router uses :class:`JsonRoute`, so every request body is read here, whatever model (or
free-form field: readings, fact bodies, inventory) it is for.

Bodies are read with ``json``, not orjson: the orjson this was tried with crashed the process
(a segmentation fault) on a body of 200,000 nested brackets, where ``json`` raises an error
the server answers 400.
"""

from __future__ import annotations

import json
import math
from typing import Any

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


def loads(raw: bytes | str) -> Any:
    """``json.loads`` without NaN or infinities (see the module docstring)."""
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
