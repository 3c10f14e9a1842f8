"""Wire schemas for people: add, list, remove, rotate a token.

A token's lifetime crosses the wire as seconds, or the word ``never`` (admins only); left
out, the server's PERSON_TOKEN_TTL applies (the owner's own tokens: never).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, PlainValidator, WithJsonSchema
from pydantic_core import PydanticCustomError

from gg.api.schemas import Name, Request

MAX_TTL = 3650 * 86400


def _ttl(value: Any) -> float | str | None:
    if value is None or value == "never":
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value <= MAX_TTL:
        return float(value)
    raise PydanticCustomError("invalid_ttl", "must be seconds above 0 and at most 3650 days, "
                              "or \"never\"")


Ttl = Annotated[Any, PlainValidator(_ttl), WithJsonSchema({"anyOf": [
    {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_TTL},
    {"type": "string", "enum": ["never"]}, {"type": "null"}]})]


class PersonAdd(Request):
    name: Name
    admin: bool = False
    ttl: Ttl = None


class TokenRotate(Request):
    ttl: Ttl = None


class Person(BaseModel):
    id: str
    name: str
    role: Literal["admin", "member"]
    is_owner: bool
    created_at: float
    token_fingerprint: str
    token_expires_at: float | None = None  # None: never
    removed_at: float | None = None
    removed_by: str | None = None


class PersonWithToken(BaseModel):
    person: Person
    token: str  # shown this once


class ServerFacts(BaseModel):
    """What the control plane keeps: its retention windows (seconds; 0: for ever) and the
    store's size on disk."""

    retain_flights: float
    retain_events: float
    database_bytes: int


class Whoami(BaseModel):
    person: Person
    organisation: str | None
    server: ServerFacts | None = None
