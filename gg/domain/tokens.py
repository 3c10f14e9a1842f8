"""Secrets gg issues: prefixed, >= 160 bits of randomness, stored only as a SHA-256 hash.

A token's public name is its fingerprint: ``sha256:`` + the first 16 hex characters of the
SHA-256 of its value. Comparison of secrets goes through :func:`same_digest` only, which is
constant-time; nothing in gg compares a secret with ``==``.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

PERSON = "ggp_"
RUNNER = "ggr_"
ENROLMENT = "gge_"
MEMBER_CODE = "ggm_"
PREFIXES = (PERSON, RUNNER, ENROLMENT, MEMBER_CODE)  # what a runner may ever hold or send
SESSION = "ggs_"  # a web console session (gg.domain.console): only a browser holds one
_MINTED = (*PREFIXES, SESSION)

_RANDOM_BYTES = 24  # 192 bits


def mint(prefix: str) -> str:
    if prefix not in _MINTED:
        raise ValueError(f"unknown token prefix {prefix!r}")
    return prefix + secrets.token_urlsafe(_RANDOM_BYTES)


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def fingerprint(token: str) -> str:
    return "sha256:" + digest(token)[:16]


def same_digest(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


def new_id(prefix: str) -> str:
    """Short public ids (``f_3k9x…``) for flights, runners, people, gates."""
    return prefix + secrets.token_hex(5)
