"""The hooks' outbox, delivered: a background task of the server POSTs each undelivered
row to its hook's URL (and to no other: redirects are not followed), signed as
gg.domain.hooks says, and records the answer through gg.control.hooks.

Rows are written in the transaction that records their event, so an event is never lost:
rows left undelivered by a stop or a crash are picked up when the server starts again.
A row counts as delivered only once its receiver answered 2xx (at least once), and a
flight's next row to a hook waits until its previous one was delivered (in order).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import httpx

from gg import __version__
from gg.control import duties as duty_ops
from gg.control import hooks as hook_ops
from gg.control.core import Core
from gg.domain import hooks as rules

log = logging.getLogger("gg.server")

BATCH = 16  # rows sent at once (each of a different flight, or of none)
PRUNE_BATCH = 200  # old delivered rows forgotten at once
PRUNE_EVERY = 60.0  # seconds between two such batches
MAX_ERROR = 200  # characters of a failed attempt's error kept for `gg hook show`


class Outbox:
    def __init__(self, core: Core):
        self.core = core
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._pruned_at = 0.0
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
                                     headers={"user-agent": f"gg/{__version__}"}) as http:
            while True:
                if self.duties is not None and not self.duties.holds(duty_ops.HOOKS):
                    await asyncio.sleep(self.core.settings.hook_poll)  # another replica delivers
                    continue
                try:
                    rows = hook_ops.due(self.core, BATCH)
                    if rows:
                        await asyncio.gather(*(self._send(http, row) for row in rows))
                        continue
                    if self.core.now() - self._pruned_at >= PRUNE_EVERY:  # idle: off the hot path
                        self._pruned_at = self.core.now()
                        hook_ops.prune(self.core, PRUNE_BATCH)
                    await self._sleep()
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # a busy store must not end the deliveries
                    log.warning("hooks: %s: %s", type(exc).__name__, exc)
                    await self._sleep()

    async def _sleep(self) -> None:
        wait = self.core.settings.hook_poll
        due = hook_ops.next_due(self.core)
        if due is not None:
            wait = min(wait, max(0.0, due - self.core.now()))
        self._wake.clear()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout=wait)

    async def _send(self, http: httpx.AsyncClient, row: dict) -> None:
        payload = bytes(row["body"])
        event = rules.NAME_OF.get(row["kind"], row["kind"])
        headers = {"content-type": "application/json",
                   rules.SIGNATURE_HEADER: rules.signature(row["secret"], payload),
                   rules.DELIVERY_HEADER: row["id"], rules.EVENT_HEADER: event,
                   rules.TIMESTAMP_HEADER: str(int(self.core.now()))}
        status, error = None, None
        try:
            response = await http.post(row["url"], content=payload, headers=headers)
            status = response.status_code
        except Exception as exc:  # refused, timed out, a URL httpx cannot use: try again later
            error = (f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)[:MAX_ERROR]
        if not hook_ops.answered(self.core, row, status=status, error=error):
            log.info("hook %s: delivery %s (%s) not delivered: %s", row["hook_id"], row["id"],
                     event, status if status is not None else error)


