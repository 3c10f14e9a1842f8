"""``gg fly --note TEXT``: free text kept with the flight and shown by ``gg show``, its
``--json`` and ``gg flights --json``; one too long, or of more than one line, is refused in
one sentence (a 400 from the server) and opens nothing."""

from __future__ import annotations

import json

import pytest

from gg.client import ApiError

from support import cli

NOTE = "rebuild after the 2.3 upgrade <b>&</b> ünïcode"


def test_a_note_given_at_gg_fly_is_shown_by_gg_show_and_both_json_listings(fleet):
    code, out, err = cli(fleet, "fly", "--note", NOTE, "--", "true")
    assert code == 0, err
    flight = out.strip()
    code, out, err = cli(fleet, "show", flight)
    assert code == 0, err
    assert f"\n  note      {NOTE}\n" in out
    code, out, err = cli(fleet, "show", flight, "--json")
    assert code == 0, err
    assert json.loads(out)["note"] == NOTE
    code, out, err = cli(fleet, "flights", "--json")
    assert code == 0, err
    assert {r["id"]: r["note"] for r in json.loads(out)}[flight] == NOTE
    # a flight without one shows no note line, and an empty note in --json
    code, out, err = cli(fleet, "fly", "--", "true")
    plain = out.strip()
    assert "note" not in cli(fleet, "show", plain)[1]
    assert json.loads(cli(fleet, "show", plain, "--json")[1])["note"] == ""


def test_a_note_past_500_characters_or_of_two_lines_is_refused_in_one_sentence(fleet):
    code, out, err = cli(fleet, "fly", "--note", "x" * 501, "--", "true")
    assert code != 0 and out == ""
    assert err.strip() == "note: a note takes at most 500 characters (this one has 501)"
    code, out, err = cli(fleet, "fly", "--note", "fine\n  stage     landed", "--", "true")
    assert code != 0
    assert err.strip() == "note: a note is one line of text, without control characters"
    with pytest.raises(ApiError) as refused:
        fleet.api().open_flight({"command": ["true"], "note": "x" * 501})
    assert refused.value.status == 400
    assert fleet.api().flights() == []  # nothing was opened
    assert cli(fleet, "fly", "--note", "x" * 500, "--", "true")[0] == 0  # 500 is allowed
