"""Wire schemas for people: add, list, remove, rotate a token.

A token's lifetime crosses the wire as seconds, or the word ``never`` (admins only); left
out, the server's PERSON_TOKEN_TTL applies (the owner's own tokens: never).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from gg.api.schemas import Name, Request

Ttl = Annotated[float, Field(gt=0, le=3650 * 86400)] | Literal["never"] | None


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


class Whoami(BaseModel):
    person: Person
    organisation: str | None
