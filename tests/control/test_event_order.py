"""The event feed in commit order on PostgreSQL: writers of several replicas commit side by
side, yet a reader following ``seq > after`` never passes an event committed later (an
event's seq is taken at its transaction's end, under the events' turn, so seq order is commit
order); an event undone with its unit is never recorded, and whoever needs the seq inside the
transaction (a hook's delivery row) still gets it."""

from __future__ import annotations

import json

from gg.control import hooks
from gg.domain.events import EventKind
from gg.store import Store

STORES = ("sqlite", "postgresql")  # the hook test runs on both; the others are PostgreSQL's


def _follow(reader: Store, after: int, seen: list[dict]) -> int:
    """One step of a reader following the feed by seq (gg events --follow, the console's
    live tail, a replica's follower): what it reads, and where it reads from next."""
    rows = reader.events(after=after)
    seen.extend(rows)
    return max([after] + [r["seq"] for r in rows])


def test_a_reader_following_by_seq_gets_an_event_whose_transaction_began_first_and_committed_last(
        pg_url):
    """Replica A records an event and has not committed; replica B records one and commits;
    a reader follows the feed between the two commits, then again after A's. It gets both
    events, B's first: the feed's order is the order the transactions committed in."""
    a, b, reader = Store(pg_url, pool_size=1), Store(pg_url, pool_size=1), Store(pg_url, pool_size=1)
    seen: list[dict] = []
    try:
        after = _follow(reader, 0, seen)
        with a.atomic():
            a.add_event("info:test:began-first", 1.0)
            with b.atomic():
                b.add_event("info:test:began-second", 2.0)
            after = _follow(reader, after, seen)  # B committed, A not yet
            assert [r["kind"] for r in seen] == ["info:test:began-second"]
        after = _follow(reader, after, seen)  # A committed
        assert [r["kind"] for r in seen] == ["info:test:began-second", "info:test:began-first"]
        assert [r["kind"] for r in reader.events(after=0)] == \
            ["info:test:began-second", "info:test:began-first"]
    finally:
        for store in (a, b, reader):
            store.close()


def test_an_event_of_a_unit_that_failed_is_never_recorded_and_the_groups_others_are(pg_url):
    """A group commit's unit that records an event and then fails takes its event back with
    its savepoint; the group's other units' events are recorded, in the order of their units."""
    store = Store(pg_url, pool_size=1)
    try:
        def recording(kind: str, fail: bool = False):
            def unit():
                store.add_event(kind, 1.0)
                if fail:
                    raise ValueError(kind)
                return kind
            return unit

        with store.db.writer.lock:  # the writer waits here: the three units go in one group
            futures = [store.db.submit(recording("info:test:one")),
                       store.db.submit(recording("info:test:failed", fail=True)),
                       store.db.submit(recording("info:test:two"))]
        assert [f.exception(30) is None for f in futures] == [True, False, True]
        assert [r["kind"] for r in store.events(after=0)] == ["info:test:one", "info:test:two"]
    finally:
        store.close()


def test_what_needs_an_events_seq_in_its_transaction_gets_the_seq_it_was_recorded_with(pg_url):
    """A step handed the event's seq (a hook's delivery row) runs in the event's own
    transaction and gets the seq the feed shows."""
    store = Store(pg_url, pool_size=1)
    got: list[int] = []
    try:
        with store.atomic():
            store.add_event("info:test:earlier", 1.0)
            store.add_event("info:test:heard", 2.0, then=got.append)
        [_, heard] = store.events(after=0)
        assert heard["kind"] == "info:test:heard" and got == [heard["seq"]]
    finally:
        store.close()


def test_a_hooks_delivery_carries_the_seq_its_event_has_in_the_feed(core, owner):
    hooks.add_hook(core, owner, url="http://127.0.0.1:9/h", on="landed")
    core.event(EventKind.FLIGHT_OPENED, flight_id="f_1")
    core.event(EventKind.FLIGHT_LANDED, flight_id="f_1")
    [landed] = core.store.events(kind=EventKind.FLIGHT_LANDED.value)
    [(event_seq, body)] = core.store.db.all("SELECT event_seq, body FROM hook_deliveries")
    assert event_seq == landed["seq"] == json.loads(bytes(body))["seq"]
