"""A value sealed at rest (gg.control.sealing seals and opens it; the store keeps it)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Sealed:
    """A value as it is stored: the id of its key, its nonce and the ciphertext (with tag)."""

    key_id: str
    nonce: bytes
    sealed: bytes

    def __repr__(self) -> str:  # nothing of it in a log line
        return f"Sealed(key_id={self.key_id!r})"
