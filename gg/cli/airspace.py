"""``gg airspace check|apply|show``: the airspace directory and the root envelope in force.

The airspace directory is ``--airspace DIR``, else ``GG_AIRSPACE``, else ``./airspace``.
``check`` reads every file locally and prints each problem as ``file:line: key: problem``;
``apply`` sends ``root.yaml`` (the environments flights may use) to the control plane.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import typer

from gg.cli.context import ago, client, emit_json
from gg.cli.exits import Exit

ENV_AIRSPACE = "GG_AIRSPACE"
DEFAULT_AIRSPACE = "airspace"

airspace_app = typer.Typer(help="Airspace files: the root envelope, fleet profiles, pool "
                                "strategies.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(airspace_app, name="airspace")


def airspace_dir(flag: Optional[Path]) -> Path:
    """Where the airspace is: the flag, then GG_AIRSPACE, then ./airspace."""
    if flag is not None:
        return flag
    return Path(os.environ.get(ENV_AIRSPACE) or DEFAULT_AIRSPACE)


AirspaceOption = typer.Option(None, "--airspace", metavar="DIR",
                              help="The airspace directory (env GG_AIRSPACE, default ./airspace).")


@airspace_app.command("check")
def check(airspace: Optional[Path] = AirspaceOption) -> None:
    """Check every file of the airspace; print each problem, exit non-zero if any."""
    from gg.airspace import check_airspace, load_airspace

    base = airspace_dir(airspace)
    errors = check_airspace(base)
    for error in errors:
        typer.echo(str(error), err=True)
    if errors:
        typer.echo(f"{len(errors)} problem{'s' if len(errors) != 1 else ''} in {base}", err=True)
        raise typer.Exit(int(Exit.FAILURE))
    loaded = load_airspace(base)
    root = (f"root lists {len(loaded.root.environments)} environment(s)" if loaded.root
            else "no root.yaml")
    typer.echo(f"{base}: good ({root}, {len(loaded.profiles)} fleet profile(s), "
               f"{len(loaded.strategies)} pool strategy(ies))")


@airspace_app.command("apply")
def apply(
    airspace: Optional[Path] = AirspaceOption,
    json_: bool = typer.Option(False, "--json"),
    dry_run: bool = typer.Option(False, "--dry-run",
                                 help="Say what would apply; change nothing."),
) -> None:
    """Apply root.yaml, the environments flights may use (admin). The root applies at once
    (it opens no gate); it is refused while a listed environment has nothing to serve it."""
    from gg.airspace.root import load_root

    root = load_root(airspace_dir(airspace) / "root.yaml")  # AirspaceError: file:line: key: …
    answer = client().apply_root(root.to_dict(), dry_run=dry_run)
    if json_:
        emit_json(answer)
        return
    names = ", ".join(answer.environments) or "no environments"
    if answer.dry_run:
        typer.echo(f"dry run: the root envelope would apply at once (it opens no gate): "
                   f"{names}; nothing was changed")
    else:
        typer.echo(f"applied the root envelope: {names}")
    for name in answer.not_in_force:
        typer.echo(f"note: environment {name} has no meaning in force yet, so flights cannot "
                   f"use it (gg environment chart {name} --means PREDICATE, then clear its gate)")


@airspace_app.command("show")
def show(json_: bool = typer.Option(False, "--json")) -> None:
    """The root envelope in force."""
    root = client().root()
    if json_:
        emit_json(root)
        return
    typer.echo(f"root envelope: {', '.join(root.environments) or 'no environments'} "
               f"(applied {ago(root.applied_at)} by {root.applied_by or '-'})")
    if root.timeouts:
        from gg.domain.timeouts import describe

        typer.echo("timeout: " + ", ".join(f"{name} {describe(seconds)}"
                                           for name, seconds in root.timeouts.items()))
    if root.retries:
        from gg.domain.retries import Retry, settle

        typer.echo("retries: " + ", ".join(
            f"{name} {(settle(None, Retry.of(r)) or Retry(retries=0)).text}"
            for name, r in root.retries.items()))
    if root.images:
        typer.echo("images: " + ", ".join(f"{name} {image}" for name, image in root.images.items()))
