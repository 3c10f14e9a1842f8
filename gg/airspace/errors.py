"""The one error an airspace file can produce: where it is, which key, and what is wrong.

``AirspaceError`` is a ``gg.errors.BadRequest`` (code ``invalid_airspace``) so that a profile or
strategy posted to the server becomes a 400 with the same sentence an operator sees from
``gg fleet check`` on their own machine, never a 5xx.

    str(e) == 'airspace/fleet/ui.yaml:7: policy.isolation: must be one of none, sandbox, '
              'container (got "sandbx")'

``problem`` is the bare sentence; ``message`` (what the server's error body carries) and
``str(e)`` are the full located line.
"""

from __future__ import annotations

from typing import Any

from gg.error_codes import ErrorCode
from gg.errors import BadRequest

__all__ = ["AirspaceError", "describe"]


class AirspaceError(BadRequest):
    code = ErrorCode.INVALID_AIRSPACE

    def __init__(self, problem: str, *, file: str | None = None, line: int | None = None,
                 key: str | None = None) -> None:
        self.problem = problem
        self.file = file
        self.line = line
        self.key = key or None
        super().__init__(self._render(), code=self.code)

    def _render(self) -> str:
        where = self.file or ""
        if self.line is not None:
            where = f"{where}:{self.line}" if where else f"line {self.line}"
        parts = [p for p in (where, self.key) if p]
        return ": ".join(parts + [self.problem])

    def __str__(self) -> str:
        return self._render()

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "key": self.key, "message": self.problem}


def describe(value: Any, limit: int = 60) -> str:
    """How a value a file gave is shown back in ``(got ...)``: text quoted, the rest named."""
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        shown = value if len(value) <= limit else value[: limit - 1] + "…"
        return '"' + shown.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bytes):
        return "binary data"
    return f"a {type(value).__name__} {value}"
