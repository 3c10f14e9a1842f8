"""Refuse oversized bodies with 413 before they are read into memory."""

from __future__ import annotations

import json

from starlette.exceptions import HTTPException

from gg.error_codes import ErrorCode


class BodyLimit:
    """ASGI middleware: a body above ``max_bytes`` is answered 413, declared or streamed.

    A declared ``Content-Length`` is refused before anything is read; a streamed body is
    counted as it arrives and refused (through the JSON error handler) once it passes the
    limit, so memory stays bounded either way.
    """

    def __init__(self, app, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or _streamed(scope):
            return await self.app(scope, receive, send)
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    return await _refuse(send, 400, ErrorCode.BAD_REQUEST,
                                         "Content-Length is not a number")
                if declared > self.max_bytes:
                    return await _refuse(send, 413, ErrorCode.TOO_LARGE, self._message())
        seen = 0

        async def limited_receive():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise HTTPException(413, self._message())
            return message

        await self.app(scope, limited_receive, send)

    def _message(self) -> str:
        return f"the request body is larger than {self.max_bytes} bytes"


def _streamed(scope) -> bool:
    """An artifact's upload: spooled to disk as it arrives and capped by the flight's own
    artifact limit (gg.server.routes.artifacts), never held in memory."""
    return (scope.get("method") == "PUT"
            and scope.get("path", "").startswith("/v1/runner/flights/")
            and "/artifacts/" in scope.get("path", ""))


async def _refuse(send, status: int, code: str, message: str) -> None:
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
