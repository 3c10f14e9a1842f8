"""The organisation, its people, and who is calling."""

from __future__ import annotations

import os
import re
from pathlib import Path

from gg.control.core import Core
from gg.domain import tokens
from gg.errors import BadRequest, Conflict, Forbidden, Unauthorized

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")


def bootstrap(core: Core, data_dir: Path, org_name: str = "default") -> Path | None:
    """First start: create the organisation and its owner; write DATA_DIR/owner-token."""
    with core.store.atomic():
        if core.store.organisation() is not None:
            return None
        now = core.now()
        core.store.create_organisation(tokens.new_id("o_"), org_name, now)
        token = tokens.mint(tokens.PERSON)
        core.store.create_person(id=tokens.new_id("p_"), name="owner", role="admin",
                                 token_hash=tokens.digest(token),
                                 token_fingerprint=tokens.fingerprint(token), is_owner=True,
                                 now=now)
        path = Path(data_dir) / "owner-token"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(token + "\n")
        os.chmod(path, 0o600)
        return path


def authenticate_person(core: Core, token: str | None) -> dict:
    if not token or not token.startswith(tokens.PERSON):
        raise Unauthorized()
    wanted = tokens.digest(token)
    person = core.store.person_by_token_hash(wanted)
    if person is None or not tokens.same_digest(person.pop("token_hash"), wanted):
        raise Unauthorized()
    return person


def require_admin(person: dict) -> None:
    if person["role"] != "admin":
        raise Forbidden("only an admin may do that")


def add_person(core: Core, actor: dict, name: str, admin: bool) -> tuple[dict, str]:
    require_admin(actor)
    if not _NAME.match(name or ""):
        raise BadRequest("a person's name is 1-64 letters, digits, '.', '_', '@' or '-'")
    with core.store.atomic():
        if core.store.person_by_name(name):
            raise Conflict(f"a person named {name} exists already")
        token = tokens.mint(tokens.PERSON)
        person = core.store.create_person(
            id=tokens.new_id("p_"), name=name, role="admin" if admin else "member",
            token_hash=tokens.digest(token), token_fingerprint=tokens.fingerprint(token),
            is_owner=False, now=core.now())
        core.event("info:person:added", actor=actor["name"], person=name,
                   role=person["role"])
    core.signals.event_added()
    return person, token


def public_person(person: dict) -> dict:
    return {k: person[k] for k in ("id", "name", "role", "is_owner", "created_at",
                                   "token_fingerprint") if k in person}
