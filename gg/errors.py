"""The error tree every layer shares.

::

    GGError                       (code, message; maps to one HTTP status and one exit code)
     +-- BadRequest               400 bad_request / invalid_*        -- malformed input
     +-- Unauthorized             401 unauthorized                   -- opaque, no detail
     +-- Forbidden                403 forbidden                      -- known caller, not allowed
     +-- NotFound                 404 not_found                      -- also "not yours"
     +-- Conflict                 409 conflict / lease_superseded /  -- the world moved on
     |                                flight_ended / ...
     +-- Gone                     410 gone                           -- retired
     +-- TooLarge                 413 too_large
     +-- TooManyRequests          429 too_many_requests              -- try again later
     +-- Unavailable              503 unavailable                    -- not now: try again
          +-- InsufficientStorage     503 insufficient_storage      -- the disk is full
          +-- DatabaseUnavailable     503 database_unavailable      -- the database is away

The server maps these to ``{"error": {"code", "message"}}`` in one place
(``gg.server.errors``); the client turns that body back into ``ApiError``; the CLI maps
either to one line on stderr and an exit code (``gg.cli.exits``).
"""

from __future__ import annotations

from gg.error_codes import ErrorCode


class GGError(Exception):
    status = 400
    code: str = ErrorCode.BAD_REQUEST  # an ErrorCode member, or a code a caller names

    def __init__(self, message: str, *, code: str | None = None):
        super().__init__(message)
        self.message = message
        if code:
            self.code = code


class BadRequest(GGError):
    status = 400
    code = ErrorCode.BAD_REQUEST


class Unauthorized(GGError):
    status = 401
    code = ErrorCode.UNAUTHORIZED

    def __init__(self, message: str = "the token was not accepted", *, code: str | None = None):
        super().__init__(message, code=code)


class Forbidden(GGError):
    status = 403
    code = ErrorCode.FORBIDDEN


class NotFound(GGError):
    status = 404
    code = ErrorCode.NOT_FOUND


class Conflict(GGError):
    status = 409
    code = ErrorCode.CONFLICT


class LeaseSuperseded(Conflict):
    code = ErrorCode.LEASE_SUPERSEDED

    def __init__(self, message: str = "this lease was superseded: another runner holds the flight now"):
        super().__init__(message)


class Gone(GGError):
    status = 410
    code = ErrorCode.GONE


class TooLarge(GGError):
    status = 413
    code = ErrorCode.TOO_LARGE


class TooManyRequests(GGError):
    status = 429
    code = ErrorCode.TOO_MANY_REQUESTS


class Unavailable(GGError):
    """The control plane cannot serve the request right now, and stored nothing of it: a
    fault of its host, never of the caller. Clients retry it (gg.client)."""

    status = 503
    code = ErrorCode.UNAVAILABLE


class InsufficientStorage(Unavailable):
    code = ErrorCode.INSUFFICIENT_STORAGE

    def __init__(self, message: str = "the control plane's disk is full, so nothing was stored; "
                                      "try again once its operator has freed space",
                 *, code: str | None = None):
        super().__init__(message, code=code)


class DatabaseUnavailable(Unavailable):
    code = ErrorCode.DATABASE_UNAVAILABLE

    def __init__(self, message: str = "the database is unavailable, so nothing was stored; "
                                      "try again shortly", *, code: str | None = None):
        super().__init__(message, code=code)
