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
