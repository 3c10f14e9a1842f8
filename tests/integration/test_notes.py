"""``gg fly --note TEXT`` across real processes: a free-text note kept with the flight, shown by
``gg show`` and its ``--json``; a note that cannot be one is refused and opens nothing."""

from __future__ import annotations

import json


def test_a_note_is_kept_with_its_flight_and_shown_by_gg_show_and_its_json(fleet):
    opened = fleet.gg("fly", "--note", "ticket 42\nfor the 4.2 release", "--", "true")
    assert opened.returncode == 0, opened.stderr
    flight_id = opened.stdout.strip()
    shown = fleet.gg("show", flight_id)
    assert shown.returncode == 0, shown.stderr
    assert "  note      ticket 42\n            for the 4.2 release\n" in shown.stdout
    as_json = json.loads(fleet.gg("show", flight_id, "--json", check=True).stdout)
    assert as_json["note"] == "ticket 42\nfor the 4.2 release"
    # a flight without a note says nothing of one
    plain = fleet.gg("fly", "--", "true", check=True).stdout.strip()
    assert json.loads(fleet.gg("show", plain, "--json", check=True).stdout)["note"] is None
    assert "note" not in fleet.gg("show", plain, check=True).stdout


def test_a_note_with_a_control_character_gets_one_sentence_and_opens_nothing(fleet):
    before = fleet.api().flights()
    refused = fleet.gg("fly", "--note", "look \x1b[2J", "--", "true")
    assert refused.returncode != 0
    assert refused.stderr.strip().count("\n") == 0 and "control characters" in refused.stderr
    too_long = fleet.gg("fly", "--note", "x" * 2001, "--", "true")
    assert too_long.returncode != 0 and "at most 2000 characters" in too_long.stderr
    assert fleet.api().flights() == before
