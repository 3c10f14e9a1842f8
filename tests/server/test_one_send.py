"""A response leaves in one send: writes of one turn of the loop joined, in order, and
nothing held back past a close or sent after an abort."""

from __future__ import annotations

import asyncio

from gg.server.one_send import OneSend


class Wire:
    """A transport that records what it is asked to send (asyncio's interface)."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.closed = self.aborted = False

    def write(self, data: bytes) -> None:
        assert not self.closed
        self.sent.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = self.aborted = True

    def get_write_buffer_size(self) -> int:
        return 0

    def get_extra_info(self, name, default=None):
        return {"peername": ("127.0.0.1", 1)}.get(name, default)


def test_writes_in_one_turn_leave_together_and_in_order():
    async def go():
        wire = Wire()
        out = OneSend(wire, asyncio.get_running_loop())
        out.write(b"head ")
        out.write(b"")
        out.write(b"body")
        assert wire.sent == [] and out.get_write_buffer_size() == 9
        await asyncio.sleep(0)
        out.writelines([b"next ", b"answer"])
        await asyncio.sleep(0)
        return wire.sent, out.get_extra_info("peername")

    assert asyncio.run(go()) == ([b"head body", b"next answer"], ("127.0.0.1", 1))


def test_a_close_sends_what_is_held_first_and_an_abort_drops_it():
    async def go():
        closing, aborting = Wire(), Wire()
        loop = asyncio.get_running_loop()
        one, two = OneSend(closing, loop), OneSend(aborting, loop)
        one.write(b"last words")
        one.close()
        two.write(b"never")
        two.abort()
        await asyncio.sleep(0)  # the turn's flush finds nothing left to send
        return closing, aborting

    closing, aborting = asyncio.run(go())
    assert closing.sent == [b"last words"] and closing.closed
    assert aborting.sent == [] and aborting.aborted
