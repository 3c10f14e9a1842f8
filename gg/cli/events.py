"""``gg events``: the organisation's audit feed."""

from __future__ import annotations

import time
from typing import Optional

import typer

from gg.api.events import Event
from gg.cli.context import client, emit_json, plain, words


def register(app: typer.Typer) -> None:
    app.command("events")(events)


def events(
    kind: Optional[str] = typer.Option(None, "--kind", metavar="K", help="e.g. info:flight:landed or warn:"),
    runner: Optional[str] = typer.Option(None, "--runner", metavar="R"),
    flight: Optional[str] = typer.Option(None, "--flight", metavar="F"),
    limit: int = typer.Option(100, "--limit", min=1, max=10000),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing new events."),
    json_: bool = typer.Option(False, "--json"),
) -> None:
    """Events, oldest first, with actor and time."""
    api = client()
    rows = api.events(kind=kind, runner=runner, flight=flight, limit=limit)
    if json_ and not follow:
        emit_json(rows)
        return
    after = 0
    for row in rows:
        _print(row, json_)
        after = max(after, row.seq)
    if not rows and not follow:
        typer.echo("no events")
    while follow:
        if after == 0:
            newest = api.events(limit=1)
            after = newest[-1].seq if newest else 0
        for row in api.events(kind=kind, runner=runner, flight=flight, after=after, wait=25, limit=limit):
            _print(row, json_)
            after = max(after, row.seq)


def _print(row: Event, json_: bool) -> None:
    if json_:
        import json

        typer.echo(json.dumps(plain(row), sort_keys=True))
        return
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(row.at))
    runner = (f"runner {row.runner_name}" if row.runner_name else row.runner_id)
    subject = " ".join(x for x in (runner, row.flight_id) if x)
    detail = words(row.body)
    typer.echo(f"{when}  {row.kind:<28} {row.actor or '-':<20} {subject}  {detail}".rstrip())
