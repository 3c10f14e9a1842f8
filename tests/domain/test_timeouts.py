"""Run-time limits: which limit a new flight gets, and the words for it."""

from __future__ import annotations

import pytest

from gg.domain.timeouts import describe, limit_for, time_left, time_left_sentence, timed_out_reason
from gg.errors import BadRequest


@pytest.mark.parametrize("seconds,words", [
    (0.5, "500ms"), (1.5, "1.5s"), (2, "2s"), (60, "1m"), (80, "1m 20s"), (3600, "1h"),
    (5400, "1h 30m"), (86400 + 7200, "1d 2h"), (90061, "1d 1h 1m 1s"),
])
def test_a_duration_reads_as_people_write_it(seconds, words):
    assert describe(seconds) == words


def test_what_the_flight_asks_wins_over_its_environments_default():
    assert limit_for(2.0, 600.0, 0) == 2.0
    assert limit_for(900.0, 600.0, 3600.0) == 900.0


def test_without_an_ask_the_environments_default_applies_held_to_the_maximum():
    assert limit_for(None, 600.0, 0) == 600.0
    assert limit_for(None, 7200.0, 3600.0) == 3600.0


def test_without_an_ask_or_a_default_the_maximum_is_the_limit_and_none_means_none():
    assert limit_for(None, None, 3600.0) == 3600.0
    assert limit_for(None, None, 0) is None


def test_asking_beyond_the_maximum_is_refused_with_one_sentence():
    with pytest.raises(BadRequest) as caught:
        limit_for(7200.0, None, 3600.0)
    assert caught.value.status == 400 and caught.value.code == "timeout_too_long"
    assert caught.value.message == "--timeout 2h is longer than this server allows (at most 1h)"


@pytest.mark.parametrize("asked", [0.0, -1.0])
def test_a_limit_of_nothing_is_refused(asked):
    with pytest.raises(BadRequest) as caught:
        limit_for(asked, None, 0)
    assert caught.value.code == "invalid_timeout"


def test_the_reason_names_the_limit():
    assert timed_out_reason(2.0) == "timed out after 2s"
    assert timed_out_reason(5400.0) == "timed out after 1h 30m"


def test_time_left_counts_from_the_grant_and_never_goes_below_zero():
    assert time_left(120.0, 1000.0, 1040.0) == 80.0
    assert time_left(120.0, 1000.0, 1500.0) == 0.0
    assert time_left(None, 1000.0, 1040.0) is None
    assert time_left(120.0, None, 1040.0) is None


def test_time_left_reads_as_a_sentence():
    assert time_left_sentence(79.2) == "may run 1m 20s more"
    assert time_left_sentence(0.0) == "ran past its limit: its runner is stopping it"
