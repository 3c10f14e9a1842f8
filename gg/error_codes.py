"""Every error code gg says, named once: ``{"error": {"code": ..., "message": ...}}``.

A ``StrEnum``, so a code crosses the wire as its value, unchanged. The server raises a class
of the error tree (``gg.errors``) with one of these; the client turns each back into a class
of its own (``gg.refusals``), which callers catch instead of comparing strings.
tests/test_error_codes.py holds every code the source says to this enum.
"""

from __future__ import annotations

from enum import StrEnum


class ErrorCode(StrEnum):
    # The error tree's own (gg.errors), each its class's default.
    BAD_REQUEST = "bad_request"  # 400
    UNAUTHORIZED = "unauthorized"  # 401, opaque
    FORBIDDEN = "forbidden"  # 403
    NOT_FOUND = "not_found"  # 404, also "not yours"
    CONFLICT = "conflict"  # 409
    LEASE_SUPERSEDED = "lease_superseded"  # 409: another runner holds the flight now
    GONE = "gone"  # 410
    TOO_LARGE = "too_large"  # 413
    TOO_MANY_REQUESTS = "too_many_requests"  # 429
    UNAVAILABLE = "unavailable"  # 503: not now, try again
    INSUFFICIENT_STORAGE = "insufficient_storage"  # 503: the control plane's disk is full
    DATABASE_UNAVAILABLE = "database_unavailable"  # 503: the database is away

    # The framework's refusals, in the one shape (gg.server.errors, connections, limits).
    INVALID_REQUEST = "invalid_request"  # 400: the body's model refused it
    METHOD_NOT_ALLOWED = "method_not_allowed"  # 405
    REQUEST_TIMEOUT = "request_timeout"  # 408: the body did not arrive in time
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"  # 415
    INTERNAL = "internal"  # 500: a bug
    ERROR = "error"  # any other status, or the runner's own listener failing

    # A use case's refusals.
    RUNNER_RETIRED = "runner_retired"  # 403: the runner is retired; it stops for good
    FLIGHT_ENDED = "flight_ended"  # 409: nothing more is stored for it
    FLIGHT_FINAL = "flight_final"  # 409: it ended; nothing can change it now
    OUTPUT_CAPPED = "output_capped"  # 413: its output reached its limit
    ILLEGAL_TRANSITION = "illegal_transition"  # 409: no such change from its stage
    RUNNER_NAME_TAKEN = "runner_name_taken"
    RUNNER_OFFLINE = "runner_offline"
    RUNNER_BUSY = "runner_busy"
    RUNNER_MODE_TAKEN = "runner_mode_taken"
    RUNNER_UNREACHABLE = "runner_unreachable"  # a pull-mode runner did not answer
    FINGERPRINT_MISMATCH = "fingerprint_mismatch"
    MEMBER_NOT_RENEWED = "member_not_renewed"
    ATTENDED_NEEDS_RUNNER = "attended_needs_runner"
    ENVIRONMENT_UNSERVED = "environment_unserved"
    INVALID_NAME = "invalid_name"
    INVALID_LABEL = "invalid_label"
    INVALID_TIMEOUT = "invalid_timeout"
    TIMEOUT_TOO_LONG = "timeout_too_long"
    INVALID_APPROVER = "invalid_approver"
    NO_APPROVAL = "no_approval"
    APPROVAL_CHANGED = "approval_changed"
    NOTHING_TO_FORCE = "nothing_to_force"
    NOT_A_SERVICE = "not_a_service"
    NOT_IN_FORCE = "not_in_force"
    IN_USE = "in_use"
    PLAN_CHANGED = "plan_changed"
    POOL_MAINTAINED = "pool_maintained"  # sent by servers before several maintainers per pool
    CONSOLE_REFUSED = "console_refused"
    CONSOLE_UNSUPPORTED = "console_unsupported"
    CONSOLE_FLIGHT_NOT_FLYING = "console_flight_not_flying"
    CONSOLE_NOT_WAITING = "console_not_waiting"
    INVALID_AIRSPACE = "invalid_airspace"  # an airspace file refused, with file/line/key
    INVALID_MEANING = "invalid_meaning"
    IMAGE_INVALID = "image_invalid"
    DRIVER_FAILED = "driver_failed"  # a pool driver's command failed

    # Said by the client itself, never by the server.
    UNREACHABLE = "unreachable"  # no control plane answered
    HTTP_ERROR = "http_error"  # an answer without the one error shape (a proxy's page)
