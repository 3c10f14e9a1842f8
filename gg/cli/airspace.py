"""``gg airspace apply`` and ``gg airspace show``: the root envelope on the control plane."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import typer

from gg.api import placement as paths
from gg.cli.context import ago, client, emit_json

ENV_AIRSPACE = "GG_AIRSPACE"
DEFAULT_AIRSPACE = "airspace"

airspace_app = typer.Typer(help="The airspace directory: the root envelope and friends.",
                           no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(airspace_app, name="airspace")


def airspace_dir(given: Path | None) -> Path:
    """``--airspace``, then ``GG_AIRSPACE``, then ``./airspace``."""
    return given or Path(os.environ.get(ENV_AIRSPACE) or DEFAULT_AIRSPACE)


@airspace_app.command("apply")
def apply(
    airspace: Optional[Path] = typer.Option(None, "--airspace", metavar="DIR",
                                            help=f"Airspace directory (env {ENV_AIRSPACE}; "
                                                 f"default ./{DEFAULT_AIRSPACE})."),
    json_: bool = typer.Option(False, "--json"),
) -> None:
    """Apply root.yaml, the environments flights may use (admin)."""
    from gg.airspace.root import load_root

    root = load_root(airspace_dir(airspace) / "root.yaml")  # AirspaceError: file:line: key: …
    answer = client().request("PUT", paths.ROOT, json=root.to_dict())
    if json_:
        emit_json(answer)
        return
    names = ", ".join(answer["environments"]) or "no environments"
    typer.echo(f"applied the root envelope: {names}")
    for name in answer.get("not_in_force", []):
        typer.echo(f"note: environment {name} has no meaning in force yet, so flights cannot "
                   f"use it (gg environment chart {name} --means PREDICATE, then clear its gate)")


@airspace_app.command("show")
def show(json_: bool = typer.Option(False, "--json")) -> None:
    """The root envelope in force."""
    root = client().request("GET", paths.ROOT)
    if json_:
        emit_json(root)
        return
    typer.echo(f"root envelope: {', '.join(root['environments']) or 'no environments'} "
               f"(applied {ago(root['applied_at'])} by {root.get('applied_by') or '-'})")
