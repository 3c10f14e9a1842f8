"""What every command needs: the resolved server, a client, and the output helpers."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from typing import Any

from gg import config
from gg.cli.exits import Exit
from gg.errors import GGError


class CliError(GGError):
    """A refusal decided on this side (bad flag, not signed in): one sentence, an exit code."""

    def __init__(self, message: str, exit_code: Exit = Exit.USAGE):
        super().__init__(message)
        self.exit_code = int(exit_code)


@dataclass
class Globals:
    server: str | None = None
    debug: bool = False


STATE = Globals()


def settings() -> config.Config:
    try:
        return config.load()
    except ValueError as exc:
        raise CliError(str(exc), Exit.USAGE) from None


def server_url(required: bool = True) -> str | None:
    url = config.resolve_server(STATE.server, settings())
    if url is None and required:
        raise CliError("no control plane chosen: pass --server URL, set GG_SERVER, "
                       "or sign in with gg login --server URL", Exit.USAGE)
    return url.rstrip("/") if url else None


def client(auth: bool = True):
    from gg.client import Client

    cfg = settings()
    token = config.resolve_token(cfg) if auth else None
    if auth and not token:
        raise CliError("not signed in: gg login --server URL --token-file FILE", Exit.UNAUTHORIZED)
    return Client(server_url(), token)


def plain(value: Any) -> Any:
    """A client's answer (a ``gg.api`` model, or a list of them) as the JSON values the server
    sent: what ``--json`` prints and what the tables read."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", by_alias=True)
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def emit_json(value: Any) -> None:
    value = plain(value)
    sys.stdout.write(json.dumps(value, indent=2, sort_keys=True, default=str) + "\n")


def ago(ts: float | None, now: float | None = None) -> str:
    if ts is None:
        return "never"
    delta = (now or time.time()) - ts
    if abs(delta) < 1:
        return "just now"
    if delta < 0:
        return f"in {_span(-delta)}"
    return f"{_span(delta)} ago"


def _span(seconds: float) -> str:
    if seconds < 1:
        return "now"
    if seconds < 90:
        return f"{seconds:.0f}s"
    if seconds < 5400:
        return f"{seconds / 60:.0f}m"
    if seconds < 172800:
        return f"{seconds / 3600:.0f}h"
    return f"{seconds / 86400:.0f}d"


def console():
    from rich.console import Console

    return Console()


def table(*columns: str):
    from rich.table import Table

    t = Table(box=None, pad_edge=False, header_style="bold")
    for column in columns:
        t.add_column(column)
    return t


def parse_labels(text: str | None) -> dict[str, str]:
    if not text:
        return {}
    from gg.domain.labels import parse_labels as parse

    try:
        return parse(text)
    except ValueError as exc:
        raise CliError(f"--labels: {exc}", Exit.USAGE) from None


def say(line: str) -> None:
    """A long-running process's log line: time, then the sentence."""
    print(f"{time.strftime('%H:%M:%S')} {line}", flush=True)


def run_until_signalled(process) -> int:
    """Run a runner or maintainer until it stops by itself or SIGTERM/Ctrl-C asks it to."""
    import signal

    def stop(signum, frame):
        process.request_stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    return process.run()
