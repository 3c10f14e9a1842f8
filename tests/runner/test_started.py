"""The runner's pending `started` fact: taken once by whichever request leaves first, put back
with its own start time when that request was not accepted."""

from __future__ import annotations

import time

from gg.runner.started import PendingStarted


def test_the_started_fact_is_taken_once_and_put_back_with_its_own_start_time():
    pending = PendingStarted()
    assert pending.take() == [] and pending.due(0.5) is None
    before = time.monotonic()
    pending.hold({"kind": "started", "body": {"pid": 1}, "key": "1:started:1"})
    assert before + 0.5 <= pending.due(0.5) <= time.monotonic() + 0.5
    taken = pending.take()
    assert [f["kind"] for f in taken] == ["started"] and taken[0]["ago"] >= 0
    assert taken[0]["key"] == "1:started:1" and pending.take() == []
    pending.put_back([{**taken[0], "ago": 7.0}])  # held 7 s by a request that was refused
    assert pending.due(0.5) <= time.monotonic() - 6.5  # due long ago: it leaves at once
    again = pending.take()
    assert again[0]["ago"] >= 7.0 and again[0]["key"] == "1:started:1"
    pending.put_back([])  # nothing was taken: nothing to put back
    assert pending.take() == []
