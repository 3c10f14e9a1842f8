"""``gg airspace check``: every problem in an airspace directory, as ``file:line: key: problem``.

The airspace directory is ``--airspace DIR``, else ``GG_AIRSPACE``, else ``./airspace``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import typer

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
