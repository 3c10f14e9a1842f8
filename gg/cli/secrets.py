"""``gg secret set|remove`` (admin) and ``gg secrets`` (anyone signed in): docs/jobs.md.

A value is read from standard input (a prompt that does not echo on a terminal) or
``--from-file``, never from an argument: an argument is visible to every user of the machine
in the process list. One newline at the end of standard input is dropped (``echo v |``).
"""

from __future__ import annotations

import getpass
import sys
from pathlib import Path
from typing import Optional

import typer

from gg.cli.context import CliError, ago, client, console, emit_json, table
from gg.cli.exits import Exit

secret_app = typer.Typer(help="Secrets flights receive as variables (values never shown).",
                         no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(secret_app, name="secret")
    app.command("secrets")(secrets_list)


def _read_value(from_file: Optional[Path]) -> bytes:
    if from_file is not None:
        try:
            return from_file.read_bytes()
        except OSError as exc:
            raise CliError(f"cannot read {from_file}: {exc.strerror or exc}", Exit.USAGE) from None
    if sys.stdin is None:
        return b""
    if sys.stdin.isatty():
        return getpass.getpass("value (not shown): ").encode("utf-8")
    data = sys.stdin.buffer.read(256 * 1024 + 1)
    return data[:-2] if data.endswith(b"\r\n") else data[:-1] if data.endswith(b"\n") else data


@secret_app.command("set")
def secret_set(
    name: str = typer.Argument(..., help="The secret's name (letters, digits, _)."),
    on_argv: Optional[str] = typer.Argument(None, hidden=True, show_default=False),
    env: Optional[str] = typer.Option(None, "--env", metavar="E",
                                      help="Only flights of environment E receive it."),
    from_file: Optional[Path] = typer.Option(None, "--from-file", metavar="F",
                                             help="Read the value from F (else stdin)."),
    json_: bool = typer.Option(False, "--json"),
) -> None:
    """Set a secret (admin): its value from stdin or --from-file, sealed on the control plane."""
    from gg.domain import secrets as rules

    if on_argv is not None:  # never echoed: it is the value, put where everyone can read it
        raise CliError("a secret's value is never taken from the command line (every user of "
                       "this machine can read it in the process list): give it on standard "
                       "input or with --from-file F", Exit.USAGE)
    if problem := rules.name_problem(name):
        raise CliError(problem, Exit.USAGE)
    value = _read_value(from_file)
    if problem := rules.value_problem(value):
        raise CliError(problem, Exit.USAGE)
    answer = client().set_secret(name, value.decode("utf-8"), env)
    del value
    if json_:
        emit_json(answer)
        return
    where = f" for environment {env}" if env else " for every environment"
    verb = "replaced" if answer.replaced else "set"
    typer.echo(f"secret {name} {verb}{where}: {answer.scope}. Flights ask for it with "
               f"gg fly --secret {name}[=ENVVAR]")


def secrets_list(json_: bool = typer.Option(False, "--json")) -> None:
    """Every secret: its name, scope, who set it and when (never a value)."""
    rows = client().secrets()
    if json_:
        emit_json(rows)
        return
    if not rows:
        typer.echo("no secrets: an admin sets one with gg secret set NAME (value on stdin)")
        return
    t = table("NAME", "ENVIRONMENT", "SET BY", "SET")
    for s in rows:
        t.add_row(s.name, s.environment or "(every)", s.set_by or "-", ago(s.set_at))
    console().print(t)


@secret_app.command("remove")
def secret_remove(
    name: str = typer.Argument(..., help="The secret's name."),
    env: Optional[str] = typer.Option(None, "--env", metavar="E",
                                      help="The one set for environment E."),
    json_: bool = typer.Option(False, "--json"),
) -> None:
    """Remove a secret (admin): flights granted from now on cannot receive it."""
    answer = client().remove_secret(name, env)
    if json_:
        emit_json(answer)
        return
    where = f" for environment {env}" if env else " for every environment"
    typer.echo(f"secret {name}{where} removed")
