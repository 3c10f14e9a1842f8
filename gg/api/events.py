"""Answers of the event feed."""

from __future__ import annotations

from typing import Any

from gg.api.schemas import Answer


class Event(Answer):
    seq: int
    kind: str
    at: float
    actor: str | None = None
    runner_id: str | None = None
    runner_name: str | None = None  # the runner's name when the event has one
    flight_id: str | None = None
    body: dict[str, Any] = {}
