"""The poller: the control plane calls each attached pull-mode runner (docs/runner-modes.md).

A background task of the server (started and stopped with it, like the hooks' outbox). Every
CHECK_IN_INTERVAL, and soon after a flight becomes ready, it polls every attached runner at
once: ``poll`` (its check-in, the leases it holds, its outbox), then the same use cases a
dial-out runner's requests run (:func:`gg.control.pull.polled`), then ``deliver`` (their
answers, renewals and grants). A runner that does not answer, or whose answer is not signed
by the key pinned at attach, is not renewed: its leases run out by the clock and its flights
are offered again by the ordinary expiry rules.

Every request is signed with the control plane's key (kept in the store) over the key
fingerprint of the runner it is for, the method, path, a timestamp, a nonce and the body's
digest (gg.domain.pull); every answer must be
signed with the runner's key over its status, that nonce, a timestamp and its body's digest.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from urllib.parse import urlsplit

import httpx

from gg import __version__
from gg.api.pull import Polled
from gg.control import duties as duty_ops
from gg.control import pull as pull_ops
from gg.control.core import Core
from gg.control.people import require_admin
from gg.domain import pull as rules
from gg.domain.identity import key_fingerprint
from gg.domain.people import Person
from gg.domain.runners import Runner
from gg.error_codes import ErrorCode
from gg.errors import GGError
from gg.server.off_loop import off_loop

log = logging.getLogger("gg.server")

MIN_GAP = rules.MIN_POLL_GAP  # seconds between two polls of one runner woken by ready flights


class PullFailed(GGError):
    """A listening runner could not be reached, or its answer was not its own."""

    status = 409
    code = ErrorCode.RUNNER_UNREACHABLE


class Link:
    """Signed calls to listening runners."""

    def __init__(self, core: Core):
        self.core = core
        self._key = None

    async def key(self):
        """The control plane's signing key (from the store, read once, on a worker thread)."""
        if self._key is None:
            self._key = await off_loop(pull_ops.signing_key, self.core)
        return self._key

    async def call(self, http: httpx.AsyncClient, url: str, path: str, body: dict | None, *,
                   runner_key: str | None) -> dict:
        """POST (or GET without a body) ``path`` on the runner at ``url``, signed; the answer,
        checked against ``runner_key`` (None: against the key the answer itself carries, for
        the key exchange at attach). The request is signed for ``runner_key``'s fingerprint,
        so no other runner would take it. PullFailed when unreachable, refused or not signed."""
        method = "GET" if body is None else "POST"
        payload = b"" if body is None else json.dumps(body, default=str).encode()
        meant_for = rules.ANYONE if runner_key is None else key_fingerprint(runner_key)
        if meant_for is None:  # checked at attach; a request signed for no key is refused
            raise PullFailed(f"the runner at {url} holds no Ed25519 key this server can sign for")
        headers, nonce = pull_ops.signed_headers(await self.key(), method, path, body=payload,
                                                  now=time.time(), meant_for=meant_for)
        headers.update({"content-type": "application/json", "user-agent": f"gg/{__version__}"})
        try:
            response = await http.request(method, url.rstrip("/") + path, content=payload,
                                          headers=headers)
        except Exception as exc:  # refused, timed out, or an address httpx cannot use
            raise PullFailed(f"the runner at {url} could not be reached: "
                             f"{type(exc).__name__}") from None
        try:
            data = response.json()
        except ValueError:
            raise PullFailed(f"the runner at {url} did not answer in JSON "
                             f"(HTTP {response.status_code})") from None
        signer = runner_key if runner_key is not None else (data or {}).get("public_key")
        if not pull_ops.answer_signed(signer, status=response.status_code, nonce=nonce,
                                      headers=response.headers, body=response.content,
                                      now=time.time(),
                                      skew=self.core.settings.pull_signature_skew):
            raise PullFailed(f"the answer from {url} is not signed by the runner's key")
        if response.status_code >= 400:
            message = ((data or {}).get("error") or {}).get("message") or "refused"
            raise PullFailed(f"the runner at {url} refused: {message}")
        return data

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(timeout=self.core.settings.pull_timeout, trust_env=False,
                                 follow_redirects=False)


class Poller:
    def __init__(self, core: Core):
        self.core = core
        self.link = Link(core)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._pokes: dict[str, asyncio.Event] = {}  # runner id -> "poll it now"
        self._wanted: set[str] = set()
        self.duties = None  # gg.server.duties.Duties: with replicas, one of them polls
        core.signals.on_ready.append(self.poke)
        core.signals.on_takers.append(self.poke)

    def poke(self) -> None:
        """A flight became ready, or a runner may take one: poll soon rather than at the next
        interval."""
        if self._loop is not None and self._wake is not None:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._wake.set)

    async def attach(self, person: Person, *, url: str, name: str,
                     fingerprint: str | None) -> dict:
        """``gg runner attach``: fetch the runner's key (signed over our nonce, so it holds the
        private half), check and pin it, hand it the control plane's key, register the row."""
        require_admin(person)
        async with self.link.client() as http:
            got = await self.link.call(http, url, rules.KEY_PATH, None, runner_key=None)
            public_key = str(got.get("public_key") or "")
            found = await off_loop(pull_ops.check_attach, self.core, person, name=name,
                                   public_key=public_key, fingerprint=fingerprint)
            pin = {"control_key": await off_loop(pull_ops.public_control_key, self.core),
                   "name": name}
            await self.link.call(http, url, rules.ATTACH_PATH, pin, runner_key=public_key)
        runner = await self.core.run(pull_ops.attach, person, name=name, url=url,
                                     public_key=public_key)
        self.poke()  # its first check-in now, not at the next interval
        return await off_loop(pull_ops.attached, self.core, runner, found)

    async def run(self) -> None:
        """Keep one polling task per attached runner (a slow or unreachable runner delays
        only its own polls), started when it is attached and ended when it is no longer
        polled (forgotten, or retired and holding nothing)."""
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        tasks: dict[str, asyncio.Task] = {}
        async with self.link.client() as http:
            try:
                while True:
                    try:
                        if self.duties is not None and not self.duties.holds(duty_ops.PULL):
                            wanted: dict[str, Runner | None] = {}  # another replica polls them
                        else:
                            wanted = {r.id: r for r in
                                      await off_loop(self.core.store.pull_runners)}
                    except Exception as exc:  # a busy store must not end the polling
                        log.warning("pull: %s: %s", type(exc).__name__, exc)
                        wanted = {rid: None for rid in tasks}
                    self._wanted = set(wanted)
                    for rid, task in list(tasks.items()):
                        if task.done():
                            del tasks[rid]
                    for rid in wanted:
                        if rid not in tasks:
                            self._pokes[rid] = asyncio.Event()
                            tasks[rid] = asyncio.create_task(self._keep_polling(http, rid))
                    for event in self._pokes.values():
                        if self._wake.is_set():
                            event.set()
                    self._wake.clear()
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(self._wake.wait(),
                                               timeout=self.core.settings.check_in_interval)
            finally:
                for task in tasks.values():
                    task.cancel()
                for task in tasks.values():
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await task

    async def _keep_polling(self, http: httpx.AsyncClient, runner_id: str) -> None:
        """Poll one runner every CHECK_IN_INTERVAL; while it flies (it holds a lease or has
        something to send), every PULL_BUSY_INTERVAL, so its output and hand-backs arrive
        promptly; at once when a flight becomes ready (at most every MIN_GAP)."""
        settings = self.core.settings
        poke = self._pokes[runner_id]
        busy = False
        while runner_id in self._wanted:
            started = time.monotonic()
            runner = await off_loop(self.core.store.runner, runner_id)
            if runner is None:
                return
            # A poll that did not get through keeps the pace of the last one that did: a
            # runner that held a lease is tried again soon, while its lease can be renewed
            busy = await self.poll(http, runner, busy)
            wait = settings.pull_busy_interval if busy else settings.check_in_interval
            poke.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(poke.wait(), timeout=wait)
            gap = MIN_GAP - (time.monotonic() - started)
            if gap > 0:
                await asyncio.sleep(gap)

    async def poll(self, http: httpx.AsyncClient, runner: Runner, busy: bool = False) -> bool:
        """One poll of one runner; whether it is busy (it holds a lease or had something to
        send). An unreachable runner is as busy as it was (``busy``): nothing is recorded,
        nothing renewed."""
        if not runner.url:
            return False
        try:
            data = await self.link.call(http, runner.url, rules.POLL_PATH,
                                        {"runner": runner.id, "name": runner.name},
                                        runner_key=runner.public_key)
            answer = Polled.model_validate(data)
            delivery = await pull_ops.polled(self.core, runner, answer,
                                             urlsplit(runner.url).hostname)
            await self.link.call(http, runner.url, rules.DELIVER_PATH, delivery,
                                 runner_key=runner.public_key)
            return bool(answer.held or answer.outbox or delivery["grants"])
        except PullFailed as exc:
            log.info("pull: runner %s: %s", runner.name, exc.message)
        except Exception as exc:  # a bad answer is one runner's problem, not the poller's
            log.warning("pull: runner %s: %s: %s", runner.name, type(exc).__name__, exc)
        return busy
