"""Identity you can check: a runner's key fingerprint, its build, and who holds a name.

A runner's public name is its key fingerprint, written exactly as ``ssh-keygen -l`` prints
it for the same key: ``SHA256:`` + unpadded base64 of the SHA-256 of the OpenSSH public-key
blob. For Ed25519 that blob is two SSH strings (a 4-byte big-endian length, then the bytes):
``"ssh-ed25519"`` and the 32 raw key bytes (RFC 8709).

Version skew compares a runner's build with the control plane's: the version *and* the
build commit. It reads::

    none      same version, same known commit
    skewed    a different version, or the same version with two different known commits
    unknown   the runner did not say its version, or either commit cannot be known

A live runner holds its name: no other runner may register under it (SPEC 17). Live means
not retired, and either online (checked in within OFFLINE_AFTER, no goodbye since), or holding
a lease, or registered within OFFLINE_AFTER and not yet checked in (so two machines starting
at once cannot both take a name). That is exactly what ``gg runner forget`` refuses to delete,
so a name that is not free is freed by stopping its holder and forgetting it, or by picking
another ``--name``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import struct

from gg.domain.runners import Runner, is_online

__all__ = ["UNKNOWN_COMMIT", "key_fingerprint", "normalise_fingerprint", "holds_name",
           "keeps_name_from",
           "skew", "skew_pair", "skew_warns", "openssh_public_key"]

UNKNOWN_COMMIT = "unknown"
_KEY_TYPE = b"ssh-ed25519"


def _ssh_string(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def _blob(public_key: str) -> bytes | None:
    try:
        raw = base64.b64decode(public_key, validate=True)
    except (binascii.Error, ValueError):
        return None
    if len(raw) != 32:
        return None
    return _ssh_string(_KEY_TYPE) + _ssh_string(raw)


def key_fingerprint(public_key: str) -> str | None:
    """``SHA256:…`` of a base64 Ed25519 public key (as runners register it); None if it is
    not one."""
    blob = _blob(public_key)
    if blob is None:
        return None
    digest = hashlib.sha256(blob).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def openssh_public_key(public_key: str, comment: str = "") -> str | None:
    """The key as one OpenSSH ``authorized_keys`` line (what ``ssh-keygen -lf`` reads)."""
    blob = _blob(public_key)
    if blob is None:
        return None
    line = "ssh-ed25519 " + base64.b64encode(blob).decode()
    return f"{line} {comment}".rstrip()


def normalise_fingerprint(text: str) -> str:
    """What an operator typed or pasted, as the fingerprint gg shows: surrounding blanks
    dropped, the ``SHA256:`` prefix added when missing (its case as ssh-keygen prints it),
    base64 padding dropped."""
    text = text.strip()
    if text[:7].upper() == "SHA256:":
        text = text[7:]
    return "SHA256:" + text.rstrip("=")


def skew(runner_version: str | None, runner_commit: str | None, server_version: str,
         server_commit: str | None) -> str:
    """``none``, ``skewed`` or ``unknown`` (the table in this module's docstring)."""
    if not runner_version:
        return "unknown"
    if runner_version != server_version:
        return "skewed"
    known = {c for c in (runner_commit, server_commit)
             if c and c != UNKNOWN_COMMIT}
    if len(known) == 2:
        return "skewed"
    if not runner_commit or runner_commit == UNKNOWN_COMMIT:
        return "unknown"
    if not server_commit or server_commit == UNKNOWN_COMMIT:
        return "unknown"
    return "none"


def skew_pair(runner_version: str | None, runner_commit: str | None, server_version: str,
              server_commit: str | None) -> str:
    """The version pair a ``warn:runner:version_skew`` event is recorded once for:
    ``RUNNER_VERSION+RUNNER_COMMIT/SERVER_VERSION+SERVER_COMMIT``."""
    def build(version: str | None, commit: str | None) -> str:
        return f"{version or UNKNOWN_COMMIT}+{commit or UNKNOWN_COMMIT}"
    return f"{build(runner_version, runner_commit)}/{build(server_version, server_commit)}"


def skew_warns(verdict: str, pair: str, recorded_pairs: set[str]) -> bool:
    """Whether a check-in with this verdict records a ``warn:runner:version_skew`` event:
    for ``skewed`` and for ``unknown``, once per (runner, version pair)."""
    return verdict in ("skewed", "unknown") and pair not in recorded_pairs


def holds_name(runner: Runner, now: float, offline_after: float, *, holds_lease: bool) -> bool:
    """Whether ``runner`` is live and so keeps its name from anyone else (module docstring)."""
    if runner.retired_at is not None or runner.admin_state == "retired":
        return False
    if holds_lease or is_online(runner, now, offline_after):
        return True
    return runner.last_seen_at is None and now - runner.created_at < offline_after


def keeps_name_from(holder: Runner, now: float, offline_after: float, *, holds_lease: bool,
                    person_id: str | None, person_is_admin: bool) -> bool:
    """Whether ``holder`` keeps its name from a registration by a person (module
    docstring): a live holder from anyone, an offline one that is not retired from everyone
    but the person who registered it and admins. ``person_id`` None: no person names it
    (enrolment, pool join), and only a live holder keeps its name."""
    if holds_name(holder, now, offline_after, holds_lease=holds_lease):
        return True
    if holder.retired_at is not None or holder.admin_state == "retired" or person_id is None:
        return False
    return not (person_is_admin or holder.registered_by == person_id)
