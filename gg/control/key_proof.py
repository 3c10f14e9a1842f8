"""Proof of a key: a machine registers, enrols or joins a pool only with its private key.

A public key is public (it is in every runner's sent log), so naming one proves nothing.
Before registering, enrolling or joining, the machine asks for a nonce
(``POST /v1/key-nonces`` with the purpose and its public key) and signs
``gg-{purpose}:{public_key}:{nonce}`` with its private key; the request then carries the
nonce and the signature. A nonce is bound to its purpose and key, lasts KEY_NONCE_TTL,
and is spent by the first request that names it, whether that request then succeeds or
not. Every failed proof is refused exactly like a bad token.

Issuing a nonce stores nothing (:mod:`gg.domain.key_nonces`: it carries its expiry and the
control plane's MAC), so a flood of anonymous asks fills no table a legitimate machine needs;
the server also limits how often one address may ask (gg.server.source_rate). Spending one
stores its SHA-256 until it expires, so it works once.
"""

from __future__ import annotations

import hashlib

from gg import keys
from gg.control.control_key import signing_key
from gg.control.core import Core
from gg.domain import key_nonces, tokens
from gg.errors import BadRequest

__all__ = ["issue", "proved"]


def issue(core: Core, purpose: str, public_key: str) -> dict:
    """A fresh single-use nonce for proving ``public_key`` for ``purpose`` (nothing stored)."""
    if purpose not in keys.PROOF_PURPOSES:
        raise BadRequest(f"purpose must be one of {', '.join(keys.PROOF_PURPOSES)}")
    if not keys.valid_public_key(public_key):
        raise BadRequest("public_key is not a base64 Ed25519 public key")
    now, ttl = core.now(), core.settings.key_nonce_ttl
    nonce = key_nonces.make(_secret(core), purpose, public_key, now + ttl)
    return {"nonce": nonce, "expires_in": ttl, "expires_at": now + ttl}


def proved(core: Core, purpose: str, *, public_key: str, nonce: str | None,
           signature: str | None) -> bool:
    """Spend ``nonce`` (committed at once, so a refusal later cannot give it back) and
    tell whether ``signature`` is the key's over this purpose, key and nonce. Called
    outside the caller's transaction, before it."""
    if not nonce or not signature:
        return False
    now = core.now()
    expires_at = key_nonces.expiry(_secret(core), nonce, purpose, public_key, now)
    if expires_at is None:
        return False
    with core.store.atomic():
        spent = core.store.spend_key_nonce(tokens.digest(nonce), purpose, public_key,
                                           expires_at, now)
    return spent and keys.verify(public_key, keys.proof_message(purpose, public_key, nonce),
                                 signature)


def _secret(core: Core) -> bytes:
    """The MAC key of nonces: derived from the control plane's own key, which every replica
    sharing the store holds, so a nonce one replica issued is spent at another."""
    secret = core.key_nonce_secret
    if secret is None:
        pem = keys.private_pem(signing_key(core)).encode()
        secret = core.key_nonce_secret = hashlib.sha256(b"gg-key-nonce\0" + pem).digest()
    return secret
