"""Wire schemas for secrets (docs/jobs.md): a value goes in, never out."""

from __future__ import annotations

from typing import Annotated

from pydantic import StringConstraints

from gg.api.schemas import Answer, Request

EnvName = Annotated[str | None, StringConstraints(pattern=r"^[a-z][a-z0-9_-]{0,62}$")]


class SecretSet(Request):
    # its size and shape are the domain's to judge (gg.domain.secrets.value_problem); a
    # refusal never quotes it
    value: Annotated[str, StringConstraints(max_length=256 * 1024)]
    environment: EnvName = None


class Secret(Answer):
    """A secret as anyone may see it: its name and scope, never its value."""
    name: str
    environment: str | None = None  # None: every environment
    set_by: str | None = None
    set_at: float


class SecretSetAnswer(Secret):
    replaced: bool = False
    scope: str  # who receives it, in one sentence


class SecretRemoved(Answer):
    name: str
    environment: str | None = None
    removed: bool = True
