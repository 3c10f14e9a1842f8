"""The control plane's refusals as the client raises them: one class per error code.

::

    GGError (gg.errors)
     +-- ApiError                 the control plane refused a request (status, code, message)
          +-- RunnerRetired, FlightEnded, OutputCapped, LeaseSuperseded, ...  one per code
          +-- ServerFault         it answered 5xx: it could not serve the request then
               +-- Internal
               +-- Unavailable
                    +-- InsufficientStorage, DatabaseUnavailable

:func:`refusal` maps an answer's code to its class in one table (as httpx maps transport
errors to its own classes), so callers catch ``RunnerRetired``, never compare strings; every
class is an ``ApiError``, so ``except ApiError`` still catches them all. A code this client
does not know (a newer server's) is a plain ``ApiError`` (``ServerFault`` for a 5xx), and so
are ``error`` and ``http_error``, which name no particular refusal. These are the client's
classes: the server raises those of ``gg.errors``, whose names some of these share.
"""

from __future__ import annotations

from gg.error_codes import ErrorCode
from gg.errors import GGError


class ApiError(GGError):
    """The control plane refused a request: its status, code and one-sentence message."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(message, code=code)
        self.status = status


class ServerFault(ApiError):
    """The control plane answered 5xx: it could not serve the request then (its disk full,
    its database away, a bug), which says nothing about the request itself."""


class BadRequest(ApiError):
    code = ErrorCode.BAD_REQUEST


class Unauthorized(ApiError):
    code = ErrorCode.UNAUTHORIZED


class Forbidden(ApiError):
    code = ErrorCode.FORBIDDEN


class NotFound(ApiError):
    code = ErrorCode.NOT_FOUND


class Conflict(ApiError):
    code = ErrorCode.CONFLICT


class LeaseSuperseded(ApiError):
    code = ErrorCode.LEASE_SUPERSEDED


class Gone(ApiError):
    code = ErrorCode.GONE


class TooLarge(ApiError):
    code = ErrorCode.TOO_LARGE


class TooManyRequests(ApiError):
    code = ErrorCode.TOO_MANY_REQUESTS


class Unavailable(ServerFault):
    code = ErrorCode.UNAVAILABLE


class InsufficientStorage(Unavailable):
    code = ErrorCode.INSUFFICIENT_STORAGE


class DatabaseUnavailable(Unavailable):
    code = ErrorCode.DATABASE_UNAVAILABLE


class InvalidRequest(ApiError):
    code = ErrorCode.INVALID_REQUEST


class MethodNotAllowed(ApiError):
    code = ErrorCode.METHOD_NOT_ALLOWED


class RequestTimeout(ApiError):
    code = ErrorCode.REQUEST_TIMEOUT


class UnsupportedMediaType(ApiError):
    code = ErrorCode.UNSUPPORTED_MEDIA_TYPE


class Internal(ServerFault):
    code = ErrorCode.INTERNAL


class RunnerRetired(ApiError):
    code = ErrorCode.RUNNER_RETIRED


class FlightEnded(ApiError):
    code = ErrorCode.FLIGHT_ENDED


class FlightFinal(ApiError):
    code = ErrorCode.FLIGHT_FINAL


class OutputCapped(ApiError):
    code = ErrorCode.OUTPUT_CAPPED


class IllegalTransition(ApiError):
    code = ErrorCode.ILLEGAL_TRANSITION


class RunnerNameTaken(ApiError):
    code = ErrorCode.RUNNER_NAME_TAKEN


class RunnerOffline(ApiError):
    code = ErrorCode.RUNNER_OFFLINE


class RunnerBusy(ApiError):
    code = ErrorCode.RUNNER_BUSY


class RunnerModeTaken(ApiError):
    code = ErrorCode.RUNNER_MODE_TAKEN


class RunnerUnreachable(ApiError):
    code = ErrorCode.RUNNER_UNREACHABLE


class FingerprintMismatch(ApiError):
    code = ErrorCode.FINGERPRINT_MISMATCH


class MemberNotRenewed(ApiError):
    code = ErrorCode.MEMBER_NOT_RENEWED


class AttendedNeedsRunner(ApiError):
    code = ErrorCode.ATTENDED_NEEDS_RUNNER


class EnvironmentUnserved(ApiError):
    code = ErrorCode.ENVIRONMENT_UNSERVED


class InvalidName(ApiError):
    code = ErrorCode.INVALID_NAME


class InvalidLabel(ApiError):
    code = ErrorCode.INVALID_LABEL


class InvalidTimeout(ApiError):
    code = ErrorCode.INVALID_TIMEOUT


class TimeoutTooLong(ApiError):
    code = ErrorCode.TIMEOUT_TOO_LONG


class InvalidApprover(ApiError):
    code = ErrorCode.INVALID_APPROVER


class NoApproval(ApiError):
    code = ErrorCode.NO_APPROVAL


class ApprovalChanged(ApiError):
    code = ErrorCode.APPROVAL_CHANGED


class NothingToForce(ApiError):
    code = ErrorCode.NOTHING_TO_FORCE


class NotAService(ApiError):
    code = ErrorCode.NOT_A_SERVICE


class NotInForce(ApiError):
    code = ErrorCode.NOT_IN_FORCE


class InUse(ApiError):
    code = ErrorCode.IN_USE


class PlanChanged(ApiError):
    code = ErrorCode.PLAN_CHANGED


class PoolMaintained(ApiError):
    code = ErrorCode.POOL_MAINTAINED


class ConsoleRefused(ApiError):
    code = ErrorCode.CONSOLE_REFUSED


class ConsoleUnsupported(ApiError):
    code = ErrorCode.CONSOLE_UNSUPPORTED


class ConsoleFlightNotFlying(ApiError):
    code = ErrorCode.CONSOLE_FLIGHT_NOT_FLYING


class ConsoleNotWaiting(ApiError):
    code = ErrorCode.CONSOLE_NOT_WAITING


class InvalidAirspace(ApiError):
    code = ErrorCode.INVALID_AIRSPACE


class InvalidMeaning(ApiError):
    code = ErrorCode.INVALID_MEANING


class ImageInvalid(ApiError):
    code = ErrorCode.IMAGE_INVALID


class DriverFailed(ApiError):
    code = ErrorCode.DRIVER_FAILED


_BY_CODE: dict[str, type[ApiError]] = {kind.code: kind for kind in (
    BadRequest, Unauthorized, Forbidden, NotFound, Conflict,
    LeaseSuperseded, Gone, TooLarge, TooManyRequests, Unavailable,
    InsufficientStorage, DatabaseUnavailable, InvalidRequest, MethodNotAllowed, RequestTimeout,
    UnsupportedMediaType, Internal, RunnerRetired, FlightEnded, FlightFinal,
    OutputCapped, IllegalTransition, RunnerNameTaken, RunnerOffline, RunnerBusy,
    RunnerModeTaken, RunnerUnreachable, FingerprintMismatch, MemberNotRenewed, AttendedNeedsRunner,
    EnvironmentUnserved, InvalidName, InvalidLabel, InvalidTimeout, TimeoutTooLong,
    InvalidApprover, NoApproval, ApprovalChanged, NothingToForce, NotAService,
    NotInForce, InUse, PlanChanged, PoolMaintained, ConsoleRefused,
    ConsoleUnsupported, ConsoleFlightNotFlying, ConsoleNotWaiting, InvalidAirspace, InvalidMeaning,
    ImageInvalid, DriverFailed,
)}


def refusal(status: int, code: str, message: str) -> ApiError:
    """The exception for an answer's status, code and message (see the module docstring)."""
    kind = _BY_CODE.get(code, ApiError)
    if (status >= 500) != issubclass(kind, ServerFault):  # a class only where the status agrees
        kind = ServerFault if status >= 500 else ApiError
    return kind(status, code, message)
