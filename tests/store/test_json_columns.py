"""A JSON column is read back as the value written: an empty object or list (what most of a
runner row's JSON columns hold) read without the parser is still a fresh value each time."""

from __future__ import annotations

from gg.store.db import dumps, loads


def test_json_columns_read_back_what_was_written_and_empty_ones_are_fresh_each_time():
    for value in ({}, [], {"a": [1, {}]}, [{}], "{}", None, 0, 1.5, True):
        assert loads(dumps(value)) == value
    first, second = loads("{}"), loads("{}")
    first["label"] = "gpu"
    assert second == {} and loads("{}") == {}
    items = loads("[]")
    items.append(1)
    assert loads("[]") == []
    assert loads(None, {}) == {} and loads("", []) == []
