"""``gg estimate accuracy``: how the start estimates flights were shown held up."""

from __future__ import annotations

from typing import Optional

import typer

from gg.cli.context import CliError, client, emit_json
from gg.cli.exits import Exit

estimate_app = typer.Typer(help="Start estimates: how they compared with the starts.",
                           no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(estimate_app, name="estimate")


@estimate_app.command("accuracy")
def accuracy(
    since: Optional[str] = typer.Option(None, "--since", metavar="DUR",
                                        help="Only starts this recent (30m, 12h, 7d)."),
    json_: bool = typer.Option(False, "--json"),
) -> None:
    """Median and p90 error of the last estimate each flight was shown before it started,
    and how often the start fell inside the range given."""
    from gg.settings import parse_duration

    seconds = None
    if since is not None:
        try:
            seconds = parse_duration(since)
        except ValueError as exc:
            raise CliError(f"--since: {exc}", Exit.USAGE) from None
    report = client().estimate_accuracy(seconds)
    if json_:
        emit_json(report)
        return
    typer.echo(report.sentence)
