"""The one JSON error shape, ``{"error": {"code": ..., "message": ...}}``, for every error."""

from __future__ import annotations

import logging
import warnings

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from gg.api.schemas import ErrorAnswer
from gg.errors import GGError

log = logging.getLogger("gg.server")

_STATUS_CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
                 405: "method_not_allowed", 409: "conflict", 413: "too_large",
                 415: "unsupported_media_type", 422: "invalid_request", 429: "too_many_requests"}


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


def install(app: FastAPI) -> None:
    @app.exception_handler(GGError)
    async def _gg(request: Request, exc: GGError):
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        return error_response(exc.status, exc.code, exc.message, headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        return error_response(400, "invalid_request", _validation_message(exc))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException):
        code = _STATUS_CODES.get(exc.status_code, "error")
        message = exc.detail if isinstance(exc.detail, str) else code.replace("_", " ")
        return error_response(exc.status_code, code, message)

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception):
        log.error("internal error on %s %s: %s", request.method, request.url.path,
                  type(exc).__name__, exc_info=exc)
        return error_response(500, "internal", "the control plane hit an internal error")


BODY_ALIAS_WARNING = r"The 'alias' attribute with value 'body' was provided"
REFUSALS = {"4XX": {"model": ErrorAnswer, "description": "Refused, in the one error shape"}}


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

    app.openapi = openapi
