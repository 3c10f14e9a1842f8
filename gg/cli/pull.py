"""``gg runner attach``: an admin attaches a pull-mode runner (docs/runner-modes.md); the
runner itself is ``gg runner up --listen`` (gg.cli.runners)."""

from __future__ import annotations

from typing import Optional

import typer

from gg.cli.context import client, emit_json
from gg.cli.runners import runner_app


def register(app: typer.Typer) -> None:
    """``attach`` joins the ``gg runner`` group that :mod:`gg.cli.runners` owns."""


@runner_app.command("attach")
def attach(url: str = typer.Argument(..., metavar="URL",
                                     help="Where the runner listens, like http://10.0.0.5:7400."),
           name: str = typer.Option(..., "--name", help="The runner's name."),
           fingerprint: Optional[str] = typer.Option(
               None, "--fingerprint", metavar="SHA256:...",
               help="Refuse unless the runner's key has this fingerprint (it prints it)."),
           json_: bool = typer.Option(False, "--json")) -> None:
    """Attach a pull-mode runner (admin): the control plane pins its key and polls it."""
    answer = client().attach_runner(url, name, fingerprint)
    if json_:
        emit_json(answer)
        return
    r = answer.runner
    typer.echo(f"attached runner {r.name} ({r.id}) at {r.url}: its key fingerprint is "
               f"{answer.fingerprint} (pinned"
               + (", as given" if fingerprint else "; compare it with what the runner printed")
               + f"); it pinned the control plane's key {answer.control_key_fingerprint}")
