"""The store's writer: one thread that owns the write connection and commits in groups.

Both stores (:mod:`gg.store.sqlite`, :mod:`gg.store.postgres`) run this one loop; what they
do at the edges of a transaction is theirs, behind :class:`TransactionHooks` (begin, commit,
rollback, and the savepoints between). docs/architecture.md, "The write path".

:meth:`Writer.submit` queues a unit of work (a function) for the writer thread, which takes
everything queued (at most GROUP_MAX), begins ONE transaction, runs each unit inside a
savepoint of its own (a unit that raises rolls back only itself and its caller gets the
exception), runs the ``before_commit`` step and the store's last statements
(``TransactionHooks.last``: the held items' folds, gg.store.held, and PostgreSQL's events,
in commit order), then commits once: many changes share one durable flush, and no unit's
future is resolved before that commit returned, so nothing is acknowledged before it is
durable. A unit that succeeded leaves its savepoint to the next
one, which releases it as it makes its own on PostgreSQL (SQLite nests it instead); the commit
releases the last. The ``before_commit`` step takes a savepoint only when ``before_commit_due``
says it has something to do.
On PostgreSQL, where writers of several replicas run side by side, a unit that lost to
another's (a deadlock, a lock waited for too long: ``TransactionHooks.retryable``) is rolled
back to its savepoint and run again in the same group, up to UNIT_TRIES runs
(``WriteTurns.retries``); its caller sees only the last run's outcome.

:meth:`Writer.atomic` works from any thread: it takes the write lock and runs one
transaction of its own there; inside a unit its outermost block is a savepoint of the group
(it rolls back alone, and it is durable when the group commits); blocks inside that join it.
Where the store counts what a transaction changed (SQLite its rows, PostgreSQL its statements
other than reads and what it holds for the commit), that block takes no savepoint
when it begins before its unit changed anything: rolling back to the unit's savepoint (and
keeping it) undoes the same, one statement instead of two a unit.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Protocol

from gg.store import loop_guard

log = logging.getLogger("gg.store")

GROUP_MAX = 256  # units in one group commit (the rest go into the next one)
UNIT_TRIES = 4  # runs of a unit that keeps losing to other replicas' writers (PostgreSQL)

# A step run by the writer inside each group after its units, in a savepoint of its own; it
# returns a function told after the commit whether it held (True) or not (False), or None.
BeforeCommit = Callable[[], "Callable[[bool], None] | None"]


class TransactionHooks(Protocol):
    """What one store does at the edges of a write transaction, on its write connection.
    Called only by the thread holding the writer's lock."""

    def begin(self, durable: bool) -> None:
        """Begin a write transaction that holds the write lock (``durable=False``: its commit
        may skip the durable flush)."""

    def last(self) -> None:
        """The transaction's last statements, after all its work, just before the commit
        (the folds of what its units held, gg.store.held; on PostgreSQL under the events'
        turn, then its events, in commit order, gg.store.event_order)."""

    def commit(self) -> None:
        """Commit the transaction begun (it was durable if it said so)."""

    def rollback(self) -> None:
        """End the transaction without its changes, if one is still open (also after a
        failed ``begin`` or ``commit``); never raises for a transaction already gone."""

    def savepoint(self, name: str, *, release_first: bool = False) -> object:
        """A savepoint ``name`` (after releasing the last one of that name, when
        ``release_first``); a mark handed back to :meth:`rollback_to`."""

    def release(self, name: str) -> None:
        """Keep the savepoint's changes in the transaction."""

    def rollback_to(self, name: str, mark: object) -> None:
        """Undo and release the savepoint (nothing, when the transaction is gone)."""

    def holds(self) -> bool:
        """Whether the transaction is still open (SQLite ends a whole transaction on some
        errors; a PostgreSQL connection may break)."""

    def changes(self) -> int | None:
        """A count of what the transaction changed so far that grows with every change (SQLite:
        rows; PostgreSQL: its statements other than reads, and the events and wake-ups it
        holds for the commit), or None when the store cannot tell. A unit's first block that
        begins before the unit changed anything needs no savepoint of its own: the unit's
        stands for it (:meth:`rewind`)."""

    def rewind(self, name: str) -> None:
        """Undo the savepoint's changes and keep it (only where :meth:`changes` counts)."""

    def retryable(self, exc: BaseException) -> bool:
        """Whether ``exc`` says the unit lost to another writer (PostgreSQL: a deadlock, a
        lock waited for too long): undone by its savepoint, it is run again."""


class WriteTurns:
    """What the writer's group commits cost so far, for ``/metrics``: how many, the units
    they carried, the units run again after losing to another replica's writer, and the
    seconds spent beginning them, running their units, and committing (the durable flush,
    with the transaction's last statements: the held items' folds, gg.store.held, and on
    PostgreSQL its events, and the ``turn`` waited for before them, gg.store.event_order)."""

    __slots__ = ("commits", "units", "retries", "begin", "work", "commit", "turn")

    def __init__(self) -> None:
        self.commits = self.units = self.retries = 0
        self.begin = self.work = self.commit = self.turn = 0.0

    def add(self, units: int, started: float, begun: float, worked: float,
            committed: float) -> None:
        self.commits += 1
        self.units += units
        self.begin += begun - started
        self.work += worked - begun
        self.commit += committed - worked


Queued = tuple[Callable[[], Any], bool, Future]


class Writer:
    """The group-commit writer of one store, over that store's :class:`TransactionHooks`."""

    def __init__(self, hooks: TransactionHooks):
        self.hooks = hooks
        self.lock = threading.RLock()  # held by whoever uses the write connection
        self.before_commit: BeforeCommit | None = None
        # whether the group has a ``before_commit`` step to run (none: no savepoint for it)
        self.before_commit_due: Callable[[], bool] = lambda: True
        self.turns = WriteTurns()
        self._local = threading.local()  # per thread: transaction depth, unit state
        self._queue: queue.SimpleQueue[Queued | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._closed = False

    def in_transaction(self) -> bool:
        """Whether this thread is inside a write transaction (its statements then run on
        the write connection)."""
        return bool(getattr(self._local, "depth", 0))

    def after_commit(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` once what this thread is writing is committed: at once outside a
        transaction; after the outermost block's commit inside one (never, if it rolls
        back); after the group's commit inside a unit of a group. A wake-up raised there
        would otherwise reach a reader before the change it announces is readable."""
        after = getattr(self._local, "after", None)
        if not getattr(self._local, "depth", 0) or after is None:
            fn()
            return
        after.append(fn)

    def _run_after(self, after: list[Callable[[], None]]) -> None:
        for fn in after:
            try:
                fn()
            except Exception:  # noqa: BLE001 - committed: the others are still told
                log.exception("after a commit")

    # -- one transaction, from any thread ---------------------------------------------------

    @contextmanager
    def atomic(self, durable: bool = True) -> Iterator[None]:
        """One write transaction (re-entrant: inner blocks join the outer one; inside a unit
        of a group commit, the outermost block is a savepoint of the group)."""
        local = self._local
        depth = getattr(local, "depth", 0)
        if not depth:
            loop_guard.check()
        if depth and not getattr(local, "unit_top", False):
            local.depth = depth + 1
            try:
                yield
            finally:
                local.depth = depth
            return
        if depth:  # the first block of a unit: a savepoint of the group
            local.unit_top = False
            local.depth = depth + 1
            unchanged = local.unit_changes is not None and self.hooks.changes() == local.unit_changes
            mark = None if unchanged else self.hooks.savepoint("block")
            try:
                yield
            except BaseException:
                if unchanged:  # the unit's savepoint holds nothing else: rewound, kept
                    if self.hooks.holds():
                        self.hooks.rewind("unit")
                else:
                    self.hooks.rollback_to("block", mark)
                raise
            else:
                if not unchanged:
                    self.hooks.release("block")
            finally:
                local.depth = depth
                local.unit_top = True
            return
        with self.lock:
            after: list[Callable[[], None]] = []
            local.after = after
            try:
                self.hooks.begin(durable)
                local.depth = 1
                yield
                self.hooks.last()
                local.depth = 0
                self.hooks.commit()
            except BaseException:
                local.depth = 0
                self.hooks.rollback()
                raise
            finally:
                local.after = None
        self._run_after(after)

    # -- the group commit -------------------------------------------------------------------

    def submit(self, unit: Callable[[], Any], *, durable: bool = True) -> Future:
        """Queue ``unit`` for the writer thread; a future of what it returns (or raises),
        resolved only after the group commit that holds it returned. ``durable=False``: the
        group may commit without the durable flush when every unit in it says so."""
        future: Future = Future()
        if self._closed:
            future.set_exception(RuntimeError("the store is closed"))
            return future
        self._queue.put((unit, durable, future))
        if self._thread is None:
            with self.lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._loop, daemon=True,
                                                    name="gg-store-writer")
                    self._thread.start()
        return future

    def _loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            batch = [item]
            while len(batch) < GROUP_MAX:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    self._queue.put(None)  # stop after this group
                    break
                batch.append(more)
            try:
                self._group(batch)
            except BaseException as exc:  # never leave a caller waiting
                log.exception("group commit failed")
                for _, _, future in batch:
                    if not future.done():
                        future.set_exception(exc)

    def _group(self, batch: list[Queued]) -> None:
        live = [(unit, future) for unit, _, future in batch
                if future.set_running_or_notify_cancel()]
        if not live:
            return
        durable = any(d for _, d, f in batch if f.running())
        outcomes: list[tuple[bool, Any]] = []
        told: Callable[[bool], None] | None = None
        local = self._local
        hooks = self.hooks
        after: list[Callable[[], None]] = []
        with self.lock:
            local.after = after
            try:
                started = time.perf_counter()
                hooks.begin(durable)
                begun = time.perf_counter()
                local.depth = 1
                local.savepoint = False
                for unit, _ in live:
                    outcomes.append(self._unit(unit))
                    if not hooks.holds():
                        raise outcomes[-1][1] if not outcomes[-1][0] else RuntimeError(
                            "the group commit's transaction was lost")
                if self.before_commit is not None and self.before_commit_due():
                    ok, told = self._unit(self.before_commit)
                    if not ok:
                        log.error("the group's last step failed: %r", told)
                        told = None
                worked = time.perf_counter()
                hooks.last()
                local.depth = 0
                hooks.commit()
                self.turns.add(len(live), started, begun, worked, time.perf_counter())
            except BaseException as exc:
                local.depth = 0
                hooks.rollback()
                if told is not None:
                    try:
                        told(False)
                    except Exception:  # noqa: BLE001
                        log.exception("after a failed group commit")
                for _, future in live:
                    future.set_exception(exc)
                return
            finally:
                local.depth = 0
                local.after = None
        self._run_after(after)
        if told is not None:
            try:
                told(True)
            except Exception:  # noqa: BLE001 - the units committed: their callers hear so
                log.exception("after the group commit")
        for (_, future), (ok, value) in zip(live, outcomes, strict=True):
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)

    def _unit(self, unit: Callable[[], Any]) -> tuple[bool, Any]:
        """One unit of the group under a savepoint of its own, which releases the last
        unit's that succeeded (one round trip a unit on PostgreSQL, not two)."""
        local = self._local
        mark = self.hooks.savepoint("unit", release_first=local.savepoint)
        local.savepoint = True
        after = local.after
        told = len(after)
        tries = 0
        while True:
            tries += 1
            local.unit_top = True
            local.unit_changes = self.hooks.changes()
            try:
                value = unit()
            except BaseException as exc:  # noqa: BLE001 - handed to the unit's caller
                local.savepoint = False
                del after[told:]  # what it asked for after the commit went with it
                self.hooks.rollback_to("unit", mark)
                if tries < UNIT_TRIES and self.hooks.holds() and self.hooks.retryable(exc):
                    # it lost to another replica's writer: undone, it runs again
                    self.turns.retries += 1
                    mark = self.hooks.savepoint("unit")
                    local.savepoint = True
                    continue
                return False, exc
            finally:
                local.unit_top = False
                local.unit_changes = None
                local.depth = 1
            return True, value

    def close(self) -> None:
        """Stop the writer thread once the units queued so far are committed."""
        if self._thread is not None and not self._closed:
            self._closed = True
            self._queue.put(None)
            if self._thread is not threading.current_thread():
                self._thread.join(timeout=30)
        self._closed = True
