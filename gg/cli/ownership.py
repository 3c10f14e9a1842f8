"""``gg runner claim|unclaim|reserve|release|ownership`` and ``gg runner labels``.

Registered onto the ``runner`` group that ``gg.cli.runners`` owns, so each group of runner
subcommands lives in its own module.
"""

from __future__ import annotations

import typer

from gg.cli.context import client, console, emit_json, table
from gg.domain.runners import Liveness

_DONE = {"claim": "is yours now", "unclaim": "is open again (anyone may claim it)",
         "reserve": "is reserved: it takes only your flights",
         "release": "is released: it takes anyone's flights"}
_ALREADY = {"claim": "is yours already", "reserve": "is reserved already",
            "release": "is not reserved"}


def register(app: typer.Typer) -> None:
    from gg.cli.runners import runner_app

    for action in ("claim", "unclaim", "reserve", "release"):
        runner_app.command(action, help=_HELP[action])(_action(action))
    runner_app.command("ownership")(ownership)
    runner_app.command("labels")(labels)


_HELP = {
    "claim": "Claim an open runner: it belongs to you.",
    "unclaim": "Give up a runner you claimed (it becomes open).",
    "reserve": "Reserve your runner: it takes only your flights.",
    "release": "Release your reserved runner: it takes anyone's flights again.",
}


def _action(action: str):
    def command(ref: str = typer.Argument(..., metavar="RUNNER", help="Runner id or name."),
                json_: bool = typer.Option(False, "--json")) -> None:
        r = client().change_ownership(ref, action)
        if json_:
            emit_json(r)
            return
        said = _DONE[action] if r.changed else _ALREADY.get(action, _DONE[action])
        typer.echo(f"runner {r.name} {said}")

    command.__name__ = action
    return command


def ownership(ref: str = typer.Argument(..., metavar="RUNNER", help="Runner id or name."),
              state: str = typer.Argument(..., metavar="organisation|open"),
              json_: bool = typer.Option(False, "--json")) -> None:
    """Set whose a runner is (admin): organisation (nobody may claim it) or open."""
    r = client().set_ownership(ref, state)
    if json_:
        emit_json(r)
        return
    typer.echo(f"runner {r.name} is {r.ownership}" + ("" if r.changed else " already"))


def labels(json_: bool = typer.Option(False, "--json")) -> None:
    """Every runner's labels: stated, measured (its facts satisfy the meaning) or refuted."""
    rows = client().labels()
    if json_:
        emit_json(rows)
        return
    if not rows:
        typer.echo("no runners yet: start one with gg runner up --labels k=v")
        return
    t = table("RUNNER", "ONLINE", "LABEL", "DISPOSITION", "WHY")
    colour = {"measured": "green", "refuted": "red", "stated": "white"}
    for r in rows:
        online = Liveness.of(r.online).value
        if not r.labels:
            t.add_row(r.name, online, "-", "-", "it advertises no labels")
        for i, d in enumerate(r.labels):
            t.add_row(r.name if i == 0 else "", online if i == 0 else "", d["pair"],
                      f"[{colour[d['disposition']]}]{d['disposition']}[/]", d["reason"])
    console().print(t)
