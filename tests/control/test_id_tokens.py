"""Identity tokens' signing keys: made once per database, rotated by an admin, a retired key
published until every token it signed has expired."""

from __future__ import annotations

import jwt
import pytest

from gg.control import id_tokens
from gg.control.core import Core
from gg.control.wiring import wired
from gg.domain.id_tokens import MAX_LIFETIME
from gg.errors import Forbidden
from gg.store import open_store

STORES = ("sqlite", "postgresql")  # the one-current-key rule is the store's


def _kids(core) -> list[str]:
    return [k["kid"] for k in id_tokens.jwks(core)["keys"]]


def test_the_signing_key_is_made_once_per_database_and_every_replica_signs_with_it(
        core, tmp_path, clock, settings, store_url):
    assert _kids(core) == []  # nothing minted yet: the JWKS is only read, never made
    first = id_tokens.current_key(core)
    replica = Core(store=open_store(tmp_path, store_url), settings=settings, clock=clock,
                   wiring=wired())
    assert id_tokens.current_key(replica)["kid"] == first["kid"]
    assert not core.store.add_signing_key("another", "pem", "{}", clock())  # the first stays
    assert _kids(core) == _kids(replica) == [first["kid"]]
    assert not [p for p in tmp_path.rglob("*") if p.suffix in (".pem", ".key")]


def test_a_rotated_key_stays_in_the_jwks_until_its_tokens_expired_then_leaves(core, owner,
                                                                             clock):
    old = id_tokens.current_key(core)
    token = jwt.encode({"sub": "flight:f"}, old["private_pem"], algorithm="RS256",
                       headers={"kid": old["kid"]})
    rotated = id_tokens.rotate(core, owner)
    assert rotated["retired"] == old["kid"] and rotated["kid"] != old["kid"]
    assert id_tokens.current_key(core)["kid"] == rotated["kid"]
    assert set(_kids(core)) == {rotated["kid"], old["kid"]}
    published = {k["kid"]: k for k in id_tokens.jwks(core)["keys"]}
    key = jwt.PyJWK(published[old["kid"]]).key
    assert jwt.decode(token, key, algorithms=["RS256"])["sub"] == "flight:f"
    clock.now += MAX_LIFETIME - 1
    assert old["kid"] in _kids(core)
    clock.now += 1
    assert _kids(core) == [rotated["kid"]]
    assert [e["body"]["retired"] for e in core.store.events(kind="info:signing_key:rotated")] == [
        old["kid"]]


def test_only_an_admin_rotates_the_signing_key(core, ada):
    kid = id_tokens.current_key(core)["kid"]
    with pytest.raises(Forbidden):
        id_tokens.rotate(core, ada)
    assert id_tokens.current_key(core)["kid"] == kid
