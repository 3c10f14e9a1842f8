"""Proof of a key: a machine registers, enrols or joins a pool only with its private key.

A public key is public (it is in every runner's sent log), so naming one proves nothing.
Before registering, enrolling or joining, the machine asks for a nonce
(``POST /v1/key-nonces`` with the purpose and its public key) and signs
``gg-{purpose}:{public_key}:{nonce}`` with its private key; the request then carries the
nonce and the signature. A nonce is bound to its purpose and key, lasts KEY_NONCE_TTL,
and is spent by the first request that names it, whether that request then succeeds or
not. Only its SHA-256 is stored. Every failed proof is refused exactly like a bad token.
"""

from __future__ import annotations

import secrets

from gg import keys
from gg.control.core import Core
from gg.domain import tokens
from gg.errors import BadRequest, TooManyRequests

__all__ = ["issue", "proved"]


def issue(core: Core, purpose: str, public_key: str) -> dict:
    """A fresh single-use nonce for proving ``public_key`` for ``purpose``."""
    if purpose not in keys.PROOF_PURPOSES:
        raise BadRequest(f"purpose must be one of {', '.join(keys.PROOF_PURPOSES)}")
    if not keys.valid_public_key(public_key):
        raise BadRequest("public_key is not a base64 Ed25519 public key")
    nonce = secrets.token_urlsafe(32)
    now = core.now()
    ttl = core.settings.key_nonce_ttl
    with core.store.atomic():
        if core.store.count_key_nonces(now) >= core.settings.max_key_nonces:
            raise TooManyRequests("too many key proofs are under way; try again in a minute")
        core.store.add_key_nonce(tokens.digest(nonce), purpose, public_key, now + ttl)
    return {"nonce": nonce, "expires_in": ttl, "expires_at": now + ttl}


def proved(core: Core, purpose: str, *, public_key: str, nonce: str | None,
           signature: str | None) -> bool:
    """Spend ``nonce`` (committed at once, so a refusal later cannot give it back) and
    tell whether ``signature`` is the key's over this purpose, key and nonce. Called
    outside the caller's transaction, before it."""
    if not nonce or not signature:
        return False
    with core.store.atomic():
        taken = core.store.take_key_nonce(tokens.digest(nonce), purpose, public_key, core.now())
    return taken and keys.verify(public_key, keys.proof_message(purpose, public_key, nonce),
                                 signature)
