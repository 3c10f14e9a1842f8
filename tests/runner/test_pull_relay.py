"""The relay a pull-mode runner's flights talk to: what waits for the control plane's poll,
and how its answers reach the flight as the ApiError a dial-out runner's request would get."""

from __future__ import annotations

import threading

import pytest

from gg.client import ApiError, Unreachable
from gg.runner.pull import Relay

from support import wait_until


def _in_thread(fn):
    box = {}

    def run():
        try:
            box["value"] = fn()
        except Exception as exc:
            box["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    return thread, box


def test_reports_wait_in_the_outbox_until_a_delivery_says_they_were_taken():
    relay = Relay()
    relay.report("f1", 1, [{"kind": "output", "body": {"text": "a"}, "key": "1:output:1"}])
    [entry] = relay.pending()
    assert (entry["seq"], entry["flight"], entry["kind"]) == (1, "f1", "report")
    relay.settle([1], [], [])
    assert relay.pending() == []


def test_a_hand_back_returns_once_taken_and_raises_the_refusal_it_got():
    relay = Relay()
    thread, box = _in_thread(lambda: relay.hand_back("f1", {"epoch": 1, "outcome": "landed"},
                                                     retry_for=30))
    wait_until(relay.pending, what="the hand-back in the outbox")
    relay.settle([1], [], [])
    thread.join(10)
    assert box == {"value": {"flight": "f1"}}
    thread, box = _in_thread(lambda: relay.hand_back("f2", {"epoch": 1, "outcome": "landed"},
                                                     retry_for=30))
    wait_until(relay.pending, what="the hand-back in the outbox")
    relay.settle([2], [{"flight": "f2", "seq": 2, "status": 409, "code": "lease_superseded",
                        "message": "superseded"}], [])
    thread.join(10)
    assert isinstance(box["error"], ApiError) and box["error"].status == 409


def test_a_hand_back_nobody_fetched_is_unreachable_and_stays_in_the_outbox():
    relay = Relay()
    with pytest.raises(Unreachable):
        relay.hand_back("f1", {"epoch": 1, "outcome": "landed"}, retry_for=0)
    assert [e["kind"] for e in relay.pending()] == ["hand_back"]


def test_a_renewal_is_the_newest_one_the_keeper_has_not_seen_or_its_refusal():
    relay = Relay()
    thread, box = _in_thread(lambda: relay.renew("f1", 1, retry_for=30))
    relay.settle([], [], [{"flight": "f1", "epoch": 1, "expires_at": 160.0,
                           "server_time": 100.0}])
    thread.join(10)
    assert box["value"].expires_at == 160.0
    with pytest.raises(Unreachable):  # seen already: the keeper waits for a newer one
        relay.renew("f1", 1, retry_for=0)
    relay.settle([], [], [{"flight": "f1", "epoch": 1, "expires_at": 170.0,
                           "server_time": 110.0}])
    assert relay.renew("f1", 1, retry_for=0).expires_at == 170.0
    relay.settle([], [{"flight": "f1", "seq": None, "status": 409, "code": "lease_superseded",
                       "message": "superseded"}], [])
    with pytest.raises(ApiError):
        relay.renew("f1", 1, retry_for=30)
    with pytest.raises(Unreachable):
        relay.renew("f2", 1, retry_for=0)


def test_a_pull_mode_flight_asking_for_an_identity_token_is_refused_in_one_sentence():
    from gg.runner.id_tokens import Desk, IdTokenError, desk_for

    class Run:  # what the desk reads of a flight: its id, its client, its lease's epoch
        id = "f_1"
        client = Relay()

        class lease:
            epoch = 1

    desk = desk_for(Run())
    assert isinstance(desk, Desk)
    with pytest.raises(IdTokenError) as refused:
        desk.mint("sts.example")
    assert refused.value.status == 409
    assert "pull-mode runner" in refused.value.message and "\n" not in refused.value.message


def test_a_pull_mode_flight_with_artifacts_or_inputs_is_told_so_in_one_sentence(tmp_path):
    """A pull-mode runner never calls the control plane, so it cannot upload what a flight
    left nor fetch its inputs: the flight is refused (inputs) or fails (artifacts) saying so,
    never started without its inputs nor landed as if its artifacts were kept."""
    from types import SimpleNamespace

    from gg.runner import flight_artifacts

    run = SimpleNamespace(id="f_1", client=Relay(), lease=SimpleNamespace(epoch=1),
                          flight=SimpleNamespace(inputs=[SimpleNamespace(
                              flight="f_0", name="app.tar", dir="build", sha256="0" * 64)]),
                          _patience=lambda: 1.0, say=lambda text: None)
    said = flight_artifacts.prepare(run, tmp_path)
    assert said is not None and "pull-mode runner" in said and "\n" not in said
    (tmp_path / flight_artifacts.HOME / flight_artifacts.ARTIFACTS / "out.txt").write_text("x")
    said = flight_artifacts.upload(run, tmp_path)
    assert said is not None and "pull-mode runner" in said
