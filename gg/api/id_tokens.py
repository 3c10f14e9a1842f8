"""Route paths, requests and answers of identity tokens (docs/jobs.md, "Identity tokens")."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, StringConstraints

from gg.api.schemas import Answer, Request

# Public by design (a verifier fetches them without credentials): OpenID Connect discovery.
DISCOVERY = "/.well-known/openid-configuration"
JWKS = "/.well-known/jwks"
# The runner asks for a flight it holds, with its own credential and the flight's epoch.
LEASE_ID_TOKEN = "/v1/runner/flights/{flight_id}/id-token"
SIGNING_KEY_ROTATE = "/v1/signing-keys/rotate"  # admins


class IdTokenAsk(Request):
    epoch: Annotated[int, Field(ge=1)]
    # bounded loosely here: the control plane says what is wrong with it in one sentence
    audience: Annotated[str, StringConstraints(max_length=4096)]


class IdTokenMinted(Answer):
    token: str
    expires_at: int
    jti: str


class Discovery(Answer):
    issuer: str
    jwks_uri: str
    response_types_supported: list[str]
    subject_types_supported: list[str]
    id_token_signing_alg_values_supported: list[str]
    scopes_supported: list[str]
    claims_supported: list[str]


class Jwks(Answer):
    keys: list[dict[str, Any]]


class SigningKeyRotated(Answer):
    kid: str
    retired: str
    retired_leaves_jwks_at: float
