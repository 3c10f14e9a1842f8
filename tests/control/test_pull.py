"""Pull mode's use cases: the control plane's key, attaching, and one poll taken as the
runner's own requests would be (check-in, grants, renewals, fenced hand-backs)."""

from __future__ import annotations

import asyncio

import pytest

from gg import keys
from gg.api.pull import Polled
from gg.control import admin, flights
from gg.control import pull as pull_ops
from gg.control.core import Core
from gg.control.wiring import wired
from gg.domain.flight_spec import FlightSpec
from gg.domain.identity import key_fingerprint
from gg.errors import Conflict, Forbidden
from gg.store import open_store

from support import make_runner

STORES = ("sqlite", "postgresql")  # the control plane key and pull rows: storage semantics


def test_the_control_plane_key_is_made_once_per_database_and_kept_in_it(core, tmp_path,
                                                                        clock, settings,
                                                                        store_url):
    first = keys.public_text(pull_ops.signing_key(core))
    again = Core(store=open_store(tmp_path, store_url), settings=settings, clock=clock, wiring=wired())
    assert keys.public_text(pull_ops.signing_key(again)) == first
    assert core.store.control_key()["public_key"] == first
    assert not core.store.add_control_key(keys.private_pem(keys.generate()),
                                          "another", clock())  # the first stays
    assert keys.public_text(pull_ops.signing_key(core)) == first
    assert not [p for p in tmp_path.rglob("*") if p.suffix in (".pem", ".key")]


def _attach(core, person, name="p1", url="http://127.0.0.1:7400"):
    key = keys.public_text(keys.generate())
    return pull_ops.attach(core, person, name=name, url=url, public_key=key), key


def test_attach_registers_a_pull_runner_once_per_key(core, owner):
    runner, key = _attach(core, owner)
    assert (runner.mode, runner.kind, runner.url) == ("pull", "pull", "http://127.0.0.1:7400")
    again = pull_ops.attach(core, owner, name="p1", url="http://10.0.0.5:7400", public_key=key)
    assert again.id == runner.id and again.url == "http://10.0.0.5:7400"
    [event] = core.store.events(kind="info:runner:attached", runner_id=runner.id)[:1]
    assert event["body"]["fingerprint"] == key_fingerprint(key)


def test_attach_is_for_admins_and_checks_the_fingerprint_and_the_key(core, owner, ada):
    key = keys.public_text(keys.generate())
    with pytest.raises(Forbidden):
        pull_ops.check_attach(core, ada, name="p1", public_key=key, fingerprint=None)
    with pytest.raises(Conflict) as refused:
        pull_ops.check_attach(core, owner, name="p1", public_key=key,
                              fingerprint="SHA256:" + "A" * 43)
    assert refused.value.code == "fingerprint_mismatch"
    assert key_fingerprint(key) in refused.value.message
    assert pull_ops.check_attach(core, owner, name="p1", public_key=key,
                                 fingerprint=key_fingerprint(key)) == key_fingerprint(key)
    dialer = make_runner(core, owner, "dialer")
    with pytest.raises(Conflict):
        pull_ops.check_attach(core, owner, name="p2", public_key=dialer.public_key,
                              fingerprint=None)


def test_a_retired_pull_runners_key_can_never_attach_again(core, owner):
    runner, key = _attach(core, owner)
    admin.retire(core, owner, runner.id)
    with pytest.raises(Forbidden):
        pull_ops.attach(core, owner, name="p1", url="http://127.0.0.1:7400", public_key=key)


def _poll(core, runner, *, free=1, held=(), outbox=()):
    answer = Polled.model_validate({
        "check_in": {"free_slots": free, "readings": {}, "version": core.version,
                     "held": [h["flight"] for h in held], "workers": 1},
        "held": list(held), "outbox": list(outbox)})
    return asyncio.run(pull_ops.polled(core, core.store.runner(runner.id), answer, "127.0.0.1"))


def test_a_poll_checks_the_runner_in_grants_renews_and_takes_a_hand_back(core, owner, clock):
    runner, _ = _attach(core, owner)
    opened = flights.open_flight(core, owner, FlightSpec(command=["true"]))
    got = _poll(core, runner)
    assert core.store.runner(runner.id).last_seen_at == clock()
    [grant] = got["grants"]
    assert grant["flight"]["id"] == opened.id and grant["lease"]["epoch"] == 1
    expires = grant["lease"]["expires_at"]
    clock.advance(10)  # plenty left: not rewritten at every poll
    got = _poll(core, runner, free=0, held=[{"flight": opened.id, "epoch": 1}])
    assert got["renewals"] == [] and got["refusals"] == []
    clock.advance(20)  # within LEASE_RENEW_AT + CHECK_IN_INTERVAL of its end: renewed
    got = _poll(core, runner, free=0, held=[{"flight": opened.id, "epoch": 1}])
    [renewal] = got["renewals"]
    assert renewal["expires_at"] == expires + 30 and got["grants"] == []
    hand_back = {"seq": 1, "flight": opened.id, "epoch": 1, "kind": "hand_back",
                 "hand_back": {"epoch": 1, "outcome": "landed", "exit_code": 0,
                               "key": "1:hand-back"}}
    got = _poll(core, runner, free=0, outbox=[hand_back])
    assert got["applied"] == [1] and got["refusals"] == []
    assert core.store.flight(opened.id).stage == "landed"


def test_a_poll_fences_a_stale_epoch_as_a_dial_out_runner_is_fenced(core, owner, clock):
    runner, _ = _attach(core, owner)
    opened = flights.open_flight(core, owner, FlightSpec(command=["true"]))
    _poll(core, runner)
    clock.advance(core.settings.lease_ttl + 1)  # not reached: its lease runs out
    other = make_runner(core, owner, "r2")
    from gg.control import leases

    flight, grant = leases.try_claim(core, other.id, 1)
    assert flight.id == opened.id and grant.epoch == 2
    late = {"seq": 7, "flight": opened.id, "epoch": 1, "kind": "hand_back",
            "hand_back": {"epoch": 1, "outcome": "landed", "exit_code": 0, "key": "1:hand-back"}}
    got = _poll(core, runner, free=0, held=[{"flight": opened.id, "epoch": 1}], outbox=[late])
    assert got["applied"] == [7]
    codes = {(r["seq"], r["status"]) for r in got["refusals"]}
    assert (7, 409) in codes
    assert core.store.flight(opened.id).stage == "flying"
    assert core.store.flight(opened.id).lease_runner == other.id


def test_a_cordoned_pull_runner_is_granted_nothing_until_resumed(core, owner):
    runner, _ = _attach(core, owner)
    opened = flights.open_flight(core, owner, FlightSpec(command=["true"]))
    _poll(core, runner, free=0)  # checked in: online
    admin.change_state(core, owner, runner.id, "cordon")
    got = _poll(core, runner)
    assert got["grants"] == [] and got["checked_in"]["admin_state"] == "cordoned"
    admin.change_state(core, owner, runner.id, "resume")
    [grant] = _poll(core, runner)["grants"]
    assert grant["flight"]["id"] == opened.id


def test_a_retired_pull_runner_is_told_to_stop_and_may_hand_its_flight_back(core, owner):
    runner, _ = _attach(core, owner)
    opened = flights.open_flight(core, owner, FlightSpec(command=["true"]))
    _poll(core, runner)
    admin.retire(core, owner, runner.id)
    assert [r.id for r in core.store.pull_runners()] == [runner.id]  # polled while it holds one
    got = _poll(core, runner, free=1, held=[{"flight": opened.id, "epoch": 1}])
    assert got["retired"] and got["grants"] == [] and got["renewals"] == []
    assert [(r["flight"], r["code"]) for r in got["refusals"]] == [(opened.id, "runner_retired")]
    late = {"seq": 1, "flight": opened.id, "epoch": 1, "kind": "report",
            "facts": [{"kind": "output", "body": {"text": "late"}, "key": "1:output:9"}]}
    landed = {"seq": 2, "flight": opened.id, "epoch": 1, "kind": "hand_back",
              "hand_back": {"epoch": 1, "outcome": "landed", "key": "1:hand-back"}}
    got = _poll(core, runner, free=0, held=[{"flight": opened.id, "epoch": 1}],
                outbox=[late, landed])
    assert {(r["seq"], r["code"]) for r in got["refusals"]} >= {(1, "runner_retired"),
                                                               (2, "runner_retired")}
    assert core.store.flight(opened.id).stage == "flying"  # it may only give it back
    back = {"seq": 3, "flight": opened.id, "epoch": 1, "kind": "hand_back",
            "hand_back": {"epoch": 1, "outcome": "returned", "key": "1:returned"}}
    got = _poll(core, runner, free=0, outbox=[back])
    assert got["refusals"] == [] and core.store.flight(opened.id).stage == "ready"
    assert core.store.pull_runners() == []  # nothing held: no longer polled
