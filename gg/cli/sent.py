"""``gg runner sent``: what this machine's runner has sent, read from its state directory.

No control plane is needed: the log is local (``GG_STATE_DIR/sent.jsonl``), written by the
runner's one client before every request (:mod:`gg.runner.sent`).
"""

from __future__ import annotations

import json
import time

import typer

from gg import config
from gg.cli.context import CliError, emit_json
from gg.cli.exits import Exit
from gg.cli.runners import runner_app


def register(app: typer.Typer) -> None:
    """``sent`` joins the ``gg runner`` group that :mod:`gg.cli.runners` owns."""


@runner_app.command("sent")
def sent(
    json_: bool = typer.Option(False, "--json", help="A JSON array (with --follow: one object a line)."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing what is sent."),
    limit: int = typer.Option(0, "--limit", min=0, metavar="N", help="Only the last N (0: all)."),
) -> None:
    """Every payload this machine's runner sent: path, time and body (secrets scrubbed)."""
    from gg.runner import sent as log

    state = config.state_dir()
    if not state.is_dir():
        raise CliError(f"no runner state directory at {state} (set GG_STATE_DIR)", Exit.NOT_FOUND)
    if follow:
        # Print what the rotated file holds, then the current file from its start: no gap.
        rotated = log.read_rotated(state)
        for entry in rotated[-limit:] if limit else rotated:
            _print(entry, json_)
        try:
            for entry in log.follow(state, from_start=True):
                _print(entry, json_)
        except KeyboardInterrupt:
            return
        return
    entries = log.read(state)
    if limit:
        entries = entries[-limit:]
    if json_:
        emit_json(entries)
        return
    if not entries:
        typer.echo(f"nothing sent yet from {state}")
        return
    for entry in entries:
        _print(entry, False)


def _print(entry: dict, json_: bool) -> None:
    if json_:
        typer.echo(json.dumps(entry, sort_keys=True))
        return
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(entry.get("at", 0)))
    query = ""
    if entry.get("params"):
        query = "?" + "&".join(f"{k}={v}" for k, v in sorted(entry["params"].items()))
    body = "" if entry.get("body") is None else " " + json.dumps(entry["body"], sort_keys=True,
                                                                 separators=(",", ":"))
    typer.echo(f"{when}  {entry.get('method', '?'):<6} {entry.get('path', '?')}{query}{body}")
