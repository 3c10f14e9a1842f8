"""What a runner says about reaching the control plane: one line an outage, however the
connections fail, a new one when the reason changes, and one when it is reached again."""

from __future__ import annotations

from gg.client import ApiError, Unreachable
from gg.runner.connection import ConnectionLog

URL = "http://127.0.0.1:9"


def _unreachable(kind: str) -> Unreachable:
    return Unreachable(f"cannot reach the control plane at {URL} ({kind})", where=URL)


def test_a_dropped_connection_then_refused_ones_are_one_outage_said_once():
    said: list[str] = []
    log = ConnectionLog(URL, said.append)
    log.retry(_unreachable("RemoteProtocolError"), 0.0)  # the server stops mid-answer
    for _ in range(5):
        log.retry(_unreachable("ConnectError"), 0.1)  # then refuses new connections
    assert len(said) == 1 and "(RemoteProtocolError); retrying in 0.0s" in said[0]
    log.retry(ApiError(503, "unavailable", "the control plane is starting"), 0.2)
    assert len(said) == 2 and said[1].startswith("the control plane is starting; retrying")
    assert "(7 failed attempts so far)" in said[1]
    log.reached()
    assert said[2] == f"reached the control plane at {URL} again after 7 failed attempts"
    log.reached()
    assert len(said) == 3  # said once


def test_another_replica_out_of_reach_is_a_new_reason():
    said: list[str] = []
    log = ConnectionLog(URL, said.append)
    log.retry(_unreachable("ConnectError"), 0.1)
    log.retry(Unreachable("cannot reach the control plane at http://127.0.0.1:10 (ConnectError)",
                          where="http://127.0.0.1:10"), 0.1)
    assert len(said) == 2
