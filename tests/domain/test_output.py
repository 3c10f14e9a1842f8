"""Output caps as pure rules: the limit a flight gets, and what a report may add."""

from __future__ import annotations

import pytest

from gg.domain import output
from gg.errors import BadRequest, TooLarge
from gg.settings import Settings, parse_size


def test_sizes_read_as_people_write_them():
    assert parse_size("512k") == 512 * 1024
    assert parse_size("10MB") == 10 * 1024 ** 2
    assert parse_size("1g") == 1024 ** 3
    assert parse_size("4096") == 4096
    for bad in ("ten", "10 parsecs", "-1k", ""):
        with pytest.raises(ValueError, match="is not a size"):
            parse_size(bad)


def test_the_server_settings_read_sizes_from_their_variables():
    settings = Settings.from_env({"GG_OUTPUT_LIMIT_DEFAULT": "256k", "GG_OUTPUT_LIMIT_MAX": "1GB"})
    assert settings.output_limit_default == 262_144 and settings.output_limit_max == 1024 ** 3
    assert Settings().output_limit_default == 10 * 1024 ** 2 and Settings().output_tail == 65_536


def test_a_flight_gets_the_default_or_what_it_asks_never_above_the_maximum():
    assert output.limit_for(None, default=10, maximum=100) == 10
    assert output.limit_for(None, default=1000, maximum=100) == 100
    assert output.limit_for(50, default=10, maximum=100) == 50
    with pytest.raises(BadRequest) as refused:
        output.limit_for(2 * 1024 ** 3, default=10, maximum=1024 ** 3)
    assert str(refused.value) == "an output limit of 2GB is more than this server allows (1GB)"


def _out(text: str, tail: bool = False) -> dict:
    return {"kind": "output", "body": {"text": text, **({"tail": True} if tail else {})}}


def test_output_fills_the_limit_and_a_tail_may_pass_it_by_the_tail_allowance_only():
    assert output.admit(0, 10, 4, [_out("abcde"), {"kind": "note", "body": {"text": "x" * 99}}]) == 5
    assert output.admit(5, 10, 4, [_out("é" * 2), _out("x")]) == 10  # bytes, not characters
    with pytest.raises(TooLarge) as refused:
        output.admit(10, 10, 4, [_out("x")])
    assert refused.value.code == "output_capped" and refused.value.status == 413
    assert output.admit(10, 10, 4, [_out("wxyz", tail=True)]) == 14
    with pytest.raises(TooLarge):
        output.admit(10, 10, 4, [_out("vwxyz", tail=True)])
    with pytest.raises(TooLarge):  # the tail allowance is not room for ordinary output
        output.admit(8, 10, 4, [_out("abc")])
