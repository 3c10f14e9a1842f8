"""Sealing values at rest: AES-GCM under one key file the control plane's replicas share.

A value is sealed with a random 96-bit nonce and *associated data* that says what it is
(a secret's name and scope): a sealed value copied onto another row does not open there.
Each sealed value records the id of its key (the first 16 hex digits of the key's SHA-256),
so the key that opens it is found by id, never guessed.

The key file holds 32 random bytes, base64, on one line. It is ``secrets.key`` in the
server's data dir, made 0600 on first use, or the file ``GG_SECRETS_KEY_FILE`` names (on
PostgreSQL every replica is pointed at the same file). Nothing here caches a key: each seal
and open reads the file (a few dozen bytes), so a rotation is seen by every replica at once.

Rotation (:func:`rotate`), which may run while servers serve::

    secrets.key (K1)                      every value sealed under K1
      1. write secrets.key.new (K2)       readers find K1 in .key, K2 in .new
      2. one transaction re-seals every value under K2
      3. K1 copied to secrets.key.old, then secrets.key.new moved over secrets.key

At every moment each stored value's key is in one of the three files, so a replica that
opens a value during a rotation finds it by id. A rotation that stopped after 2 is finished
by the next one before it begins. The old key is kept as ``secrets.key.old`` (one
generation): a backup of the store taken before the rotation still opens with it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import secrets
from pathlib import Path
from typing import Callable

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from gg.domain.sealed import Sealed

KEY_FILE = "secrets.key"  # in the server's data dir, unless GG_SECRETS_KEY_FILE names one
NEW = ".new"  # a rotation's key, until its transaction committed
OLD = ".old"  # the key before the last rotation
KEY_BYTES = 32  # AES-256
NONCE_BYTES = 12  # 96 bits, random per value


class SealingError(Exception):
    """A key file that cannot be read or made, or a value no key here opens: one sentence."""


def key_id(key: bytes) -> str:
    return hashlib.sha256(key).hexdigest()[:16]


def _read(path: Path) -> bytes | None:
    """The key in ``path``, None when there is no such file."""
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SealingError(f"cannot read the secrets key file {path}: "
                           f"{exc.strerror or exc}") from None
    try:
        key = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        key = b""
    if len(key) != KEY_BYTES:
        raise SealingError(f"the secrets key file {path} does not hold a key (32 bytes, "
                           "base64, on one line)")
    return key


def _write(path: Path, key: bytes) -> None:
    """``key`` in a new file ``path``, 0600 from its creation; FileExistsError if it exists."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(base64.b64encode(key).decode() + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def current_key(path: Path) -> bytes:
    """The key values are sealed under now; made (0600) when there is none yet. Two replicas
    making it at once agree: the second finds the first's file and reads it."""
    key = _read(path)
    if key is not None:
        return key
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        _write(path, secrets.token_bytes(KEY_BYTES))
    except FileExistsError:
        pass
    except OSError as exc:
        raise SealingError(f"cannot make the secrets key file {path}: "
                           f"{exc.strerror or exc}") from None
    key = _read(path)
    assert key is not None
    return key


def _keys(path: Path) -> dict[str, bytes]:
    """Every key this replica can find, by id: the current one, a rotation's, the old one."""
    found: dict[str, bytes] = {}
    for candidate in (path, Path(str(path) + NEW), Path(str(path) + OLD)):
        key = _read(candidate)
        if key is not None:
            found.setdefault(key_id(key), key)
    return found


def seal(path: Path, value: bytes, context: bytes, key: bytes | None = None) -> Sealed:
    """``value`` sealed under the current key (or ``key``), bound to ``context``."""
    key = current_key(path) if key is None else key
    nonce = secrets.token_bytes(NONCE_BYTES)
    return Sealed(key_id(key), nonce, AESGCM(key).encrypt(nonce, value, context))


def open_sealed(path: Path, sealed: Sealed, context: bytes, what: str = "a value") -> bytes:
    """The value ``sealed`` holds; SealingError (one sentence naming ``what``) when no key
    found here is the one it was sealed under, or it does not open (changed, or moved)."""
    key = _keys(path).get(sealed.key_id)
    if key is None:
        raise SealingError(f"the secrets key file {path} does not open {what} (it was sealed "
                           f"under key {sealed.key_id}): point GG_SECRETS_KEY_FILE at the key "
                           "file every replica shares")
    try:
        return AESGCM(key).decrypt(sealed.nonce, sealed.sealed, context)
    except InvalidTag:
        raise SealingError(f"{what} does not open under its key {sealed.key_id}: the stored "
                           "value was changed") from None


def opens(path: Path, key_ids: set[str]) -> set[str]:
    """Those of ``key_ids`` no key file here holds (empty: every value opens)."""
    return set(key_ids) - set(_keys(path))


def rotate(path: Path, reseal_all: Callable[[bytes], int],
           used: Callable[[], set[str]]) -> tuple[str, int]:
    """A new key: ``reseal_all(new_key)`` re-seals every stored value under it in one
    transaction (its count returned); then the files move (module docstring). ``used()``:
    the key ids stored values are sealed under now (to finish a rotation that stopped).
    The new key's id and how many values were re-sealed."""
    new_path, old_path = Path(str(path) + NEW), Path(str(path) + OLD)
    left = _read(new_path)
    if left is not None:  # a rotation stopped: promote its key if values use it, else drop it
        if key_id(left) in used():
            _promote(path, new_path, old_path)
        else:
            new_path.unlink()
    current_key(path)  # there is a current key to keep as the old one
    key = secrets.token_bytes(KEY_BYTES)
    try:
        _write(new_path, key)
    except OSError as exc:
        raise SealingError(f"cannot write {new_path}: {exc.strerror or exc}") from None
    try:
        count = reseal_all(key)
    except BaseException:
        new_path.unlink(missing_ok=True)  # nothing was sealed under it
        raise
    _promote(path, new_path, old_path)
    return key_id(key), count


def _promote(path: Path, new_path: Path, old_path: Path) -> None:
    """The current key copied to ``old_path``, then ``new_path`` moved over ``path``: the
    key file is never missing, so no replica makes a key of its own meanwhile."""
    current = _read(path)
    if current is not None:
        spare = Path(str(old_path) + ".tmp")
        spare.unlink(missing_ok=True)
        _write(spare, current)
        os.replace(spare, old_path)
    os.replace(new_path, path)
    _sync_dir(path.parent)


def _sync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


__all__ = ["KEY_FILE", "Sealed", "SealingError", "current_key", "key_id", "open_sealed",
           "opens", "rotate", "seal"]
