"""`gg flights` shows the first page, `--all` follows the listing's cursors, and `--json`
stays a JSON array of rows either way (SPEC section 14)."""

from __future__ import annotations

import json

import gg.client

from support import cli


def test_flights_json_is_an_array_and_all_follows_every_page(fleet, monkeypatch):
    api = fleet.api()
    opened = [api.open_flight({"command": ["true"], "title": f"t{i}"})["id"] for i in range(5)]
    monkeypatch.setattr(gg.client, "PAGE_MAX", 2)  # small pages: three of them for five rows
    code, out, err = cli(fleet, "flights", "--json", "--all")
    assert code == 0, err
    rows = json.loads(out)
    assert isinstance(rows, list) and [r["id"] for r in rows] == opened[::-1]
    code, out, err = cli(fleet, "flights", "--json", "--limit", "3")
    assert code == 0, err
    assert [r["id"] for r in json.loads(out)] == opened[::-1][:3]
    code, out, err = cli(fleet, "flights", "--limit", "1")
    assert code == 0, err
    assert opened[4] in out and opened[3] not in out
