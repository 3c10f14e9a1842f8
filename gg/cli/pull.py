"""``gg runner up --listen`` and ``gg runner attach``: pull-mode runners (docs/runner-modes.md)."""

from __future__ import annotations

import os
import socket
from typing import Optional

import typer

from gg import config
from gg.cli.context import CliError, client, emit_json, parse_labels, run_until_signalled, say
from gg.cli.exits import Exit
from gg.cli.runners import runner_app


def register(app: typer.Typer) -> None:
    """``attach`` joins the ``gg runner`` group that :mod:`gg.cli.runners` owns."""


def listen_up(listen: str, *, name: str | None, labels: str | None, workers: int,
              grace: float, size: dict | None = None) -> int:
    """Serve a pull-mode runner on ``listen`` (HOST:PORT) until stopped."""
    from gg.runner.listen import ListeningRunner
    from gg.runner.pull import PullOptions, PullRunner
    from gg.settings import Settings

    host, sep, port = listen.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise CliError(f"--listen takes HOST:PORT, like 0.0.0.0:7400 (got {listen!r})",
                       Exit.USAGE)
    try:  # a bad GG_* setting is the operator's to mend: one sentence, as for gg server
        settings = Settings.from_env()
    except ValueError as exc:
        raise CliError(str(exc), Exit.USAGE) from None
    options = PullOptions(host=host.strip("[]"), port=int(port), state_dir=config.state_dir(),
                          name=name or socket.gethostname().split(".")[0],
                          labels=parse_labels(labels or os.environ.get("GG_RUNNER_LABELS")),
                          workers=workers, grace=grace, hidden=[config.config_dir()],
                          size=size)
    try:
        return run_until_signalled(ListeningRunner(PullRunner(options, say=say, settings=settings)))
    except OSError as exc:
        raise CliError(f"cannot listen on {listen}: {exc.strerror or exc}", Exit.FAILURE) \
            from None


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
