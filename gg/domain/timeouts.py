"""Run-time limits: how long a flight may run, and the words for it.

A flight's limit is fixed when it is opened (:func:`limit_for`): what ``gg fly --timeout``
asked, else its environment's default from the root envelope, else the server's maximum
(``GG_FLIGHT_TIMEOUT_MAX``; 0 means none). Asking for more than the maximum is refused; an
environment default above it is held to it. The limit counts from the grant of each
attempt: the runner stops the flight when it runs past it and hands it back ``failed`` with
:func:`timed_out_reason`; ``gg show`` reads what is left from :func:`time_left`.
"""

from __future__ import annotations

import math

from gg.error_codes import ErrorCode
from gg.errors import BadRequest

_PARTS = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))


def describe(seconds: float) -> str:
    """A duration as people read it: ``500ms``, ``1.5s``, ``2s``, ``1m 20s``, ``1d 2h``."""
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    if seconds < 60 and seconds != int(seconds):  # one decimal: 5.3s, never 5.34274s
        return f"{round(seconds, 1):g}s"
    left = round(seconds)
    words = []
    for unit, size in _PARTS:
        count, left = divmod(left, size)
        if count:
            words.append(f"{count}{unit}")
    return " ".join(words)


def limit_for(asked: float | None, default: float | None, maximum: float) -> float | None:
    """The limit of a new flight in seconds (None: no limit), or BadRequest.

    ``asked`` is ``--timeout``; ``default`` its environment's ``timeout:`` in the root
    envelope; ``maximum`` the server's (0: none).
    """
    if asked is not None:
        if not asked > 0:
            raise BadRequest("--timeout must be longer than 0s", code=ErrorCode.INVALID_TIMEOUT)
        if maximum and asked > maximum:
            raise BadRequest(f"--timeout {describe(asked)} is longer than this server allows "
                             f"(at most {describe(maximum)})", code=ErrorCode.TIMEOUT_TOO_LONG)
        return asked
    if default is not None:
        return min(default, maximum) if maximum else default
    return maximum or None


def timed_out_reason(limit: float) -> str:
    """The ended reason of a flight its runner stopped at its limit."""
    return f"timed out after {describe(limit)}"


def time_left(limit: float | None, granted_at: float | None, now: float) -> float | None:
    """Seconds a flying flight may still run (never below 0); None when it has no limit."""
    if limit is None or granted_at is None:
        return None
    return max(0.0, granted_at + limit - now)


def time_left_sentence(left: float) -> str:
    """``gg show``'s words for :func:`time_left`."""
    if left <= 0:
        return "ran past its limit: its runner is stopping it"
    return f"may run {describe(math.ceil(left))} more"
