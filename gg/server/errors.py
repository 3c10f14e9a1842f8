"""The one JSON error shape, ``{"error": {"code": ..., "message": ...}}``, for every error."""

from __future__ import annotations

import logging
import warnings
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from gg.api.schemas import ErrorAnswer
from gg.error_codes import ErrorCode
from gg.errors import GGError
from gg.store.faults import fault, fault_types

log = logging.getLogger("gg.server")

_STATUS_CODES = {400: ErrorCode.BAD_REQUEST, 401: ErrorCode.UNAUTHORIZED,
                 403: ErrorCode.FORBIDDEN, 404: ErrorCode.NOT_FOUND,
                 405: ErrorCode.METHOD_NOT_ALLOWED, 409: ErrorCode.CONFLICT,
                 413: ErrorCode.TOO_LARGE, 415: ErrorCode.UNSUPPORTED_MEDIA_TYPE,
                 422: ErrorCode.INVALID_REQUEST, 429: ErrorCode.TOO_MANY_REQUESTS}


def error_body(code: str, message: str) -> dict:
    return {"error": {"code": code, "message": message}}


def error_response(status: int, code: str, message: str, headers: dict | None = None) -> JSONResponse:
    return JSONResponse(error_body(code, message), status_code=status, headers=headers)


def _validation_message(exc: RequestValidationError) -> str:
    errors = exc.errors()
    if not errors:
        return "the request is not valid"
    first = errors[0]
    where = ".".join(str(p) for p in first.get("loc", ()) if p not in ("body",))
    msg = str(first.get("msg", "is not valid"))
    if first.get("type") == "json_invalid":
        reason = (first.get("ctx") or {}).get("error")
        return f"the request body is not valid JSON ({reason})" if reason else \
            "the request body is not valid JSON"
    return f"{where}: {msg}" if where else msg


def crash_response(exc: Exception, method: str, path: str) -> JSONResponse:
    """An exception no use case turned into a refusal: a fault of the host (a full disk, the
    database away) is 503 in one sentence and one line in the log, as it is nobody's bug;
    anything else is a bug, logged with its traceback and answered 500."""
    found = fault(exc)
    if found is not None:
        log.warning("%s %s: %s (%s: %s)", method, path, found.code, type(exc).__name__,
                    str(exc).strip().splitlines()[0] if str(exc).strip() else "")
        return error_response(found.status, found.code, found.message)
    log.error("internal error on %s %s: %s", method, path, type(exc).__name__, exc_info=exc)
    return error_response(500, ErrorCode.INTERNAL, "the control plane hit an internal error")


def install(app: FastAPI) -> None:
    @app.exception_handler(GGError)
    async def _gg(request: Request, exc: GGError):
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        return error_response(exc.status, exc.code, exc.message, headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        return error_response(400, ErrorCode.INVALID_REQUEST, _validation_message(exc))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException):
        code = _STATUS_CODES.get(exc.status_code, ErrorCode.ERROR)
        message = exc.detail if isinstance(exc.detail, str) else code.replace("_", " ")
        return error_response(exc.status_code, code, message)

    async def _fault(request: Request, exc: Exception):
        return crash_response(exc, request.method, request.url.path)

    # The classes a fault of the host is raised as get a handler of their own: the one for
    # Exception runs in Starlette's outermost middleware, which logs the traceback again.
    for kind in fault_types():
        app.add_exception_handler(kind, _fault)

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception):
        return crash_response(exc, request.method, request.url.path)


BODY_ALIAS_WARNING = r"The 'alias' attribute with value 'body' was provided"
REFUSALS: dict[int | str, dict[str, Any]]  # FastAPI's responses=, keyed by status
REFUSALS = {"4XX": {"model": ErrorAnswer, "description": "Refused, in the one error shape"}}


def quiet_framework_warnings() -> None:
    """FastAPI names every request body with an alias ("body") that pydantic 2.12+ reports as
    unused each time it builds a route's validator (when the schema is written, and lazily at
    the first request a route validates): a warning about FastAPI's own field, nothing of
    gg's, which put its block in every server log. Ignored for the server's process."""
    warnings.filterwarnings("ignore", message=BODY_ALIAS_WARNING)


def document(app: FastAPI) -> None:
    """The published schema says what is answered: a request that fails validation is
    answered 400 in the one error shape (every operation documents ``4XX``), never 422."""
    build = app.openapi

    def openapi() -> dict:
        if app.openapi_schema is None:
            with warnings.catch_warnings():
                # FastAPI names every request body with an alias ("body") that pydantic 2.12+
                # reports as unused while it writes the schema: a warning about FastAPI's own
                # field, nothing of gg's, which filled every server log with its block.
                warnings.filterwarnings("ignore", message=BODY_ALIAS_WARNING)
                schema = build()
            for item in schema.get("paths", {}).values():
                for operation in item.values():
                    operation.get("responses", {}).pop("422", None)
            for unused in ("HTTPValidationError", "ValidationError"):
                schema.get("components", {}).get("schemas", {}).pop(unused, None)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented way to replace it
