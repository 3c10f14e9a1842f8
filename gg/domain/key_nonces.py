"""Key-proof nonces that cost the control plane nothing until one is spent.

A nonce carries its own expiry and a MAC by the control plane's secret over its purpose, the
public key it is for, that expiry and 16 random bytes. Issuing one reads no table and writes
none, so no number of anonymous asks can fill anything a legitimate machine needs; only
spending one writes (its hash, kept until it expires, so it works once).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

__all__ = ["make", "expiry"]


def _mac(secret: bytes, purpose: str, public_key: str, expires_ms: str, salt: str) -> str:
    text = f"gg-key-nonce:{purpose}:{public_key}:{expires_ms}:{salt}".encode()
    digest = hmac.new(secret, text, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def make(secret: bytes, purpose: str, public_key: str, expires_at: float) -> str:
    """A fresh nonce for ``purpose`` and ``public_key``, good until ``expires_at``."""
    expires_ms, salt = f"{int(expires_at * 1000):x}", secrets.token_urlsafe(16)
    return f"{expires_ms}.{salt}.{_mac(secret, purpose, public_key, expires_ms, salt)}"


def expiry(secret: bytes, nonce: str, purpose: str, public_key: str, now: float) -> float | None:
    """When ``nonce`` expires, if this control plane made it for this purpose and key and it
    has not expired yet; None otherwise (whether it was spent is the store's to say)."""
    parts = nonce.split(".")
    if len(parts) != 3:
        return None
    expires_ms, salt, mac = parts
    try:
        expires_at = int(expires_ms, 16) / 1000
    except ValueError:
        return None
    if not hmac.compare_digest(mac, _mac(secret, purpose, public_key, expires_ms, salt)):
        return None
    return expires_at if expires_at > now else None
