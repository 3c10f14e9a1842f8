"""``gg console R [--flight F] [-- CMD]``: an interactive terminal on runner R.

The console is opened with one request (refused there with one sentence: docs/console.md,
"Who may"), then this terminal dials the console's WebSocket at the control plane and waits
for the runner to dial in too. Once it has, this terminal is put in raw mode: every key
(Ctrl-C included) goes to the runner's PTY as typed, its output comes back as it is written,
and a window resize (SIGWINCH) is sent on. gg exits with the remote command's status.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import threading
from typing import Any, List, Optional

import typer

from gg.api import consoles as wire
from gg.cli.context import CliError, client
from gg.cli.exits import Exit

READ_BYTES = 4096


def register(app: typer.Typer) -> None:
    app.command("console")(console)


def console(
    runner: str = typer.Argument(..., metavar="RUNNER", help="Runner id or name."),
    command: Optional[List[str]] = typer.Argument(
        None, metavar="[-- CMD...]", help="The command to run (default: a shell)."),
    flight: Optional[str] = typer.Option(None, "--flight", metavar="F",
                                         help="Join attended flight F's workspace and sandbox."),
) -> None:
    """An interactive terminal on a runner, relayed through the control plane (its owner's; an
    admin's for organisation and open ones)."""
    api = client()
    rows, cols = _size()
    opened = api.open_console({"runner": runner, "command": list(command or []), "flight": flight,
                               "term": _term(), "rows": rows, "cols": cols})
    sys.stderr.write(opened.waiting + "\n")
    sys.stderr.flush()
    ws = api.dial_console(opened.id, "person")
    raise typer.Exit(Session(ws).run())


class Session:
    """This terminal's side: keys out, the screen in, until the command's status arrives."""

    def __init__(self, ws) -> None:
        self.ws = ws
        self.stdin = sys.stdin.fileno()
        self.stdout = sys.stdout.fileno()
        self.tty = os.isatty(self.stdin)
        self.saved: list[Any] | None = None  # the terminal's modes while raw
        self.errors: list[str] = []

    def run(self) -> int:
        status: int | None = None
        previous = None
        try:
            for message in self.ws:
                if isinstance(message, bytes):
                    _write_all(self.stdout, message)
                    continue
                value = _json(message)
                if wire.JOINED in value:
                    self._raw()
                    previous = signal.signal(signal.SIGWINCH, self._resized)
                    self._resized()  # the size may have changed while it waited
                    threading.Thread(target=self._keys, name="console-keys", daemon=True).start()
                elif wire.ERROR in value:
                    self.errors.append(str(value[wire.ERROR]))
                elif wire.EXIT in value and isinstance(value[wire.EXIT], int):
                    status = value[wire.EXIT]
                    break
        except Exception:  # the connection broke: said below, from what was heard
            pass
        finally:
            if previous is not None:
                signal.signal(signal.SIGWINCH, previous)
            self._restore()
            try:
                self.ws.close()
            except Exception:
                pass
        if status is not None:
            for sentence in self.errors:  # said by the runner before the status (a flight ended)
                sys.stderr.write(sentence + "\n")
            return status
        if self.errors:  # refused, or the runner never joined: one sentence, no status
            raise CliError("; ".join(self.errors), Exit.FAILURE)
        raise CliError("the console's connection ended before the command's status arrived",
                       Exit.UNREACHABLE)

    def _raw(self) -> None:
        if not self.tty or self.saved is not None:
            return
        import termios
        import tty

        self.saved = termios.tcgetattr(self.stdin)
        tty.setraw(self.stdin, termios.TCSADRAIN)  # keys typed while it waited are kept

    def _restore(self) -> None:
        if self.saved is None:
            return
        import termios

        termios.tcsetattr(self.stdin, termios.TCSADRAIN, self.saved)
        self.saved = None

    def _resized(self, *_args) -> None:
        rows, cols = _size()
        try:
            self.ws.send(json.dumps({wire.RESIZE: [rows, cols]}))
        except Exception:
            pass

    def _keys(self) -> None:
        while True:
            try:
                data = os.read(self.stdin, READ_BYTES)
            except OSError:
                return
            if not data:
                return
            try:
                self.ws.send(data)
            except Exception:
                return


def _size() -> tuple[int, int]:
    try:
        size = os.get_terminal_size(sys.stdout.fileno())
        return max(1, size.lines), max(1, size.columns)
    except OSError:
        fallback = shutil.get_terminal_size()
        return max(1, fallback.lines), max(1, fallback.columns)


def _term() -> str:
    term = os.environ.get("TERM", "xterm")
    return term if term and all(c.isalnum() or c in "._+-" for c in term) else "xterm"


def _json(text: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
