"""One exit-code enum and the one place that turns an error into a line on stderr."""

from __future__ import annotations

from enum import IntEnum


class Exit(IntEnum):
    OK = 0
    FAILURE = 1  # also: a followed flight failed without an exit code, or was cancelled
    USAGE = 2  # a malformed flag or argument
    UNAUTHORIZED = 3  # no token, or the token was not accepted
    FORBIDDEN = 4  # signed in, but not allowed
    NOT_FOUND = 5
    CONFLICT = 6
    UNREACHABLE = 7  # the control plane did not answer
    SERVER = 8  # the control plane failed (5xx)


def for_status(status: int) -> Exit:
    if status == 0:
        return Exit.UNREACHABLE
    if status == 401:
        return Exit.UNAUTHORIZED
    if status == 403:
        return Exit.FORBIDDEN
    if status in (404, 410):
        return Exit.NOT_FOUND
    if status == 409:
        return Exit.CONFLICT
    if status >= 500:
        return Exit.SERVER
    return Exit.USAGE
