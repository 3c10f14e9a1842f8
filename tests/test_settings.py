"""Settings read from the environment: a whole number below 0 is refused in one sentence."""

from __future__ import annotations

import pytest

from gg.settings import Settings


@pytest.mark.parametrize("name", ["GG_MAX_REQUESTS_IN_HAND", "GG_MAX_PARKED_CLAIMS",
                                  "GG_LISTEN_BACKLOG", "GG_DATABASE_POOL", "GG_RETENTION_BATCH"])
def test_every_whole_number_setting_refuses_a_value_below_0(name):
    with pytest.raises(ValueError) as below:
        Settings.from_env({name: "-5"})
    assert str(below.value) == f"{name}: '-5' is below 0"


def test_0_is_still_a_whole_numbers_value():
    assert Settings.from_env({"GG_MAX_CONNECTIONS": "0"}).max_connections == 0
