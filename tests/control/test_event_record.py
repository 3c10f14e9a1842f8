"""The audit feed stores an event kind's string as it always was, and refuses a kind that
is not named in gg.domain.events.EventKind."""

from __future__ import annotations

import pytest

from gg.control import people
from gg.domain.events import EventKind

STORES = ("sqlite", "postgresql")  # storage semantics: each test runs on both stores


def test_an_event_is_stored_and_filtered_by_its_unchanged_string(core, owner):
    people.add_person(core, owner, name="ada", admin=False)
    rows = core.store.events(kind="info:person:added")
    assert [(r["kind"], r["body"]["person"]) for r in rows] == [("info:person:added", "ada")]
    assert type(rows[0]["kind"]) is str  # the row carries the plain string, not the member
    assert core.store.events(kind=EventKind.PERSON_ADDED) == rows
    assert core.store.events(kind="info:person:") == rows  # prefixes still filter


def test_a_kind_not_in_the_enum_is_refused_before_anything_is_stored(core):
    with pytest.raises(ValueError):
        core.event("info:person:invented", actor="x")
    assert core.store.events(kind="info:person:invented") == []


def test_recording_an_event_wakes_its_followers_once_committed_and_never_when_rolled_back(core):
    """Core.event raises the event signal itself, after the transaction that recorded the
    event committed: a follower woken by it reads the event; a rolled-back one wakes no one."""
    woken: list[list[str]] = []
    core.signals.on_event.append(lambda: woken.append(
        [r["body"]["person"] for r in core.store.events(kind="info:person:added")]))
    with core.store.atomic():
        core.event(EventKind.PERSON_ADDED, actor="test", person="ada")
        assert woken == []  # not before the commit: a reader then would not see it
    assert woken == [["ada"]]
    with pytest.raises(RuntimeError), core.store.atomic():
        core.event(EventKind.PERSON_ADDED, actor="test", person="bob")
        raise RuntimeError("rolled back")
    assert woken == [["ada"]]
    core.event(EventKind.PERSON_ADDED, actor="test", person="cy")  # a transaction of its own
    assert woken[-1] == ["ada", "cy"]
