"""``gg services``, ``gg service update`` (``gg fly --service`` is in gg.cli.flights)."""

from __future__ import annotations

from typing import List, Optional

import typer

from gg.cli.context import CliError, client, console, emit_json, table
from gg.cli.exits import Exit
from gg.domain.timeouts import describe as describe_duration

service_app = typer.Typer(help="Services: flights their runner keeps running.",
                          no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.command("services")(list_services)
    app.add_typer(service_app, name="service")


def list_services(json_: bool = typer.Option(False, "--json")) -> None:
    """Every service: runner, generation, restarts, uptime, readiness."""
    rows = client().services()
    if json_:
        emit_json(rows)
        return
    if not rows:
        typer.echo("no services: open one with gg fly --service -- CMD")
        return
    t = table("ID", "RUNNER", "PORT", "GEN", "RESTARTS", "UPTIME", "READY", "HEALTH", "UPDATE")
    for s in rows:
        gen = "-" if s.generation is None else str(s.generation)
        if s.generation is not None and s.wanted_generation != s.generation:
            gen += f" (wants {s.wanted_generation})"
        t.add_row(s.id, s.runner_name or "-", str(s.port or "-"), gen, str(s.restarts),
                  describe_duration(s.uptime) if s.uptime else "-", "yes" if s.ready else "no",
                  s.health, s.update or "-")
    console().print(t)


@service_app.command("update")
def update(
    flight_id: str = typer.Argument(..., metavar="F"),
    command: Optional[List[str]] = typer.Argument(None, metavar="-- NEWCMD..."),
    set_: Optional[List[str]] = typer.Option(None, "--set", metavar="K=V",
                                             help="Set an environment variable (repeatable)."),
    json_: bool = typer.Option(False, "--json"),
) -> None:
    """Start a new generation of a service; the old one serves until the new one is ready."""
    env = {}
    for pair in set_ or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CliError(f"--set takes K=V (got {pair!r})", Exit.USAGE)
        env[key] = value
    answer = client().update_service(flight_id, list(command) if command else None, env or None)
    if json_:
        emit_json(answer)
        return
    if answer.approval is not None:
        typer.echo(f"{flight_id}: generation {answer.spec.generation} asked; it waits for an "
                   f"approval by someone else (gate {answer.approval}: gg approve {flight_id}); "
                   "until then the service runs what was approved")
        return
    typer.echo(f"{flight_id}: generation {answer.spec.generation} asked; its runner starts it "
               "and switches once it is ready (gg services)")
