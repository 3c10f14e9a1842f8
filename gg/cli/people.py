"""``gg login``, ``gg logout``, ``gg whoami``, ``gg person add|list|remove|token``."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from gg import config
from gg.api.people import Person
from gg.cli.context import CliError, ago, client, console, emit_json, server_url, settings, table
from gg.cli.exits import Exit

person_app = typer.Typer(help="People of the organisation.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.command("login")(login)
    app.command("logout")(logout)
    app.command("whoami")(whoami)
    app.add_typer(person_app, name="person")


def login(
    server: Optional[str] = typer.Option(None, "--server", metavar="URL",
                                        help="Control plane URL (replicas: comma-separated)."),
    token: Optional[str] = typer.Option(None, "--token", help="A ggp_ token (prefer --token-file)."),
    token_file: Optional[Path] = typer.Option(None, "--token-file", metavar="FILE"),
) -> None:
    """Sign in on this machine (the token is checked, then kept mode 0600)."""
    from gg.cli.context import STATE
    from gg.client import Client

    if (token is None) == (token_file is None):
        raise CliError("give exactly one of --token or --token-file", Exit.USAGE)
    if token_file is not None:
        try:
            token = token_file.read_text().strip()
        except OSError as exc:
            raise CliError(f"cannot read {token_file}: {exc.strerror}", Exit.USAGE) from None
    if not token or not token.startswith("ggp_"):
        raise CliError("that is not a person's token (they start with ggp_)", Exit.USAGE)
    STATE.server = server or STATE.server
    url = server_url()
    who = Client(url, token).whoami()
    cfg = settings()
    cfg.server, cfg.token, cfg.person = url, token, who.person.name
    path = config.save(cfg)
    typer.echo(f"signed in to {url} as {who.person.name} ({who.person.role}); "
               f"settings in {path}")


def whoami(json_: bool = typer.Option(False, "--json"),
           server: bool = typer.Option(False, "--server",
                                       help="Also what the control plane keeps: its retention "
                                            "windows and the size of its store.")) -> None:
    """Who this machine is signed in as."""
    who = client().whoami()
    if json_:
        emit_json(who)
        return
    typer.echo(f"{who.person.name} ({who.person.role}) at {server_url()}")
    if server and who.server is not None:
        kept = who.server
        typer.echo(f"ended flights kept: {_window(kept.retain_flights)}")
        typer.echo(f"events kept: {_window(kept.retain_events)}")
        typer.echo(f"database: {kept.database_bytes} bytes")


def _window(seconds: float) -> str:
    if seconds <= 0:
        return "for ever"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def logout() -> None:
    """Forget this machine's sign-in (the token stays valid on the server until it expires;
    to end it everywhere, rotate it with gg person token NAME --rotate)."""
    import os

    cfg = settings()
    path = config.config_path()
    had = cfg.token is not None
    config.forget_token()
    if os.environ.get(config.ENV_TOKEN):
        raise CliError(f"{config.ENV_TOKEN} is set in the environment, so this shell still "
                       f"signs in with it; unset {config.ENV_TOKEN}", int(Exit.USAGE))
    if had:
        who = f" {cfg.person}" if cfg.person else ""
        typer.echo(f"signed out{who}; the token is gone from {path}")
    else:
        typer.echo("not signed in on this machine; nothing to forget")


def _ttl(text: Optional[str]) -> float | str | None:
    from gg.settings import parse_duration

    if text is None:
        return None
    if text.strip().lower() == "never":
        return "never"
    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        raise CliError(f"--ttl: {exc}, or never", int(Exit.USAGE)) from None
    if not 0 < seconds <= 3650 * 86400:
        raise CliError(f"--ttl must be above 0 and at most 3650d, or never (got {text})",
                       int(Exit.USAGE))
    return seconds


_TTL_HELP = "Token lifetime, e.g. 12h, 30d, or never (admins); default PERSON_TOKEN_TTL (90d)."


@person_app.command("add")
def person_add(
    name: str = typer.Argument(..., help="The person's name."),
    admin: bool = typer.Option(False, "--admin", help="Make them an admin."),
    ttl: Optional[str] = typer.Option(None, "--ttl", metavar="DUR", help=_TTL_HELP),
    json_: bool = typer.Option(False, "--json"),
) -> None:
    """Add a person; their token is shown once, now."""
    answer = client().add_person(name, admin, _ttl(ttl))
    if json_:
        emit_json(answer)
        return
    person = answer.person
    typer.echo(f"added {person.name} ({person.role}), token {person.token_fingerprint} "
               f"expires {_expiry(person)}. Their token, shown this once:")
    typer.echo(answer.token)


@person_app.command("list")
def person_list(
    all_: bool = typer.Option(False, "--all", help="Also show removed people."),
    json_: bool = typer.Option(False, "--json"),
) -> None:
    """The organisation's people: role, owner, token fingerprint and expiry."""
    rows = client().people(removed=all_)
    if json_:
        emit_json(rows)
        return
    columns = ["NAME", "ROLE", "OWNER", "TOKEN", "EXPIRES", "CREATED"]
    t = table(*columns, *(["REMOVED"] if all_ else []))
    for p in rows:
        row = [p.name, p.role, "yes" if p.is_owner else "-", p.token_fingerprint,
               _expiry(p) if p.removed_at is None else "-", ago(p.created_at)]
        if all_:
            gone = p.removed_at
            row.append(f"{ago(gone)} by {p.removed_by}" if gone else "-")
        t.add_row(*row)
    console().print(t)


@person_app.command("remove")
def person_remove(
    name: str = typer.Argument(..., help="The person to remove."),
    json_: bool = typer.Option(False, "--json"),
) -> None:
    """Remove a person (admin): their token stops working at once; history keeps the name."""
    removed = client().remove_person(name)
    if json_:
        emit_json(removed)
        return
    typer.echo(f"removed {removed.name}: token {removed.token_fingerprint} no longer works")


@person_app.command("token")
def person_token(
    name: str = typer.Argument(..., help="The person (yourself, or anyone for an admin)."),
    rotate: bool = typer.Option(False, "--rotate", help="Mint a new token; the old one dies."),
    ttl: Optional[str] = typer.Option(None, "--ttl", metavar="DUR", help=_TTL_HELP),
    json_: bool = typer.Option(False, "--json"),
) -> None:
    """Rotate a person's token: the new one is shown once, the old one stops working at once."""
    if not rotate:
        raise CliError("say --rotate to mint a new token (the old one stops working at once)",
                       int(Exit.USAGE))
    cfg = settings()
    answer = client().rotate_person_token(name, _ttl(ttl))
    person = answer.person
    if json_:
        emit_json(answer)
    else:
        typer.echo(f"new token {person.token_fingerprint} for {person.name}, expires "
                   f"{_expiry(person)}; the old one no longer works. Shown this once:")
        typer.echo(answer.token)
    if cfg.token and cfg.person == person.name and not _env_token():
        cfg.token = answer.token  # our own: keep this machine signed in
        config.save(cfg)
        typer.echo(f"this machine now signs in with the new token ({config.config_path()})",
                   err=True)


def _env_token() -> bool:
    import os

    return bool(os.environ.get(config.ENV_TOKEN))


def _expiry(person: Person) -> str:
    expires = person.token_expires_at
    return "never" if expires is None else ago(expires)
