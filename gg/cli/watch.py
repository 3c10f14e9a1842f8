"""``--watch``: a listing drawn again in place until the operator presses q or Ctrl-C.

The listing is read from the control plane every WATCH_EVERY seconds (a changed answer is
drawn at once); while the control plane is away the last picture stays with one line saying
so. Only on a terminal: piped output is a listing, not an animation.
"""

from __future__ import annotations

import os
import select
import sys
import time
from typing import Callable

from gg.cli.context import CliError, on_terminal
from gg.cli.exits import Exit
from gg.errors import GGError

WATCH_EVERY = 2.0  # seconds between two readings of the listing
QUIT_KEYS = ("q", "Q")


def watch(render: Callable[[], object], what: str) -> None:
    """Draw ``render()`` again and again until q or Ctrl-C; ``what`` names the listing."""
    if not (on_terminal() and sys.stdin.isatty()):
        raise CliError(f"--watch draws on a terminal; piped, run gg {what} (or --json) "
                       "again instead", Exit.USAGE)
    from rich.console import Group
    from rich.live import Live
    from rich.text import Text

    from gg.cli.context import console

    def frame():
        footer = Text(f"{time.strftime('%H:%M:%S')} gg {what}: every {WATCH_EVERY:g}s; "
                      "q or Ctrl-C quits", style="dim")
        try:
            body = render()
        except GGError as exc:
            body = Text(f"cannot read {what} now: {exc.message}", style="red")
        return Group(body, footer)

    with _keys() as key, Live(frame(), console=console(), auto_refresh=False,
                              screen=False, transient=False) as live:
        try:
            while True:
                pressed = key(WATCH_EVERY)
                if pressed in QUIT_KEYS:
                    return
                live.update(frame(), refresh=True)
        except KeyboardInterrupt:
            return


class _keys:
    """stdin in cbreak mode (a key arrives without Enter, Ctrl-C still interrupts); the
    terminal is put back as it was on the way out."""

    def __enter__(self):
        import termios
        import tty

        self.fd = sys.stdin.fileno()
        self.saved = termios.tcgetattr(self.fd)
        tty.setcbreak(self.fd)
        return self.read

    def read(self, timeout: float) -> str | None:
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return None
        data = os.read(self.fd, 32).decode(errors="replace")
        return data[-1:] if data else None

    def __exit__(self, *exc):
        import termios

        termios.tcsetattr(self.fd, termios.TCSADRAIN, self.saved)
        return False
