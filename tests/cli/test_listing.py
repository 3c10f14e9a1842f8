"""`gg flights` and `gg runners` show the first page, `--all` follows the listing's cursors,
and `--json` stays a JSON array of rows either way (SPEC section 14)."""

from __future__ import annotations

import json

import httpx

import gg.client

from support import auth, cli, http_proof


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


def _registered(fleet, count: int) -> list[str]:
    """``count`` runners registered over HTTP (no runner process: only their rows), oldest
    first: their ids."""
    ids = []
    with httpx.Client(base_url=fleet.url, headers=auth(fleet.server.owner_token())) as http:
        for i in range(count):
            answer = http.post("/v1/runners", json={"name": f"r{i}", **http_proof(http, "register")})
            assert answer.status_code == 201, answer.text
            ids.append(answer.json()["runner"]["id"])
    return ids


def test_runners_show_the_oldest_page_say_there_are_more_and_all_follows_every_page(
        fleet, monkeypatch):
    ids = _registered(fleet, 5)
    code, out, err = cli(fleet, "runners", "--limit", "3")
    assert code == 0, err
    assert all(i in out for i in ids[:3]) and not any(i in out for i in ids[3:])
    assert "the oldest 3 runners shown; more: gg runners --all" in out
    monkeypatch.setattr(gg.client, "PAGE_MAX", 2)  # small pages: three of them for five rows
    code, out, err = cli(fleet, "runners", "--json", "--limit", "4")
    assert code == 0, err
    assert [r["id"] for r in json.loads(out)] == ids[:4]
    code, out, err = cli(fleet, "runners", "--all")
    assert code == 0, err
    assert all(i in out for i in ids) and "more:" not in out
    code, out, err = cli(fleet, "runners")  # fewer than a page: every one, nothing more said
    assert code == 0, err
    assert all(i in out for i in ids) and "more:" not in out
    code, out, err = cli(fleet, "runners", "--json")  # a script's look-up: the whole fleet
    assert code == 0, err
    assert [r["id"] for r in json.loads(out)] == ids


def test_a_page_of_runners_after_one_never_listed_is_refused_in_a_sentence(fleet):
    _registered(fleet, 1)
    answer = httpx.get(fleet.url + "/v1/runners", params={"limit": 5, "after": "nobody"},
                       headers=auth(fleet.server.owner_token()))
    assert answer.status_code == 404
    assert answer.json()["error"]["message"] == (
        "no runner nobody: a page of runners starts after a runner the page before listed")
    assert httpx.get(fleet.url + "/v1/runners", params={"limit": 0},
                     headers=auth(fleet.server.owner_token())).status_code in (400, 422)
