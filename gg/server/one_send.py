"""A response leaves in one send: the writes made in one turn of the event loop are joined.

uvicorn writes a response's head and its body with two ``transport.write`` calls, and each
leaves at once as a send of its own (the socket has ``TCP_NODELAY``): two system calls and
two segments for every answer, and a client that wakes for the head and reads again for the
body. On loopback the kernel's work for a segment is done by the sender, so for the small
answers of the hot path (a claim, a renewal, a hand-back, an open) the second send was a
fifth of the server's CPU. :class:`OneSend` wraps the connection's transport: a write is
held until the end of the current turn of the loop and sent with whatever else was written
in that turn. Nothing is reordered or lost: closing sends what is held first, aborting drops
it with the connection.
"""

from __future__ import annotations

import asyncio
from typing import Any


class OneSend:
    """``transport``, with the writes of one turn of ``loop`` sent together."""

    __slots__ = ("_transport", "_loop", "_held")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: list[bytes] | None = None

    def write(self, data: bytes) -> None:
        if not data:
            return
        if self._held is None:
            self._held = [data]
            self._loop.call_soon(self.flush)
        else:
            self._held.append(data)

    def writelines(self, lines) -> None:
        for data in lines:
            self.write(data)

    def flush(self) -> None:
        held, self._held = self._held, None
        if held and not self._transport.is_closing():
            self._transport.write(held[0] if len(held) == 1 else b"".join(held))

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def abort(self) -> None:
        self._held = None
        self._transport.abort()

    def get_write_buffer_size(self) -> int:
        held = self._held
        return self._transport.get_write_buffer_size() + (sum(map(len, held)) if held else 0)

    def __getattr__(self, name: str) -> Any:  # the rest is the transport's own
        return getattr(self._transport, name)
