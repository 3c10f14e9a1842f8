"""The runner's credential store: secrets that never leave the machine they were added on.

Layout inside the runner's state directory::

    credential.key            32 random bytes (base64), mode 0600, made on first use
    credentials/              mode 0700
      repo-<hash>.json        one entry per repository slug, mode 0600
      name-<hash>.json        one entry per named credential, mode 0600

Each entry holds its kind, its ref (slug or name), its fingerprint, when it was added and the
secret sealed with AES-256-GCM under that key. The ref is bound to the ciphertext as associated
data, so an entry file copied over another one fails to open instead of handing the widgets
credential to some other repository. The file name is a hash of kind and ref, so no slug or
name can steer a write outside ``credentials/``.

What leaves this module: a ``CredentialRef`` (kind, ref, fingerprint, added_at) is all the
control plane may ever learn. The secret itself only comes out of a ``Secret`` by an explicit
``reveal()`` (or ``git_username_password()``); its repr, str and every error message here show
the fingerprint at most.

A secret is either ``username:password`` or a bare token. Git is given a bare token as the
password with the username ``x-access-token`` (what GitHub expects of app and personal tokens,
and what GitHub, Gitea and GitLab accept for a personal token); write ``user:token`` to choose
another username (``oauth2:TOKEN`` for a GitLab OAuth token, for example).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import secrets as _random
import stat
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Literal

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from gg.domain.repos import repo_slug
from gg.domain.tokens import fingerprint as token_fingerprint

__all__ = [
    "BARE_TOKEN_USERNAME",
    "CredentialError",
    "CredentialKind",
    "CredentialRef",
    "CredentialStore",
    "Secret",
    "secret_fingerprint",
]

CredentialKind = Literal["repo", "name"]
BARE_TOKEN_USERNAME = "x-access-token"
KEY_FILE = "credential.key"
CREDENTIALS_DIR = "credentials"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_FORMAT_VERSION = 1


class CredentialError(Exception):
    """A plain sentence about a credential; never contains the secret."""


def secret_fingerprint(value: str) -> str:
    """``sha256:`` + the first 16 hex digits of the SHA-256 of ``value``: the same public
    name SPEC section 4 gives every token gg issues."""
    return token_fingerprint(value)


class Secret:
    """A secret that does not print itself: repr and str show only its fingerprint."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    @property
    def fingerprint(self) -> str:
        return secret_fingerprint(self._value)

    def reveal(self) -> str:
        """The secret itself: call only where it is handed to the one thing that needs it."""
        return self._value

    def git_username_password(self) -> tuple[str, str]:
        """What git is told: ``user:password`` split at the first colon, else a bare token."""
        user, sep, password = self._value.partition(":")
        if sep:
            return user, password
        return BARE_TOKEN_USERNAME, self._value

    def __repr__(self) -> str:
        return f"Secret({self.fingerprint})"

    __str__ = __repr__

    def __reduce__(self):  # pragma: no cover - guard, not a feature
        raise TypeError("a Secret cannot be pickled")


@dataclass(frozen=True)
class CredentialRef:
    """What a credential is called and how to recognise it; never the secret."""

    kind: CredentialKind
    ref: str
    fingerprint: str
    added_at: datetime

    def as_dict(self) -> dict[str, str]:
        return {
            "kind": self.kind,
            "ref": self.ref,
            "fingerprint": self.fingerprint,
            "added_at": self.added_at.isoformat().replace("+00:00", "Z"),
        }


class CredentialStore:
    """Secrets for this runner, encrypted at rest under ``state_dir``.

    Every write replaces a whole file atomically, so a runner reading while
    ``gg credential add`` writes sees the old entry or the new one, never half of either.
    """

    def __init__(self, state_dir: Path, *, clock: Callable[[], datetime] | None = None) -> None:
        self.state_dir = Path(state_dir)
        self._dir = self.state_dir / CREDENTIALS_DIR
        self._key_path = self.state_dir / KEY_FILE
        self._clock = clock or (lambda: datetime.now(timezone.utc))

    def __repr__(self) -> str:
        return f"CredentialStore({str(self.state_dir)!r})"

    # -- public API -------------------------------------------------------------------------

    def add(self, *, repo: str | None = None, name: str | None = None,
            secret: str) -> CredentialRef:
        """Store ``secret`` for a repository (URL or slug) or under a name; replaces any
        earlier secret for the same ref. One trailing line break is dropped (secrets are
        often read from a file)."""
        kind, ref = self._target(repo, name)
        value = _clean_secret(secret)
        fingerprint = secret_fingerprint(value)
        added_at = self._clock().astimezone(timezone.utc).replace(microsecond=0)
        key = self._key(create=True)
        nonce = _random.token_bytes(12)
        sealed = nonce + AESGCM(key).encrypt(nonce, value.encode("utf-8"), _aad(kind, ref))
        entry = {
            "version": _FORMAT_VERSION,
            "kind": kind,
            "ref": ref,
            "fingerprint": fingerprint,
            "added_at": added_at.isoformat().replace("+00:00", "Z"),
            "sealed": base64.b64encode(sealed).decode("ascii"),
        }
        self._ensure_dir()
        _write_private(self._entry_path(kind, ref), json.dumps(entry, indent=2).encode() + b"\n")
        return CredentialRef(kind, ref, fingerprint, added_at)

    def get_for_repo(self, slug: str) -> Secret | None:
        """The secret for a repository (slug or URL), or None when none is stored."""
        return self._open("repo", _repo_ref(slug))

    def get(self, name: str) -> Secret | None:
        """The secret stored under ``name``, or None."""
        return self._open("name", _name_ref(name))

    def remove(self, *, repo: str | None = None, name: str | None = None) -> bool:
        """Forget one credential; False when there was none."""
        kind, ref = self._target(repo, name)
        try:
            self._entry_path(kind, ref).unlink()
        except FileNotFoundError:
            return False
        return True

    def refs(self) -> list[CredentialRef]:
        """Every stored credential's public face, sorted by kind then ref."""
        if not self._dir.is_dir():
            return []
        found = [self._read_ref(path) for path in self._dir.glob("*.json")]
        return sorted(found, key=lambda r: (r.kind, r.ref))

    # -- internals --------------------------------------------------------------------------

    def _target(self, repo: str | None, name: str | None) -> tuple[CredentialKind, str]:
        if (repo is None) == (name is None):
            raise CredentialError("give exactly one of --repo SLUG or --name NAME")
        if repo is not None:
            return "repo", _repo_ref(repo)
        return "name", _name_ref(name or "")

    def _entry_path(self, kind: CredentialKind, ref: str) -> Path:
        digest = hashlib.sha256(f"{kind}\0{ref}".encode()).hexdigest()[:32]
        return self._dir / f"{kind}-{digest}.json"

    def _open(self, kind: CredentialKind, ref: str) -> Secret | None:
        path = self._entry_path(kind, ref)
        if not path.is_file():
            return None
        entry = self._load(path)
        if entry.get("kind") != kind or entry.get("ref") != ref:
            raise CredentialError(f"credential file {path} does not belong to {kind} {ref}")
        try:
            sealed = base64.b64decode(entry["sealed"], validate=True)
            plain = AESGCM(self._key(create=False)).decrypt(sealed[:12], sealed[12:],
                                                            _aad(kind, ref))
        except (InvalidTag, ValueError, KeyError, TypeError):
            raise CredentialError(
                f"the credential for {kind} {ref} cannot be opened with this machine's key "
                f"({self._key_path}); add it again with gg credential add") from None
        return Secret(plain.decode("utf-8"))

    def _read_ref(self, path: Path) -> CredentialRef:
        entry = self._load(path)
        try:
            added_at = datetime.fromisoformat(str(entry["added_at"]).replace("Z", "+00:00"))
            kind = entry["kind"]
            if kind not in ("repo", "name"):
                raise ValueError(kind)
            return CredentialRef(kind, str(entry["ref"]), str(entry["fingerprint"]), added_at)
        except (KeyError, ValueError):
            raise CredentialError(f"credential file {path} is damaged; remove it") from None

    def _load(self, path: Path) -> dict:
        try:
            entry = json.loads(path.read_bytes())
        except (OSError, ValueError):
            raise CredentialError(f"credential file {path} cannot be read") from None
        if not isinstance(entry, dict) or entry.get("version") != _FORMAT_VERSION:
            raise CredentialError(f"credential file {path} is not in a format this gg knows")
        return entry

    def _ensure_dir(self) -> None:
        if not self.state_dir.exists():
            self.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            self._dir.mkdir(mode=0o700)
        except FileExistsError:
            pass
        os.chmod(self._dir, 0o700)

    def _key(self, *, create: bool) -> bytes:
        try:
            return self._read_key()
        except FileNotFoundError:
            if not create:
                raise CredentialError(
                    f"this machine's credential key {self._key_path} is missing; "
                    "credentials added before it was lost must be added again") from None
        if not self.state_dir.exists():
            self.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        fresh = base64.b64encode(AESGCM.generate_key(bit_length=256)) + b"\n"
        tmp = self._key_path.with_name(f".{KEY_FILE}.{os.getpid()}.{_random.token_hex(4)}")
        _write_private(tmp, fresh, replace=False)
        try:
            os.link(tmp, self._key_path)  # atomic, and loses to a key another process made
        except FileExistsError:
            pass
        finally:
            tmp.unlink(missing_ok=True)
        return self._read_key()

    def _read_key(self) -> bytes:
        mode = stat.S_IMODE(os.stat(self._key_path).st_mode)
        if mode & 0o077:
            raise CredentialError(
                f"the credential key {self._key_path} is readable by others (mode {mode:o}); "
                f"run chmod 600 {self._key_path}, and replace the secrets if others could read it")
        try:
            key = base64.b64decode(self._key_path.read_bytes().strip(), validate=True)
        except ValueError:
            key = b""
        if len(key) != 32:
            raise CredentialError(f"the credential key {self._key_path} is damaged")
        return key


def _aad(kind: str, ref: str) -> bytes:
    return f"gg-credential:v{_FORMAT_VERSION}:{kind}:{ref}".encode("utf-8")


def _repo_ref(repo: str) -> str:
    try:
        return repo_slug(repo)
    except ValueError as exc:
        raise CredentialError(str(exc)) from None


def _name_ref(name: str) -> str:
    if not _NAME.match(name):
        raise CredentialError("a credential name is 1-64 letters, digits, dots, dashes or "
                              "underscores, starting with a letter or digit")
    return name


def _clean_secret(secret: str) -> str:
    if not isinstance(secret, str):
        raise CredentialError("a secret must be text")
    value = secret[:-2] if secret.endswith("\r\n") else secret.removesuffix("\n")
    if not value:
        raise CredentialError("the secret is empty")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise CredentialError("the secret contains a line break or another control character; "
                              "a secret must be one line")
    user, sep, password = value.partition(":")
    if sep and (not user or not password):
        raise CredentialError("a secret with a colon is read as username:password, "
                              "and both parts must be non-empty")
    return value


def _write_private(path: Path, data: bytes, *, replace: bool = True) -> None:
    """Write ``data`` to ``path`` with mode 0600, atomically when ``replace``."""
    target = path.with_name(f".{path.name}.{os.getpid()}.{_random.token_hex(4)}") \
        if replace else path
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), 0o600)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if replace:
            os.replace(target, path)
    except BaseException:
        target.unlink(missing_ok=True)
        raise
