"""Answers about gates."""

from __future__ import annotations

from typing import Any

from gg.api.schemas import Answer


class Gate(Answer):
    id: str
    kind: str
    subject: str
    guards: str
    why: str
    clearer: str
    status: str
    opened_at: float
    opened_by: str | None = None
    cleared_at: float | None = None
    cleared_by: str | None = None
    runner_id: str | None = None
    flight_id: str | None = None
    payload: dict[str, Any] = {}
    who_may_clear: str
    flights_held: list[str] = []
