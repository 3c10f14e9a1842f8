"""Ed25519 runner identity: one keypair per runner, made on first start, mode 0600."""

from __future__ import annotations

import base64
import os
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)


def load_or_create(path: Path) -> Ed25519PrivateKey:
    if path.exists():
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
        if not isinstance(key, Ed25519PrivateKey):
            raise ValueError(f"{path} does not hold an Ed25519 key")
        return key
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(pem)
    return key


def public_text(key: Ed25519PrivateKey) -> str:
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return base64.b64encode(raw).decode()


def sign(key: Ed25519PrivateKey, message: bytes) -> str:
    return base64.b64encode(key.sign(message)).decode()


# What a key is proved for: a registration (by a person), an enrolment (with a ``gge_``
# token) or a pool member joining (with a ``ggm_`` code).
PROOF_PURPOSES = ("register", "enrol", "join")


def proof_message(purpose: str, public_key: str, nonce: str) -> bytes:
    """What the private key signs to prove itself: the purpose, the key and the server's
    single-use nonce, so a signature is good for one exchange of one kind for one key."""
    return f"gg-{purpose}:{public_key}:{nonce}".encode()


def prove(key: Ed25519PrivateKey, purpose: str, nonce: str) -> dict:
    """The ``public_key``, ``nonce`` and ``signature`` fields a proving request carries."""
    public = public_text(key)
    return {"public_key": public, "nonce": nonce,
            "signature": sign(key, proof_message(purpose, public, nonce))}


def valid_public_key(text: str) -> bool:
    try:
        raw = base64.b64decode(text, validate=True)
        Ed25519PublicKey.from_public_bytes(raw)
        return True
    except (ValueError, TypeError):
        return False


def verify(public_key: str, message: bytes, signature: str) -> bool:
    try:
        pub = Ed25519PublicKey.from_public_bytes(base64.b64decode(public_key, validate=True))
        pub.verify(base64.b64decode(signature, validate=True), message)
        return True
    except (InvalidSignature, ValueError, TypeError):
        return False


def generate() -> Ed25519PrivateKey:
    """A fresh keypair kept by its caller (the control plane keeps its own in its store)."""
    return Ed25519PrivateKey.generate()


def private_pem(key: Ed25519PrivateKey) -> str:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def from_pem(text: str) -> Ed25519PrivateKey:
    key = serialization.load_pem_private_key(text.encode(), password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError("not an Ed25519 key")
    return key
