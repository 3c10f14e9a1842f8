"""``gg server``: the control plane."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

import typer

from gg.cli.context import CliError
from gg.cli.exits import Exit


def register(app: typer.Typer) -> None:
    app.command("server")(server)


def parse_listen(listen: str) -> tuple[str, int]:
    host, sep, port = listen.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise CliError(f"--listen takes HOST:PORT (got {listen!r})", Exit.USAGE)
    return host.strip("[]"), int(port)


def server(
    data_dir: Optional[Path] = typer.Option(None, "--data-dir", metavar="DIR",
                                            help="Where the store lives (default: platformdirs data dir)."),
    listen: str = typer.Option("127.0.0.1:8421", "--listen", metavar="HOST:PORT"),
    dev: bool = typer.Option(False, "--dev", help="Development mode: allows isolation none."),
) -> None:
    """Start the control plane (FastAPI on uvicorn, SQLite in WAL mode)."""
    from gg import config
    from gg.server.app import build, stopping
    from gg.server.connections import serve
    from gg.settings import Settings

    host, port = parse_listen(listen)
    directory = data_dir or config.data_dir()
    try:
        settings = Settings.from_env(dev=dev)
    except ValueError as exc:
        raise CliError(str(exc), Exit.USAGE) from None
    os.umask(0o077)  # everything the server writes (store, WAL, tokens) is the owner's alone
    app, owner_token = build(directory, settings)
    if owner_token is not None:
        print(f"gg: first start: organisation created; the owner's token is in {owner_token} "
              "(mode 0600)", file=sys.stderr)
    print(f"gg: control plane on http://{host}:{port} (data in {directory})", file=sys.stderr)
    serve(app, host, port, settings, on_stopping=lambda: stopping(app),
          say=lambda line: print(f"gg: {line}", file=sys.stderr))
