"""``gg id-token`` (inside a flight) and ``gg server rotate-signing-key`` (admin): identity
tokens (docs/jobs.md, "Identity tokens")."""

from __future__ import annotations

import os
import time

import typer

from gg.cli.context import CliError, client, emit_json
from gg.cli.exits import Exit, for_status


def register(app: typer.Typer) -> None:
    app.command("id-token")(id_token)


def register_server(server_app: typer.Typer) -> None:
    server_app.command("rotate-signing-key")(rotate_signing_key)


def id_token(audience: str = typer.Option(..., "--audience", metavar="AUD",
                                          help="Who will verify it (its aud claim), e.g. "
                                               "sts.amazonaws.com."),
             json_: bool = typer.Option(False, "--json", help="The token, its expiry and "
                                                              "jti as JSON.")) -> None:
    """Print a signed identity token (a JWT) for this flight, through its runner; inside a
    flight only."""
    from gg.domain.id_tokens import audience_problem
    from gg.runner.id_tokens import ENV_REQUEST_TOKEN, ENV_SOCKET, IdTokenError, ask

    path, request_token = os.environ.get(ENV_SOCKET), os.environ.get(ENV_REQUEST_TOKEN)
    if not path or not request_token:
        raise CliError(f"gg id-token works inside a flight only (${ENV_SOCKET} and "
                       f"${ENV_REQUEST_TOKEN} are not set)", Exit.USAGE)
    problem = audience_problem(audience)
    if problem:
        raise CliError(problem, Exit.USAGE)
    try:
        answer = ask(path, request_token, audience)
    except IdTokenError as exc:
        raise CliError(exc.message, for_status(exc.status)) from None
    except OSError as exc:
        raise CliError(f"the runner does not answer at ${ENV_SOCKET} ({exc.strerror or exc})",
                       Exit.UNREACHABLE) from None
    if json_:
        emit_json({k: answer.get(k) for k in ("token", "expires_at", "jti")})
        return
    typer.echo(answer["token"])


def rotate_signing_key(json_: bool = typer.Option(False, "--json")) -> None:
    """A new key signs identity tokens from now on; the old one stays in the JWKS until every
    token it signed has expired (admin)."""
    answer = client().rotate_signing_key()
    if json_:
        emit_json(answer)
        return
    left = max(0, round(answer.retired_leaves_jwks_at - time.time()))
    typer.echo(f"signing with {answer.kid} from now on; {answer.retired} stays in the JWKS "
               f"for {left}s more, until every token it signed has expired")
