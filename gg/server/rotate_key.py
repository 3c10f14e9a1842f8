"""``gg server rotate-key``: a new secrets key, every secret re-sealed under it, while servers
run (docs/jobs.md, "Rotation"; the steps are gg.control.sealing's). It acts on the store
directly, as ``gg server backup`` does: an operator on a machine that holds the key file."""

from __future__ import annotations

from pathlib import Path

from gg.control import secrets as secret_ops
from gg.control.sealing import KEY_FILE, SealingError
from gg.server.vacuum import STORE_FILE
from gg.store import open_store


def key_path(data_dir: Path, key_file: str) -> Path:
    """The key file: the one ``GG_SECRETS_KEY_FILE`` names, else secrets.key in the data dir."""
    return Path(key_file) if key_file else data_dir / KEY_FILE


def rotate(data_dir: Path, database_url: str, key_file: str) -> tuple[Path, str, int]:
    """(the key file, the new key's id, how many secrets were re-sealed). FileNotFoundError
    without an SQLite store (and no database); SealingError (one sentence) when a stored
    value does not open, in which case nothing changed."""
    if not database_url and not (data_dir / STORE_FILE).is_file():
        raise FileNotFoundError(str(data_dir / STORE_FILE))
    path = key_path(data_dir, key_file)
    store = open_store(data_dir, database_url, pool_size=1)
    try:
        key_id, count = secret_ops.rotate_key(store, path)
    finally:
        store.close()
    return path, key_id, count


__all__ = ["SealingError", "key_path", "rotate"]
