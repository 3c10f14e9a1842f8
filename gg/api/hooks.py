"""Wire schemas for hooks: add (the secret shown once), list, show with deliveries, remove."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints

from gg.api.schemas import Answer, Name, Request

HookEvent = Annotated[str, StringConstraints(min_length=1, max_length=64)]


class HookAdd(Request):
    url: Annotated[str, StringConstraints(min_length=1, max_length=2048)]
    on: Annotated[list[HookEvent], Field(min_length=1, max_length=32)]
    environment: Name | None = None


class Hook(Answer):
    id: str
    url: str
    events: list[str]
    environment: str | None = None
    created_by: str | None = None
    created_at: float
    removed_at: float | None = None


class HookWithSecret(Answer):
    hook: Hook
    secret: str  # shown this once: the receiver checks X-GG-Signature with it


class HookAnswer(Answer):
    """One attempt of a delivery: the receiver's status, or why there was none."""
    attempt: int
    at: float
    status: int | None = None
    error: str | None = None


class HookDelivery(Answer):
    id: str
    event: str
    kind: str
    flight_id: str | None = None
    created_at: float
    attempts: int
    next_at: float
    delivered_at: float | None = None
    dropped_at: float | None = None  # the hook was removed before it was delivered
    answers: list[HookAnswer]


class HookDetail(Answer):
    hook: Hook
    deliveries: list[HookDelivery]  # newest first
