"""Every HTML answer carries the console's Content-Security-Policy and frame protection.

The console's pages set them themselves (:func:`gg.web.guard.secured`); this is the net under
every other HTML the server might answer (a framework's page, an error page), so nothing on
the console's origin can load a script from elsewhere or be framed by another site. The API's
own documentation is only ``/openapi.json``: no page of Swagger UI or ReDoc is served, since
both load their scripts from a public CDN (docs/server.md).
"""

from __future__ import annotations

from gg.web.guard import HEADERS

_ADDED = [(name.lower().encode(), value.encode()) for name, value in HEADERS.items()]


class HtmlGuard:
    """ASGI middleware: an HTML answer missing the console's headers gets them."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def guarded(message):
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                kind = next((v for k, v in headers if k.lower() == b"content-type"), b"")
                if kind.lower().startswith(b"text/html"):
                    present = {k.lower() for k, _ in headers}
                    headers += [(k, v) for k, v in _ADDED if k not in present]
                    message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, guarded)
