"""What every command needs: the resolved server, a client, and the output helpers."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from typing import Any, Literal, overload

from gg import config
from gg.cli.exits import Exit
from gg.errors import GGError


class CliError(GGError):
    """A refusal decided on this side (bad flag, not signed in): one sentence, an exit code."""

    def __init__(self, message: str, exit_code: int = Exit.USAGE):  # an Exit, or a flight's code
        super().__init__(message)
        self.exit_code = int(exit_code)


@dataclass
class Globals:
    server: str | None = None
    debug: bool = False
    scheme_noted: bool = False


STATE = Globals()


def settings() -> config.Config:
    try:
        return config.load()
    except ValueError as exc:
        raise CliError(str(exc), Exit.USAGE) from None


@overload
def server_url(required: Literal[True] = True) -> str: ...
@overload
def server_url(required: bool) -> str | None: ...


def server_url(required: bool = True) -> str | None:
    url = config.resolve_server(STATE.server, settings())
    if url is None and required:
        raise CliError("no control plane chosen: pass --server URL, set GG_SERVER, "
                       "or sign in with gg login --server URL", Exit.USAGE)
    return with_scheme(url.rstrip("/")) if url else None


def with_scheme(url: str) -> str:
    """``localhost:8421`` means ``http://localhost:8421`` (said once on stderr): each of
    several comma-separated URLs gets the scheme it lacks."""
    parts = [part.strip() for part in url.split(",")]
    bare = [part for part in parts if part and "://" not in part]
    if not bare:
        return url
    fixed = ",".join(part if "://" in part or not part else f"http://{part}" for part in parts)
    if not STATE.scheme_noted:
        STATE.scheme_noted = True
        sys.stderr.write(f"note: {', '.join(bare)} has no scheme; using "
                         f"{', '.join('http://' + b for b in bare)}\n")
    return fixed


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


def on_terminal() -> bool:
    return sys.stdout.isatty()


def console():
    """Rich on a terminal (colours unless ``NO_COLOR`` is set); elsewhere (a pipe, a file)
    every value whole, one row a line and no colour, so that grep and cut see what the
    server sent."""
    from rich.console import Console

    if on_terminal():
        return Console()
    return Console(width=PIPE_WIDTH, no_color=True, color_system=None, highlight=False,
                   soft_wrap=False)


PIPE_WIDTH = 100_000  # wider than any row: piped output is never cut or wrapped


def table(*columns: str):
    from rich.table import Table

    t = Table(box=None, pad_edge=False, header_style="bold" if on_terminal() else None)
    for column in columns:
        t.add_column(column, overflow="fold")
    return t


# The colour of a state word in a listing (only on a terminal; NO_COLOR turns it off).
_STATE_STYLES = {
    "landed": "green", "ok": "green", "online": "green", "active": "green",
    "checks passed": "green",
    "flying": "cyan", "ready": "yellow", "gated": "magenta", "cordoned": "yellow",
    "draining": "yellow", "drained": "yellow", "offline": "red", "failed": "red",
    "cancelled": "dim", "retired": "dim", "needs attention": "red",
}


def state(word: str):
    """A state word in its colour (``degraded: …`` and ``N checks failed`` read red)."""
    from rich.text import Text

    style = _STATE_STYLES.get(word)
    if style is None and (word.startswith("degraded") or word.endswith("failed")):
        style = "red"
    return Text(word, style=style or "")


def short(value: str | None, width: int = 19) -> str:
    """An abbreviation for the eye on a terminal; piped, the whole value."""
    if value is None:
        return "-"
    return value[:width] if on_terminal() else value


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


def show_version(value: bool) -> None:
    """``gg --version``: the version, and the build's commit and Python where known."""
    if not value:
        return
    import platform

    import typer

    from gg import __version__

    typer.echo(f"gg {__version__} (Python {platform.python_version()}, "
               f"{sys.platform}-{platform.machine()})")
    raise typer.Exit(0)


def confirm(yes: bool, question: str, verb: str) -> None:
    """Ask before something that cannot be undone: on a terminal, a y/N question; elsewhere
    (a script, a pipe) only ``--yes`` goes ahead, so nothing irreversible happens by accident."""
    if yes:
        return
    if not sys.stdin.isatty():
        raise CliError(f"{verb} cannot be undone and stdin is not a terminal to ask on: "
                       f"pass --yes to {verb} without asking", Exit.USAGE)
    sys.stderr.write(f"{question} [y/N] ")
    sys.stderr.flush()
    answer = sys.stdin.readline().strip().lower()
    if answer not in ("y", "yes"):
        raise CliError(f"not done: {verb} needs a y", Exit.FAILURE)


def _is_time(key: str, value) -> bool:
    """A moment on the wire is Unix seconds under a key ending ``_at`` (``expires_at``,
    ``token_expires_at``): people read it as a local date and time."""
    return (key.rsplit(".", 1)[-1].endswith("_at") and isinstance(value, (int, float))
            and not isinstance(value, bool) and value > 0)


def words(body: dict) -> str:
    """A fact's or an event's body as ``key=value`` words: nested mappings as ``key.sub=v``,
    lists joined by commas, a value with spaces quoted; never a Python dict."""
    out = []

    def walk(prefix: str, value) -> None:
        if isinstance(value, dict):
            if not value and prefix:  # an empty body says nothing, not "=-"
                out.append(f"{prefix}=-")
            for k, v in value.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v)
            return
        if value is None:
            return
        if isinstance(value, (list, tuple)):
            value = ",".join(str(v) for v in value) or "-"
        if _is_time(prefix, value):
            value = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(value))
        text = str(value)
        if not text or any(c.isspace() for c in text):
            text = '"' + text.replace('"', '\\"') + '"'
        out.append(f"{prefix}={text}")

    walk("", body)
    return " ".join(out)


def removed(answer, json_: bool) -> None:
    """Print the answer of a delete: taken down, or on its way and what happens first."""
    if json_:
        emit_json(answer)
        return
    import typer

    if answer.deleted:
        typer.echo(f"{answer.kind} {answer.name} is deleted")
    else:
        typer.echo(f"{answer.kind} {answer.name} is being deleted: {answer.detail}")
