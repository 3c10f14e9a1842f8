"""``gg login``, ``gg whoami``, ``gg person add``."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from gg import config
from gg.cli.context import CliError, client, emit_json, server_url, settings

person_app = typer.Typer(help="People of the organisation.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.command("login")(login)
    app.command("whoami")(whoami)
    app.add_typer(person_app, name="person")


def login(
    server: Optional[str] = typer.Option(None, "--server", metavar="URL", help="Control plane URL."),
    token: Optional[str] = typer.Option(None, "--token", help="A ggp_ token (prefer --token-file)."),
    token_file: Optional[Path] = typer.Option(None, "--token-file", metavar="FILE"),
) -> None:
    """Sign in on this machine (the token is checked, then kept mode 0600)."""
    from gg.cli.context import STATE
    from gg.client import Client

    if (token is None) == (token_file is None):
        raise CliError("give exactly one of --token or --token-file", 2)
    if token_file is not None:
        try:
            token = token_file.read_text().strip()
        except OSError as exc:
            raise CliError(f"cannot read {token_file}: {exc.strerror}", 2) from None
    if not token or not token.startswith("ggp_"):
        raise CliError("that is not a person's token (they start with ggp_)", 2)
    STATE.server = server or STATE.server
    url = server_url()
    who = Client(url, token).whoami()
    cfg = settings()
    cfg.server, cfg.token, cfg.person = url, token, who["person"]["name"]
    path = config.save(cfg)
    typer.echo(f"signed in to {url} as {who['person']['name']} ({who['person']['role']}); "
               f"settings in {path}")


def whoami(json_: bool = typer.Option(False, "--json")) -> None:
    """Who this machine is signed in as."""
    who = client().whoami()
    if json_:
        emit_json(who)
        return
    person = who["person"]
    typer.echo(f"{person['name']} ({person['role']}) at {server_url()}")


@person_app.command("add")
def person_add(
    name: str = typer.Argument(..., help="The person's name."),
    admin: bool = typer.Option(False, "--admin", help="Make them an admin."),
    json_: bool = typer.Option(False, "--json"),
) -> None:
    """Add a person; their token is shown once, now."""
    answer = client().add_person(name, admin)
    if json_:
        emit_json({"person": answer["person"], "token": answer["token"]})
        return
    typer.echo(f"added {answer['person']['name']} ({answer['person']['role']}). "
               "Their token, shown this once:")
    typer.echo(answer["token"])
