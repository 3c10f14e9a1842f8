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


class GGError(Exception):
    status = 400
    code = "bad_request"

    def __init__(self, message: str, *, code: str | None = None):
        super().__init__(message)
        self.message = message
        if code:
            self.code = code


class BadRequest(GGError):
    status = 400
    code = "bad_request"


class Unauthorized(GGError):
    status = 401
    code = "unauthorized"

    def __init__(self, message: str = "the token was not accepted", *, code: str | None = None):
        super().__init__(message, code=code)


class Forbidden(GGError):
    status = 403
    code = "forbidden"


class NotFound(GGError):
    status = 404
    code = "not_found"


class Conflict(GGError):
    status = 409
    code = "conflict"


class LeaseSuperseded(Conflict):
    code = "lease_superseded"

    def __init__(self, message: str = "this lease was superseded: another runner holds the flight now"):
        super().__init__(message)


class Gone(GGError):
    status = 410
    code = "gone"


class TooLarge(GGError):
    status = 413
    code = "too_large"


class TooManyRequests(GGError):
    status = 429
    code = "too_many_requests"


class Unavailable(GGError):
    """The control plane cannot serve the request right now, and stored nothing of it: a
    fault of its host, never of the caller. Clients retry it (gg.client)."""

    status = 503
    code = "unavailable"


class InsufficientStorage(Unavailable):
    code = "insufficient_storage"

    def __init__(self, message: str = "the control plane's disk is full, so nothing was stored; "
                                      "try again once its operator has freed space",
                 *, code: str | None = None):
        super().__init__(message, code=code)


class DatabaseUnavailable(Unavailable):
    code = "database_unavailable"

    def __init__(self, message: str = "the database is unavailable, so nothing was stored; "
                                      "try again shortly", *, code: str | None = None):
        super().__init__(message, code=code)
