"""``gg artifacts F`` and ``gg artifact get F NAME [-o PATH]``: the files a flight left under
``$GG_ARTIFACTS`` (docs/work-graphs.md). A download is written a chunk at a time to a file
beside its destination, checked against the artifact's SHA-256, then renamed into place:
a failed or refused download leaves nothing behind."""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from pathlib import Path
from typing import Optional

import typer

from gg.cli.context import CliError, ago, client, console, emit_json, table
from gg.cli.exits import Exit

artifact_app = typer.Typer(help="One artifact of a flight: gg artifact get F NAME.",
                           no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(artifact_app, name="artifact")
    app.command("artifacts")(artifacts_list)


def artifacts_list(flight: str = typer.Argument(..., metavar="FLIGHT"),
                   json_: bool = typer.Option(False, "--json")) -> None:
    """The files FLIGHT left under $GG_ARTIFACTS: name, size, SHA-256."""
    answer = client().artifacts(flight)
    if json_:
        emit_json(answer)
        return
    if not answer.artifacts:
        typer.echo(f"{flight} left no artifacts (files it writes under $GG_ARTIFACTS are "
                   "kept when its command ends)")
        return
    t = table("NAME", "SIZE", "SHA-256", "STORED")
    for a in answer.artifacts:
        t.add_row(a.name, str(a.size), a.sha256[:16] + "…", ago(a.at))
    console().print(t)


@artifact_app.command("get")
def artifact_get(
    flight: str = typer.Argument(..., metavar="FLIGHT"),
    name: str = typer.Argument(..., metavar="NAME", help="Its path under $GG_ARTIFACTS."),
    output: Optional[str] = typer.Option(None, "-o", "--output", metavar="PATH",
                                         help="Where to write it (default: ./BASENAME; - for "
                                              "standard output)."),
) -> None:
    """Download one artifact of FLIGHT, checked against its SHA-256."""
    api = client()
    counted = hashlib.sha256()
    if output == "-":
        out = sys.stdout.buffer

        def sink(block: bytes) -> None:
            counted.update(block)
            out.write(block)

        digest = api.download_artifact(flight, name, sink)
        out.flush()
        _check(digest, counted.hexdigest(), name)
        return
    target = Path(output) if output else Path(name.rsplit("/", 1)[-1])
    if target.is_dir():
        target = target / name.rsplit("/", 1)[-1]
    try:
        fd, partial = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent or ".")
    except OSError as exc:
        raise CliError(f"cannot write in {target.parent}: {exc.strerror or exc}",
                       Exit.USAGE) from None
    try:
        with os.fdopen(fd, "wb") as handle:
            def sink(block: bytes) -> None:
                counted.update(block)
                handle.write(block)

            digest = api.download_artifact(flight, name, sink)
        _check(digest, counted.hexdigest(), name)
        os.replace(partial, target)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    typer.echo(f"{target}", err=True)


def _check(stored: str, got: str, name: str) -> None:
    if stored and stored != got:
        raise CliError(f"artifact {name} arrived with SHA-256 {got}, not {stored} as stored: "
                       "nothing was kept", Exit.FAILURE)
