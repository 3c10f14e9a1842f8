"""The control plane's own Ed25519 key: it signs pull-mode requests (gg.control.pull) and
keys the MAC of key nonces (gg.control.key_proof). A module of its own so that both reach it
without one importing the other's use cases."""

from __future__ import annotations

from gg import keys
from gg.control.core import Core


def signing_key(core: Core) -> keys.Ed25519PrivateKey:
    """The control plane's own Ed25519 key, made once per database and kept in it: every
    server sharing the store signs with the same key (the first to store one wins)."""
    stored = core.store.control_key()
    if stored is None:
        key = keys.generate()
        with core.store.atomic():
            core.store.add_control_key(keys.private_pem(key), keys.public_text(key), core.now())
        stored = core.store.control_key()
        assert stored is not None, "stored just now (or by another replica first)"
    return keys.from_pem(stored["private_pem"])
