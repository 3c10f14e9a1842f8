"""Helpers the enrolment tests share: a profile, a runner key, an airspace on disk."""

from __future__ import annotations

import base64
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

UI = {"purpose": "builds the web UI", "roles": ["runner"], "environment": "ui",
      "repository-hosts": ["git.example.com"], "policy": {"isolation": "sandbox",
                                                          "workers": 2}}


def public_key() -> str:
    raw = Ed25519PrivateKey.generate().public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return base64.b64encode(raw).decode()


def write_profile(airspace: Path, name: str, text: str) -> Path:
    path = airspace / "fleet" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path
