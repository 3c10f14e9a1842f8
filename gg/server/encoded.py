"""Answers encoded as their route's response model encodes them (FastAPI's fast path).

pydantic's core holds the interpreter's lock through each call it is given: a long list
encoded in one call holds every other thread, the event loop among them, until it is done,
wherever it runs. So a long answer is encoded a row at a time (:func:`rows`,
:func:`page`), on a worker thread (``gg.server.off_loop``), and the bytes are those the
whole answer's model would make.
"""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter
from starlette.responses import Response


def answer(adapter: TypeAdapter, value: Any, status: int = 200) -> Response:
    """``value`` validated and encoded by ``adapter`` in one call: a short answer."""
    return Response(adapter.dump_json(adapter.validate_python(value), by_alias=True),
                    status_code=status, media_type="application/json")


def rows(row: TypeAdapter, values: list) -> bytes:
    """``values`` as the JSON array ``TypeAdapter(list[Row])`` would make, validated and
    encoded one at a time: between two rows the interpreter's lock can change hands."""
    return b"[" + b",".join(row.dump_json(row.validate_python(v), by_alias=True)
                            for v in values) + b"]"


def page(adapter: TypeAdapter, row: TypeAdapter, value: dict, key: str) -> bytes:
    """``value``, a page whose list ``key`` is its model's last field, as ``adapter`` encodes
    it: the rest in one call, the list a row at a time. Whole, as before, should ``key``
    ever not come last."""
    head = adapter.dump_json(adapter.validate_python({**value, key: []}), by_alias=True)
    empty = f'"{key}":[]}}'.encode()
    if not head.endswith(empty):
        return adapter.dump_json(adapter.validate_python(value), by_alias=True)
    return head[:-len(b"[]}")] + rows(row, value[key]) + b"}"
