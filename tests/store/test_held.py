"""What a write transaction holds for its end (gg.store.held): a kind of flight's duration
summary, the row every landing of that kind rewrites, is read and written once a transaction,
at its end, with every duration its units held, and none that a rolled-back unit held. On
PostgreSQL, writers of two replicas landing flights of one kind never wait for each other's
row and never lose each other's durations."""

from __future__ import annotations

import threading

from gg.domain.durations import Summary
from gg.store import open_store
from gg.store.estimates import FLIGHT

from support import wait_until

STORES = ("sqlite", "postgresql")

KIND = ("build", "", "")
OTHER = ("test", "", "")


def _land(store, key: tuple[str, str, str], seconds: float) -> None:
    store.add_duration(FLIGHT, key, seconds, window=50, keep=100, now=1000.0)


def _summary(store, key: tuple[str, str, str]) -> str | None:
    row = store.db.one("SELECT weights FROM durations WHERE what = ? AND title = ? AND "
                       "environment = ? AND agent = ?", (FLIGHT, *key))
    return row[0] if row else None


def _meta(store, key: str, value: str) -> None:
    store.db.run("INSERT INTO meta (key, value) VALUES (?, ?) "
                 "ON CONFLICT(key) DO UPDATE SET value = excluded.value", (key, value))


def test_a_transactions_durations_of_one_kind_fold_into_its_row_once_at_its_end(store_dir,
                                                                                 store_url):
    store = open_store(store_dir, store_url)
    said: list[str] = []
    try:
        store.db.trace(said.append)
        with store.atomic():
            _land(store, KIND, 3.0)
            _land(store, OTHER, 40.0)
            _land(store, KIND, 5.0)
            _land(store, KIND, 700.0)
            _meta(store, "after the landings", "written")
        store.db.trace(None)
        assert _summary(store, KIND) == Summary().add(3.0, 50).add(5.0, 50).add(700.0, 50).to_json()
        assert _summary(store, OTHER) == Summary().add(40.0, 50).to_json()
        durations = [i for i, s in enumerate(said) if "durations" in s]
        # one read and one write of each kind's row (and the bound's trim of a new kind)
        assert sum("SELECT weights FROM durations" in said[i] for i in durations) == 2, said
        assert sum("INSERT INTO durations" in said[i] for i in durations) == 2, said
        written = max(i for i, s in enumerate(said) if "INSERT INTO meta" in s)
        assert min(durations) > written, said  # at the transaction's end, after its work
    finally:
        store.db.trace(None)
        store.close()


def test_a_rolled_back_unit_or_block_takes_its_durations_back(store_dir, store_url):
    """A unit's first block (no savepoint of its own: the unit's is rewound), a block after
    a change (its own savepoint), and a whole unit that fails: what each held goes with it;
    what the units kept is folded."""
    store = open_store(store_dir, store_url)
    try:
        def first_block_fails() -> None:
            try:
                with store.atomic():
                    _land(store, KIND, 900.0)
                    raise ValueError("the block fails")
            except ValueError:
                pass
            _land(store, KIND, 2.0)

        def later_block_fails() -> None:
            _meta(store, "changed", "first")
            try:
                with store.atomic():
                    _land(store, KIND, 800.0)
                    raise ValueError("the block fails")
            except ValueError:
                pass
            _land(store, KIND, 4.0)

        def unit_fails() -> None:
            _land(store, KIND, 600.0)
            raise ValueError("the unit fails")

        store.db.submit(first_block_fails).result(30)
        store.db.submit(later_block_fails).result(30)
        failed = store.db.submit(unit_fails)
        assert isinstance(failed.exception(30), ValueError)
        assert _summary(store, KIND) == Summary().add(2.0, 50).add(4.0, 50).to_json()
    finally:
        store.close()


def test_writers_of_two_replicas_fold_one_kind_without_waiting_and_lose_neither(tmp_path, pg_url):
    """Replica A's write transaction holds a landing of a kind and stays open (its group's
    other units run); replica B lands a flight of the same kind meanwhile and commits at
    once, not after A's commit (nor failing its lock wait). A then folds its own into what B
    committed."""
    a = open_store(tmp_path / "a", pg_url)  # PostgreSQL alone: SQLite has one writer
    b = open_store(tmp_path / "b", pg_url)
    holding, release, failed = threading.Event(), threading.Event(), []

    def replica_a() -> None:
        try:
            with a.atomic():
                _land(a, KIND, 10.0)
                _meta(a, "a", "open")
                holding.set()
                release.wait(timeout=120)
        except Exception as exc:  # noqa: BLE001 - told to the test below
            failed.append(exc)

    thread = threading.Thread(target=replica_a)
    try:
        thread.start()
        wait_until(holding.is_set, what="A's transaction to hold a landing")
        _land(b, KIND, 20.0)  # a transaction of its own: committed while A's is open
        assert _summary(b, KIND) == Summary().add(20.0, 50).to_json()
        assert thread.is_alive() and not failed
        release.set()
        thread.join(timeout=60)
        assert not failed, failed
        assert _summary(a, KIND) == Summary().add(20.0, 50).add(10.0, 50).to_json()
    finally:
        release.set()
        thread.join(timeout=60)
        a.close()
        b.close()
