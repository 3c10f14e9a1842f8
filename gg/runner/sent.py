"""The sent log: every payload this runner puts on the wire, kept where its owner can read it.

What leaves the machine is what ``gg runner sent`` shows. The one client calls
:meth:`SentLog.record` before every attempt (``Client(on_send=...)``), so no request can
escape the log by taking another path. One JSON object per line::

    {"at": 1715000000.1, "method": "POST", "path": "/v1/runner/check-in",
     "params": null, "body": {...}}

Never logged: the Authorization header (the hook does not receive it) and anything that looks
like a gg secret. A string holding ``ggp_``/``ggr_``/``gge_``/``ggm_`` followed by token
characters is rewritten to ``ggr_[scrubbed sha256:…]`` (the token's public fingerprint), and
the value of any key named like a secret (``credential``, ``token``, ``secret``,
``password``) is replaced by ``[scrubbed]``. Nothing a runner sends today carries such a
value; the scrub is there so that a future payload cannot leak one into a readable file.

The file is ``STATE_DIR/sent.jsonl``, mode 0600, rotated to ``sent.jsonl.1`` when it passes
``max_bytes`` (one rotated file is kept), so the log is bounded at about twice that.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gg.domain.tokens import PREFIXES, fingerprint

LOG_NAME = "sent.jsonl"
MAX_BYTES = 2_000_000
SECRET_KEYS = frozenset({"credential", "token", "secret", "password", "authorization"})
SCRUBBED = "[scrubbed]"
_TOKEN = re.compile("(" + "|".join(re.escape(p) for p in PREFIXES) + r")[A-Za-z0-9_\-]{8,}")
# A key named like a secret, as json.dumps writes one (a JSON key is a quoted string then ':').
_SECRET_KEY = re.compile(r'"(?:' + "|".join(sorted(SECRET_KEYS)) + r')"\s*:', re.IGNORECASE)


# The Kelvin sign as json.dumps escapes it: a key holding it may lower-case to a secret's name
_LOWERS_TO_ASCII = "\\u212a"


def scrub_text(text: str) -> str:
    return _TOKEN.sub(lambda m: f"{m.group(1)}[scrubbed {fingerprint(m.group(0))}]", text)


def scrub(value: Any) -> Any:
    """A copy of ``value`` with every secret-looking string replaced."""
    if isinstance(value, str):
        return scrub_text(value)
    if isinstance(value, dict):
        return {k: (SCRUBBED if isinstance(k, str) and k.lower() in SECRET_KEYS
                    and isinstance(v, str) else scrub(v))
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub(v) for v in value]
    return value


def scrubbed_line(entry: dict) -> bytes:
    """``entry`` as one JSON line, scrubbed as :func:`scrub` would scrub it. A token is
    found by one pass over the line (its characters are never escaped in JSON); the values are
    walked one by one only when a key named like a secret is in it, which nothing a runner
    sends has today, or when the line holds the one escape that may hide such a key."""
    text = json.dumps(entry, sort_keys=True, default=str)
    # an escape may hide a key that lower-cases to a secret's name (written to\u212aen: the
    # Kelvin sign's lower case is k, the one character outside ASCII whose lower case is
    # ASCII): then the values are walked too. Any other escape (a flight's output in another
    # script) cannot, and keeps the one pass
    if _SECRET_KEY.search(text) or _LOWERS_TO_ASCII in text:
        text = json.dumps(scrub(entry), sort_keys=True, default=str)
    return (scrub_text(text) + "\n").encode()


def log_path(state_dir: Path) -> Path:
    return Path(state_dir) / LOG_NAME


class SentLog:
    def __init__(self, state_dir: Path, *, max_bytes: int = MAX_BYTES,
                 clock=time.time) -> None:
        self.path = log_path(state_dir)
        self.max_bytes = max_bytes
        self.clock = clock
        self._lock = threading.Lock()

    def record(self, method: str, path: str, params: dict | None, body: Any) -> None:
        """The client's ``on_send`` hook. A failure to write is never a reason to stop."""
        line = scrubbed_line({"at": self.clock(), "method": method, "path": path,
                              "params": params or None, "body": body})
        try:
            with self._lock:
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                try:
                    os.fchmod(fd, 0o600)
                    os.write(fd, line)
                    size = os.fstat(fd).st_size
                finally:
                    os.close(fd)
                if size > self.max_bytes:
                    os.replace(self.path, self.path.with_name(LOG_NAME + ".1"))
        except OSError:
            pass


def _lines(path: Path) -> Iterator[dict]:
    try:
        with open(path, "rb") as fh:
            for raw in fh:
                entry = _parse(raw)
                if entry is not None:
                    yield entry
    except FileNotFoundError:
        return


def _parse(raw: bytes) -> dict | None:
    try:
        entry = json.loads(raw)
    except ValueError:
        return None  # a line cut short by a crash
    return entry if isinstance(entry, dict) else None


def read_rotated(state_dir: Path) -> list[dict]:
    """The entries of the rotated (older) file only."""
    return list(_lines(log_path(state_dir).with_name(LOG_NAME + ".1")))


def read(state_dir: Path) -> list[dict]:
    """Every entry still kept, oldest first."""
    return [*read_rotated(state_dir), *_lines(log_path(state_dir))]


def follow(state_dir: Path, *, stop: threading.Event | None = None, interval: float = 0.2,
           from_start: bool = False) -> Iterator[dict]:
    """Entries as they are written, across rotations.

    Starts at the end of the current file, or at its beginning with ``from_start`` (then
    ``read`` of the rotated file plus this gives everything, with no gap between the two).
    """
    stop = stop or threading.Event()
    path = log_path(state_dir)
    fh = None
    inode = None
    pending = b""
    first = True
    try:
        while not stop.is_set():
            if fh is None:
                try:
                    fh = open(path, "rb")
                except FileNotFoundError:
                    first = False
                    stop.wait(interval)
                    continue
                inode = os.fstat(fh.fileno()).st_ino
                if first and not from_start:
                    fh.seek(0, os.SEEK_END)
                first = False
            chunk = fh.read()
            if not chunk:
                try:
                    rotated = os.stat(path).st_ino != inode
                except FileNotFoundError:
                    rotated = True
                if rotated:
                    chunk = fh.read()  # whatever was written just before the rotation
                    fh.close()
                    fh = None
                elif not stop.wait(interval):
                    continue
            pending += chunk
            *complete, pending = pending.split(b"\n")
            for raw in complete:
                entry = _parse(raw)
                if entry is not None:
                    yield entry
            if fh is None:
                pending = b""
    finally:
        if fh is not None:
            fh.close()
