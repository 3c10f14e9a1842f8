"""Stored strategies and their active hours."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from gg.domain.strategies import (
    Bounds,
    Build,
    Image,
    Inventory,
    Strategy,
    active_at,
    digest_problem,
    parse_active_hours,
)

DIGEST = "sha256:" + "0123456789abcdef" * 4


def utc(h: int, m: int = 0) -> float:
    return datetime(2024, 6, 3, h, m, tzinfo=UTC).timestamp()


def test_no_active_hours_means_always_active():
    assert active_at(Bounds(pool_max=2), utc(3))


@pytest.mark.parametrize("hour,minute,inside", [(7, 59, False), (8, 0, True), (19, 59, True),
                                                (20, 0, False)])
def test_a_day_window_includes_its_start_and_excludes_its_end(hour, minute, inside):
    bounds = Bounds(pool_max=2, active_hours=parse_active_hours("08:00-20:00 UTC"))
    assert active_at(bounds, utc(hour, minute)) is inside


@pytest.mark.parametrize("hour,inside", [(21, False), (22, True), (23, True), (0, True),
                                         (5, True), (6, False), (12, False)])
def test_a_window_that_crosses_midnight(hour, inside):
    bounds = Bounds(pool_max=2, active_hours=parse_active_hours("22:00-06:00 UTC"))
    assert active_at(bounds, utc(hour)) is inside


def test_active_hours_follow_the_zone_wall_clock():
    bounds = Bounds(pool_max=2, active_hours=parse_active_hours("08:00-20:00 Europe/Berlin"))
    berlin = ZoneInfo("Europe/Berlin")
    assert active_at(bounds, datetime(2024, 1, 15, 8, 30, tzinfo=berlin).timestamp())
    assert active_at(bounds, datetime(2024, 7, 15, 8, 30, tzinfo=berlin).timestamp())
    assert not active_at(bounds, datetime(2024, 7, 15, 7, 30, tzinfo=berlin).timestamp())


def test_digests_are_pinned_sha256():
    assert digest_problem(DIGEST) is None
    assert digest_problem("sha256:abc") is not None
    assert digest_problem(DIGEST.upper().replace("SHA256", "sha256")) is not None


def test_a_strategy_round_trips_through_json_and_feeds_the_planner():
    strategy = Strategy(name="ui", environment="ui", inventory=Inventory("ui-pool", 6, 2),
                        image=Image("ui-runner", DIGEST),
                        bounds=Bounds(4, parse_active_hours("08:00-20:00 Europe/Berlin")),
                        build=Build("images/ui"), driver="podman")
    data = json.loads(json.dumps(strategy.to_dict()))
    assert data["bounds"] == {"pool_max": 4, "active_hours": "08:00-20:00 Europe/Berlin"}
    assert Strategy.from_dict(data) == strategy
    spec = strategy.pool_spec()
    assert (spec.name, spec.size, spec.warm, spec.pool_max, spec.digest) == ("ui-pool", 6, 2, 4, DIGEST)
