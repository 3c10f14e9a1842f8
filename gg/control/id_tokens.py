"""Identity tokens: the signing keys, the JWKS, and minting one for a flight (docs/jobs.md).

The keys follow the control key's precedent (gg.control.control_key): made on first use and
kept in the database, the first replica to store one wins, every replica signs with it. The
claims and the keys' life are gg.domain.id_tokens's rules; signing is PyJWT's.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from gg.control.core import Core
from gg.control.people import require_admin
from gg.domain import approvals, id_tokens, leases
from gg.domain.events import EventKind
from gg.domain.people import Person
from gg.domain.runners import RunnerIdentity
from gg.errors import BadRequest

RSA_BITS = 2048


def _made() -> tuple[str, str, str]:
    """A new key: (kid, private PEM, public JWK as JSON). The kid is the key's RFC 7638
    thumbprint, so the same key always has the same id."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=RSA_BITS)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    jwk = jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key(), as_dict=True)
    canonical = json.dumps({"e": jwk["e"], "kty": "RSA", "n": jwk["n"]}, separators=(",", ":"),
                           sort_keys=True)
    kid = base64.urlsafe_b64encode(hashlib.sha256(canonical.encode()).digest()).decode()
    kid = kid.rstrip("=")
    public = {"kty": "RSA", "kid": kid, "use": "sig", "alg": id_tokens.ALGORITHM,
              "n": jwk["n"], "e": jwk["e"]}
    return kid, pem, json.dumps(public, sort_keys=True)


def current_key(core: Core) -> dict:
    """The key that signs now, made once per database when there is none."""
    stored = core.store.current_signing_key()
    if stored is None:
        kid, pem, public = _made()
        with core.store.atomic():
            core.store.add_signing_key(kid, pem, public, core.now())
        stored = core.store.current_signing_key()
        assert stored is not None, "stored just now (or by another replica first)"
    return stored


def jwks(core: Core) -> dict:
    """The JWKS: the current key, and every retired key a token in use may still need.
    A read only (empty until the first token is minted: no token needs a key before)."""
    now = core.now()
    rows = core.store.published_signing_keys(now - id_tokens.MAX_LIFETIME)
    return {"keys": [json.loads(r["public_jwk"]) for r in rows
                     if id_tokens.in_jwks(r["retired_at"], now)]}


def discovery(core: Core, base_url: str, jwks_path: str) -> dict:
    return id_tokens.discovery(issuer(core, base_url), jwks_path)


def issuer(core: Core, base_url: str) -> str:
    return id_tokens.issuer_of(core.settings.issuer, base_url)


def mint(core: Core, runner: RunnerIdentity, flight_id: str, *, epoch: int, audience: str,
         base_url: str) -> dict:
    """A signed token for the flight ``runner`` holds at ``epoch`` now (else the lease's
    refusal: 404, or 409 ``lease_superseded`` for a stale epoch); one event, never the token."""
    problem = id_tokens.audience_problem(audience)
    if problem:
        raise BadRequest(problem)
    key = current_key(core)
    now = core.now()
    jti = secrets.token_urlsafe(16)
    with core.store.atomic():
        flight, held = core.store.flight_held(flight_id, runner.id)
        flight = leases.check_holder(flight, runner.id, epoch, now, held)
        claims = id_tokens.claims(_subject(core, flight, runner), issuer=issuer(core, base_url),
                                  audience=audience, now=now, jti=jti)
        core.event(EventKind.FLIGHT_ID_TOKEN, actor=f"runner:{runner.name}", runner_id=runner.id,
                   flight_id=flight_id, at=now, epoch=epoch, audience=audience, jti=jti,
                   kid=key["kid"], expires_at=claims["exp"])
    token = jwt.encode(claims, key["private_pem"], algorithm=id_tokens.ALGORITHM,
                       headers={"kid": key["kid"]})
    return {"token": token, "expires_at": claims["exp"], "jti": jti}


def _subject(core: Core, flight, runner: RunnerIdentity) -> id_tokens.Subject:
    opener = core.store.person(flight.opened_by)
    row = core.store.runner(runner.id)
    cleared = [g for g in core.store.flight_gates(flight.id, kind=approvals.KIND, status=None)
               if g.status == "cleared"]
    return id_tokens.Subject(
        flight_id=flight.id, attempt=flight.attempt, epoch=flight.epoch,
        environment=flight.environment, opener=opener.name if opener else flight.opened_by,
        approver=cleared[0].cleared_by if cleared else None, runner=runner.name,
        group=row.group if row is not None else "default",
        lease_expires_at=flight.lease_expires_at)


def rotate(core: Core, person: Person) -> dict:
    """A new key signs from now on; the one it replaces stays in the JWKS until every token
    it signed has expired (gg.domain.id_tokens.in_jwks). Admins only."""
    require_admin(person)
    old = current_key(core)
    kid, pem, public = _made()
    now = core.now()
    with core.store.atomic():
        core.store.retire_signing_key(old["kid"], now)
        core.store.add_signing_key(kid, pem, public, now)
        core.event(EventKind.SIGNING_KEY_ROTATED, actor=person.name, at=now,
                   kid=kid, retired=old["kid"])
    return {"kid": kid, "retired": old["kid"],
            "retired_leaves_jwks_at": now + id_tokens.MAX_LIFETIME}
