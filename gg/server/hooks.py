"""The hooks' outbox, delivered: a background task of the server POSTs each undelivered
row to its hook's URL (and to no other: redirects are not followed), signed as
gg.domain.hooks says, and records the answer through gg.control.hooks.

Rows are written in the transaction that records their event, so an event is never lost:
rows left undelivered by a stop or a crash are picked up when the server starts again.
A row counts as delivered only once its receiver answered 2xx (at least once), and a
flight's next row to a hook waits until its previous one was delivered (in order).

Every delivery is bounded, and none waits for another. One attempt (connect, send, the
whole answer) ends at HOOK_TIMEOUT, and at most HOOK_ANSWER_LIMIT bytes of the answer are
read: a receiver that answers without end, or a byte at a time, costs the server that
much memory and that long, and the attempt fails and is tried again as any other. Each
row is sent by a task of its own, at most PER_HOOK at once to one hook and AT_ONCE in all,
so a receiver that hangs holds up only its own deliveries, never another hook's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from functools import partial

import httpx

from gg import __version__
from gg.control import duties as duty_ops
from gg.control import hooks as hook_ops
from gg.control.core import Core
from gg.domain import hooks as rules
from gg.server.off_loop import off_loop

log = logging.getLogger("gg.server")

PER_HOOK = 4  # rows sent to one hook at once (each of a different flight, or of none)
AT_ONCE = 64  # rows sent at once, all hooks together
PRUNE_BATCH = 200  # old delivered rows forgotten at once
PRUNE_EVERY = 60.0  # seconds between two such batches
MAX_ERROR = 200  # characters of a failed attempt's error kept for `gg hook show`


class AnswerTooLong(Exception):
    """The receiver's answer went past HOOK_ANSWER_LIMIT: the attempt failed."""


class Outbox:
    def __init__(self, core: Core):
        self.core = core
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._pruned_at = 0.0
        self._sending: dict[int, asyncio.Task] = {}  # the rows being sent, by seq
        self._hook_of: dict[int, str] = {}  # their hooks
        self.duties = None  # gg.server.duties: with replicas, one of them delivers
        core.signals.on_event.append(self.poke)
        core.signals.on_missed.append(self.poke)

    def poke(self) -> None:
        """An event was recorded: look at the outbox now rather than at the next poll."""
        if self._loop is not None and self._wake is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed
                self._loop.call_soon_threadsafe(self._wake.set)

    async def run(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        settings = self.core.settings
        async with httpx.AsyncClient(timeout=settings.hook_timeout, follow_redirects=False,
                                     trust_env=False,
                                     limits=httpx.Limits(max_connections=AT_ONCE),
                                     headers={"user-agent": f"gg/{__version__}"}) as http:
            try:
                await self._deliver(http)
            finally:  # stopping: the attempts under way end with it, and are tried again
                for task in list(self._sending.values()):
                    task.cancel()
                await asyncio.gather(*self._sending.values(), return_exceptions=True)

    async def _deliver(self, http: httpx.AsyncClient) -> None:
        while True:
            if self.duties is not None and not self.duties.holds(duty_ops.HOOKS):
                await asyncio.sleep(self.core.settings.hook_poll)  # another replica delivers
                continue
            try:
                if await self._start(http):
                    continue
                if not self._sending and self.core.now() - self._pruned_at >= PRUNE_EVERY:
                    self._pruned_at = self.core.now()  # idle: off the hot path
                    await self.core.run(hook_ops.prune, PRUNE_BATCH)
                await self._sleep()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a busy store must not end the deliveries
                log.warning("hooks: %s: %s", type(exc).__name__, exc)
                await self._sleep()

    def _busy(self) -> set[str]:
        """Hooks sending as many rows as they may at once."""
        counts: dict[str, int] = {}
        for hook_id in self._hook_of.values():
            counts[hook_id] = counts.get(hook_id, 0) + 1
        return {hook_id for hook_id, n in counts.items() if n >= PER_HOOK}

    async def _start(self, http: httpx.AsyncClient) -> int:
        """Start a task for each due row there is room for; how many were started."""
        room = AT_ONCE - len(self._sending)
        if room <= 0:
            return 0
        busy = self._busy()
        started = 0
        due = await off_loop(hook_ops.due, self.core, room, sending=set(self._sending),
                             busy=set(busy))
        room = AT_ONCE - len(self._sending)  # attempts may have ended meanwhile, not begun
        for row in due[:max(room, 0)]:
            if row["seq"] in self._sending:
                continue
            if row["hook_id"] in busy:
                continue
            seq = row["seq"]
            self._hook_of[seq] = row["hook_id"]
            self._sending[seq] = asyncio.create_task(self._send(http, row))
            self._sending[seq].add_done_callback(partial(self._sent, seq))
            started += 1
            if sum(1 for h in self._hook_of.values() if h == row["hook_id"]) >= PER_HOOK:
                busy.add(row["hook_id"])
        return started

    def _sent(self, seq: int, _task: object = None) -> None:
        """A row's attempt ended (``_task``, the attempt's, is not read): its hook has room
        again, and the row's flight's next row (if it was delivered) may be due."""
        self._sending.pop(seq, None)
        self._hook_of.pop(seq, None)
        if self._wake is not None:
            self._wake.set()

    async def _sleep(self) -> None:
        assert self._wake is not None, "made by run() before it delivers"
        self._wake.clear()  # before looking, so that an attempt ending meanwhile wakes it
        wait = self.core.settings.hook_poll
        if len(self._sending) < AT_ONCE:  # else the next attempt to end wakes it
            due = await off_loop(hook_ops.next_due, self.core, sending=set(self._sending),
                                 busy=self._busy())
            if due is not None:
                wait = min(wait, max(0.0, due - self.core.now()))
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout=wait)

    async def _send(self, http: httpx.AsyncClient, row: dict) -> None:
        payload = bytes(row["body"])
        event = rules.NAME_OF.get(row["kind"], row["kind"])
        headers = {"content-type": "application/json",
                   rules.SIGNATURE_HEADER: rules.signature(row["secret"], payload),
                   rules.DELIVERY_HEADER: row["id"], rules.EVENT_HEADER: event,
                   rules.TIMESTAMP_HEADER: str(int(self.core.now()))}
        settings = self.core.settings
        status, error = None, None
        try:
            status = await asyncio.wait_for(self._post(http, row["url"], payload, headers),
                                            timeout=settings.hook_timeout)
        except asyncio.CancelledError:
            raise
        except asyncio.TimeoutError:
            error = f"no whole answer within {settings.hook_timeout:g}s (GG_HOOK_TIMEOUT)"
        except Exception as exc:  # refused, too long, a URL httpx cannot use: try again later
            error = (f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)[:MAX_ERROR]
        try:
            if not await self.core.run(hook_ops.answered, row, status=status, error=error):
                log.info("hook %s: delivery %s (%s) not delivered: %s", row["hook_id"],
                         row["id"], event, status if status is not None else error)
        except Exception as exc:  # a busy store: the row stays due and is sent again
            log.warning("hooks: %s: %s", type(exc).__name__, exc)

    async def _post(self, http: httpx.AsyncClient, url: str, payload: bytes,
                    headers: dict[str, str]) -> int:
        """The answer's status, once the whole answer (at most HOOK_ANSWER_LIMIT bytes) is
        read; an answer read to its end leaves its connection to be used again."""
        limit = self.core.settings.hook_answer_limit
        async with http.stream("POST", url, content=payload, headers=headers) as response:
            read = 0
            async for chunk in response.aiter_raw():
                read += len(chunk)
                if read > limit:
                    raise AnswerTooLong(f"an answer longer than {limit} bytes "
                                        f"(GG_HOOK_ANSWER_LIMIT)")
            return response.status_code
