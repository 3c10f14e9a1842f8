"""Verdicts of meanings: evaluated in worker processes under a deadline, cached per facts.

A meaning is charted only when its static cost is bounded (``gg.domain.meanings``), but a bound
cannot see everything: a regular expression that backtracks, a runner that reports ten
thousand tools. CEL is Python code, and a Python thread cannot be interrupted (a regular
expression even holds the GIL while it runs), so the control plane never evaluates a
meaning in its own process. A small pool of long-lived worker processes does
(``gg.control.cel.serve``); one that overruns ``GG_MEANING_DEADLINE`` is killed and replaced,
and the verdict reads "took too long" (the label is refuted, ``gg.domain.labels``).

Verdicts are cached per (meaning, digest of the facts it reads) in a bounded LRU, so a
check-in with unchanged facts evaluates nothing, and runners whose relevant facts agree
share one evaluation.

Two ways in:

- :meth:`Verdicts.decide` is synchronous, for the use cases (which run in one transaction).
  On the event loop's thread a cache miss never waits: it answers ``Verdict.PENDING``, and
  ``gg.control.labels.settle`` evaluates the runner's misses off the loop and recomputes
  it, each runner by a task of its own and within its allowance of new facts. Elsewhere
  (a test, a tool) it waits for the worker, at most the deadline.
- :meth:`Verdicts.evaluate` is a coroutine: a daemon thread waits for the worker (at most
  as many threads as workers), so neither the loop nor the server's exit ever waits for CEL.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import select
import subprocess
import sys
import threading
from collections import OrderedDict
from contextlib import contextmanager
from typing import IO, Any, Iterator, Mapping

from gg.domain import allowance
from gg.domain.labels import Verdict
from gg.domain.meanings import Meaning

log = logging.getLogger("gg.server")

CACHE_SIZE = 4096  # verdicts kept; one is a few hundred bytes
WORKERS = 2  # worker processes; the machine's cores are for the server and the database
_START = "from gg.control.cel import serve; serve()"
_STARTUP = 60.0  # seconds a worker may take to import CEL on a loaded machine

Answer = Any  # bool | None | Verdict


def _readable(pipe: IO[bytes], seconds: float) -> bool:
    """Whether ``pipe`` has something to read within ``seconds``. poll, not select: a
    server holding thousands of connections has descriptors past select's 1024."""
    poller = select.poll()
    poller.register(pipe.fileno(), select.POLLIN)
    return bool(poller.poll(max(0.0, seconds) * 1000))


class _Worker:
    """One worker process, asked one question at a time over JSON lines."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _START], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, close_fds=True)
        assert self.proc.stdin is not None and self.proc.stdout is not None  # both piped
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout
        # Starting is not evaluating: the deadline does not apply, a generous bound does.
        if not _readable(self.stdout, _STARTUP) or not self.stdout.readline():
            self.kill()
            raise RuntimeError("the meaning worker did not start")

    def ask(self, meaning: str, facts: dict, deadline: float) -> Answer:
        """The verdict, or TOO_LONG (then this worker is dead: it was killed)."""
        readable = True
        try:
            self.stdin.write(json.dumps({"meaning": meaning, "facts": facts}).encode()
                                  + b"\n")
            self.stdin.flush()
            readable = _readable(self.stdout, deadline)
            line = self.stdout.readline() if readable else b""
        except (OSError, ValueError):
            line = b""
        if not line:  # over the deadline, or the worker died (say, out of memory)
            self.kill()
            return None if readable else Verdict.TOO_LONG
        try:
            verdict = json.loads(line).get("verdict")
        except ValueError:
            verdict = None
        return verdict if verdict in (True, False) else None

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for stream in (self.stdin, self.stdout):
            try:
                stream.close()
            except OSError:
                pass


class Pool:
    """Up to ``size`` workers, started when first needed, replaced when one is killed."""

    def __init__(self, size: int = WORKERS):
        self.size = size
        self._idle: list[_Worker] = []
        self._count = 0
        self._cond = threading.Condition()

    def ask(self, meaning: str, facts: dict, deadline: float) -> Answer:
        """Blocking: wait for a free worker (not counted against the deadline), then ask."""
        worker = self._take()
        try:
            verdict = worker.ask(meaning, facts, deadline)
        finally:
            self._give_back(worker)
        return verdict

    def warm(self) -> None:
        """Start one worker now, so that the first evaluation does not wait for it."""
        self._give_back(self._take())

    def _take(self) -> _Worker:
        with self._cond:
            while not self._idle and self._count >= self.size:
                self._cond.wait()
            if self._idle:
                return self._idle.pop()
            self._count += 1
        try:
            return _Worker()
        except BaseException:
            with self._cond:
                self._count -= 1
                self._cond.notify()
            raise

    def _give_back(self, worker: _Worker) -> None:
        with self._cond:
            if worker.alive:
                self._idle.append(worker)
            else:
                self._count -= 1  # the next _take starts a replacement
            self._cond.notify()

    def close(self) -> None:
        with self._cond:
            idle, self._idle = self._idle, []
            self._count -= len(idle)
        for worker in idle:
            worker.kill()


_POOL: Pool | None = None
_POOL_LOCK = threading.Lock()


def shared_pool() -> Pool:
    """One pool per process: every Core of a test run shares its workers."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = Pool()
        return _POOL


def facts_read(meaning: Meaning, facts: Mapping[str, Any]) -> dict:
    """The part of ``facts`` that ``meaning`` reads: all its verdict depends on."""
    return {name: facts[name] for name in sorted(meaning.facts_used) if name in facts}


def digest(meaning: Meaning, facts: Mapping[str, Any]) -> tuple[str, str]:
    body = json.dumps(facts_read(meaning, facts), sort_keys=True, separators=(",", ":"),
                      default=str)
    return meaning.text, hashlib.sha256(body.encode()).hexdigest()


class Verdicts:
    """The cache and the way to the pool, for one control plane."""

    def __init__(self, deadline: float, *, size: int = CACHE_SIZE, pool: Pool | None = None):
        self.deadline = deadline
        self.size = size
        self.pool = pool
        self._cache: OrderedDict[tuple[str, str], Answer] = OrderedDict()
        self._lock = threading.Lock()
        self._slots: tuple[Any, asyncio.Semaphore] | None = None  # (its loop, it)
        self._inflight: dict[tuple[str, str], asyncio.Future] = {}
        self.evaluations = 0  # how many times a worker was asked (the cache's tests read it)
        # Kept for gg.control.labels.settle, by runner id: the verdicts each runner's latest
        # facts miss, the task that evaluates them and recomputes it, the runners whose task
        # waits for their allowance (gg.domain.allowance), and those allowances.
        self.queued: dict[str, dict[tuple[str, str], tuple[Meaning, dict]]] = {}
        self.tasks: dict[str, asyncio.Task] = {}
        self.held: set[str] = set()
        self.allowances: dict[str, allowance.Allowance] = {}

    def allow(self, runner_id: str, now: float, *, burst: int, every: float) -> float:
        """Spend one of ``runner_id``'s evaluations of new facts: 0 when it may start now,
        else the seconds until it may."""
        current = self.allowances.get(runner_id) or allowance.full(burst, now)
        ok, self.allowances[runner_id] = allowance.take(current, now, burst=burst, every=every)
        if ok:
            return 0.0
        return max(0.001, allowance.next_token_in(current, now, burst=burst, every=every))

    # -- the cache -------------------------------------------------------------------------

    def cached(self, key: tuple[str, str]) -> Answer | Verdict:
        """The cached verdict, or PENDING when there is none."""
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        return Verdict.PENDING

    def _remember(self, key: tuple[str, str], verdict: Answer) -> None:
        with self._lock:
            self._cache[key] = verdict
            self._cache.move_to_end(key)
            while len(self._cache) > self.size:
                self._cache.popitem(last=False)

    # -- evaluation ------------------------------------------------------------------------

    def decide(self, meaning: Meaning, facts: Mapping[str, Any]) -> Answer:
        """The verdict for a use case; never runs CEL on this thread (see the module doc)."""
        key = digest(meaning, facts)
        found = self.cached(key)
        if found is not Verdict.PENDING:
            return found
        if _on_event_loop():  # the caller queues the miss (gg.control.labels.refresh)
            return Verdict.PENDING
        return self._ask(key, meaning, facts_read(meaning, facts))

    async def evaluate(self, meaning: Meaning, facts: Mapping[str, Any]) -> Answer:
        """The verdict, computed in a worker; the same question asked twice at once is
        evaluated once."""
        key = digest(meaning, facts)
        found = self.cached(key)
        if found is not Verdict.PENDING:
            return found
        running = self._inflight.get(key)
        if running is None:
            running = asyncio.ensure_future(self._off_loop(key, meaning,
                                                           facts_read(meaning, facts)))
            self._inflight[key] = running
            running.add_done_callback(lambda _: self._inflight.pop(key, None))
        return await asyncio.shield(running)

    async def _off_loop(self, key: tuple[str, str], meaning: Meaning, facts: dict) -> Answer:
        loop = asyncio.get_running_loop()
        if self._slots is None or self._slots[0] is not loop:
            self._slots = (loop, asyncio.Semaphore(WORKERS))
        async with self._slots[1]:
            done: asyncio.Future = loop.create_future()

            def answer(verdict: Answer) -> None:
                if not done.done():
                    done.set_result(verdict)

            def work() -> None:
                try:
                    verdict = self._ask(key, meaning, facts)
                except Exception as exc:  # noqa: BLE001 -- never leave the loop waiting
                    log.warning("meaning worker: %s: %s", type(exc).__name__, exc)
                    verdict = None
                try:
                    loop.call_soon_threadsafe(answer, verdict)
                except RuntimeError:  # the loop has closed: the server is stopping
                    pass

            threading.Thread(target=work, name="gg-meaning", daemon=True).start()
            return await done

    def _ask(self, key: tuple[str, str], meaning: Meaning, facts: dict) -> Answer:
        if self.pool is None:
            self.pool = shared_pool()
        self.evaluations += 1
        try:
            verdict = self.pool.ask(meaning.text, facts, self.deadline)
        except (OSError, RuntimeError) as exc:  # no worker could start: cannot decide
            log.warning("meaning worker: %s", exc)
            return None
        self._remember(key, verdict)
        return verdict

    def warm(self) -> None:
        """Start a worker from a thread, so the first check-in after start need not wait."""
        def start() -> None:
            try:
                if self.pool is None:
                    self.pool = shared_pool()
                self.pool.warm()
            except (OSError, RuntimeError) as exc:
                log.warning("meaning worker: %s", exc)
        threading.Thread(target=start, name="gg-meaning-warm", daemon=True).start()


_serving = threading.local()  # .loop: the event loop this thread does a use case for


@contextmanager
def for_the_loop(loop: asyncio.AbstractEventLoop) -> Iterator[None]:
    """Decide on this thread as on ``loop``'s (a miss answers PENDING, and
    ``gg.control.labels`` queues it on ``loop``): a use case the loop handed to the writer or
    a worker thread, which must not wait for CEL either."""
    _serving.loop = loop
    try:
        yield
    finally:
        _serving.loop = None


def serving() -> asyncio.AbstractEventLoop | None:
    """The loop this thread decides for (:func:`for_the_loop`), if any."""
    return getattr(_serving, "loop", None)


def _on_event_loop() -> bool:
    if serving() is not None:
        return True
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


__all__ = ["CACHE_SIZE", "Pool", "Verdicts", "WORKERS", "digest", "facts_read", "shared_pool"]
