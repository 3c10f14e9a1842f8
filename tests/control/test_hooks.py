"""The hooks' outbox in the store: a row per hearing hook, written in the event's own
transaction; one flight's rows due one at a time; answers kept; old delivered rows pruned."""

from __future__ import annotations

import pytest

from gg.control import hooks
from gg.domain.events import EventKind
from gg.domain.flight_spec import FlightSpec
from gg.errors import Forbidden

STORES = ("sqlite", "postgresql")  # storage semantics: each test runs on both stores


def _add(core, owner, on="landed,failed", environment=None):
    hook, secret = hooks.add_hook(core, owner, url="http://127.0.0.1:9/h", on=on,
                                  environment=environment)
    return hook


def test_an_event_and_its_outbox_rows_are_one_transaction(core, owner):
    hook = _add(core, owner)
    with pytest.raises(RuntimeError):
        with core.store.atomic():
            core.event(EventKind.FLIGHT_LANDED, flight_id="f_1")
            raise RuntimeError("the use case failed after recording")
    assert hooks.due(core, 10) == []
    core.event(EventKind.FLIGHT_LANDED, flight_id="f_1")
    core.event(EventKind.FLIGHT_OPENED, flight_id="f_1")  # not heard
    [row] = hooks.due(core, 10)
    assert row["hook_id"] == hook["id"] and row["kind"] == EventKind.FLIGHT_LANDED.value


def test_a_flights_next_row_waits_for_its_previous_one_to_be_delivered(core, owner, clock):
    _add(core, owner)
    core.event(EventKind.FLIGHT_FAILED, flight_id="f_1")
    core.event(EventKind.FLIGHT_LANDED, flight_id="f_1")
    core.event(EventKind.FLIGHT_LANDED, flight_id="f_2")
    first = hooks.due(core, 10)
    assert [r["flight_id"] for r in first] == ["f_1", "f_2"]
    assert not hooks.answered(core, first[0], status=500, error=None)
    clock.advance(core.settings.hook_backoff_cap + 1)
    assert [r["flight_id"] for r in hooks.due(core, 10)] == ["f_1", "f_2"]  # f_1's first again
    again = hooks.due(core, 10)[0]
    assert again["id"] == first[0]["id"]
    assert hooks.answered(core, again, status=204, error=None)
    after = hooks.due(core, 10)
    assert [(r["flight_id"], r["kind"]) for r in after] == [
        ("f_1", EventKind.FLIGHT_LANDED.value), ("f_2", EventKind.FLIGHT_LANDED.value)]


def test_a_failed_attempt_waits_its_backoff(core, owner, clock):
    _add(core, owner)
    core.event(EventKind.FLIGHT_LANDED, flight_id="f_1")
    row = hooks.due(core, 10)[0]
    hooks.answered(core, row, status=None, error="ConnectError: refused")
    assert hooks.due(core, 10) == []
    assert hooks.next_due(core) == clock.now + core.settings.hook_backoff
    clock.advance(core.settings.hook_backoff)
    assert len(hooks.due(core, 10)) == 1


def test_an_environments_hook_hears_only_that_environments_flights(core, owner, ada):
    from gg.control import flights

    _add(core, owner, environment="prod")
    opened = flights.open_flight(core, ada, FlightSpec(command=["true"], labels={}))
    core.event(EventKind.FLIGHT_LANDED, flight_id=opened.id)
    assert hooks.due(core, 10) == []


def test_only_an_admin_adds_lists_shows_or_removes(core, owner, ada):
    hook = _add(core, owner)
    for call in (lambda: _add(core, ada), lambda: hooks.list_hooks(core, ada),
                 lambda: hooks.show_hook(core, ada, hook["id"]),
                 lambda: hooks.remove_hook(core, ada, hook["id"])):
        with pytest.raises(Forbidden):
            call()


def test_removing_a_hook_drops_what_it_had_not_delivered(core, owner):
    hook = _add(core, owner)
    core.event(EventKind.FLIGHT_LANDED, flight_id="f_1")
    hooks.remove_hook(core, owner, hook["id"])
    assert hooks.due(core, 10) == []
    core.event(EventKind.FLIGHT_LANDED, flight_id="f_2")
    assert hooks.due(core, 10) == [] and hooks.next_due(core) is None


def test_delivered_rows_past_the_window_are_pruned_and_undelivered_ones_never(core, owner, clock):
    hook = _add(core, owner)
    core.event(EventKind.FLIGHT_LANDED, flight_id="f_1")
    core.event(EventKind.FLIGHT_LANDED, flight_id="f_2")
    rows = hooks.due(core, 10)
    hooks.answered(core, rows[0], status=200, error=None)
    for _ in range(15):
        hooks.answered(core, rows[1], status=503, error=None)
    shown = {d["flight_id"]: d for d in hooks.show_hook(core, owner, hook["id"])["deliveries"]}
    assert shown["f_2"]["attempts"] == 15
    assert [a["attempt"] for a in shown["f_2"]["answers"]] == list(range(6, 16))
    assert hooks.prune(core, 100) == 0
    clock.advance(core.settings.hook_retain + 1)
    assert hooks.prune(core, 100) == 1
    left = hooks.show_hook(core, owner, hook["id"])["deliveries"]
    assert [d["flight_id"] for d in left] == ["f_2"]
