"""The readings a claim carries are taken at most once a second, however often it claims."""

from __future__ import annotations

from gg.runner.inventory import READINGS_EVERY, Readings


def test_readings_are_taken_at_most_once_every_interval():
    now = [100.0]
    taken = []

    def take() -> dict:
        taken.append(now[0])
        return {"cpu_percent": float(len(taken))}

    readings = Readings(take=take, clock=lambda: now[0])
    assert readings() == {"cpu_percent": 1.0}
    for _ in range(50):  # a runner flying short flights claims many times a second
        now[0] += READINGS_EVERY / 100
        assert readings() == {"cpu_percent": 1.0}
    now[0] += READINGS_EVERY / 2
    assert readings() == {"cpu_percent": 2.0} and taken == [100.0, now[0]]
    readings()["cpu_percent"] = -1  # each claim gets a copy of its own
    assert readings() == {"cpu_percent": 2.0}
    now[0] -= 10  # a clock that went back: taken again
    assert readings() == {"cpu_percent": 3.0}
