"""Output caps: how much of a flight's output the control plane stores (docs/operations.md).

A flight has an output limit (``gg fly --output-limit``, else the server's default, never
above its maximum). Output facts count against it; past it the runner stops sending output,
records one ``output truncated after N bytes`` note and, with its final report, one output
fact marked ``tail`` with the last bytes it did not send. The store keeps at most
limit + tail bytes of a flight's output: a report that would pass that is refused whole.
"""

from __future__ import annotations

from typing import Any

from gg.error_codes import ErrorCode
from gg.errors import BadRequest, TooLarge

TRUNCATED = "output truncated after {n} bytes"


def size_text(n: int) -> str:
    """``n`` bytes as people write it: 512k, 10MB, 1GB, 2.2k, 1.5GB, or plain bytes (under
    1k); a whole number of a unit is written whole."""
    for unit, size in (("GB", 1024 ** 3), ("MB", 1024 ** 2), ("k", 1024)):
        if n >= size:
            return f"{n // size}{unit}" if n % size == 0 else f"{n / size:.1f}{unit}"
    return f"{n} bytes"


def limit_for(asked: int | None, *, default: int, maximum: int) -> int:
    """The output limit a new flight gets; BadRequest when it asks for more than the maximum."""
    if asked is None:
        return min(default, maximum)
    if asked > maximum:
        raise BadRequest(f"an output limit of {size_text(asked)} is more than this server "
                         f"allows ({size_text(maximum)})")
    return asked


def output_size(fact: dict[str, Any]) -> int:
    """The bytes an output fact stores (its text, UTF-8); 0 for any other kind."""
    if fact.get("kind") != "output":
        return 0
    text = (fact.get("body") or {}).get("text", "")
    return len(text.encode("utf-8")) if isinstance(text, str) else len(str(text).encode("utf-8"))


def is_tail(fact: dict[str, Any]) -> bool:
    return fact.get("kind") == "output" and (fact.get("body") or {}).get("tail") is True


def admit(stored: int, limit: int, tail: int, facts: list[dict[str, Any]]) -> int:
    """The flight's stored output bytes once ``facts`` are stored, or TooLarge (nothing is
    stored): ordinary output may fill ``limit``, a tail may use ``tail`` bytes beyond it."""
    output = sum(output_size(f) for f in facts if not is_tail(f))
    tails = sum(output_size(f) for f in facts if is_tail(f))
    if stored + output > limit or stored + output + tails > limit + tail:
        raise TooLarge(f"this flight's output is capped at {size_text(limit)}: "
                       f"{stored} bytes are stored already", code=ErrorCode.OUTPUT_CAPPED)
    return stored + output + tails
