"""What a heartbeat claim reads (gg/server/dispatch.py, gg/control/heartbeats.py): with thousands
of runners re-parking, each claim's reads are shared. Heartbeats are judged together on the
writer (one read of the runners they name); whether anything is offerable is read once and
stands for later claims until something pokes, a lease it saw is due, or a second passes."""

from __future__ import annotations

import threading

import pytest

from gg.server.dispatch import NOTHING_HOLDS_FOR
from gg.settings import Settings

from support import auth, http_runner, wait_until

CLAIM = "/v1/runner/claim"
# Store.offer_state's read: what falls due next, then whether a flight is ready
OFFER_STATE = "FROM flight_retries WHERE held = 1), EXISTS (SELECT 1 FROM flights WHERE stage"
RUNNERS_READ = "FROM runners WHERE id IN ("


@pytest.fixture
def settings():
    return Settings(dev=True, claim_wait=30, lease_ttl=60)


def _runner(client, name: str) -> str:
    return http_runner(client, name, client.owner)


def _counting(client, *needles: str) -> dict[str, int]:
    """How often each statement containing a needle runs from now on (every thread)."""
    seen = dict.fromkeys(needles, 0)
    lock = threading.Lock()

    def trace(sql: str) -> None:
        for needle in needles:
            if needle in sql:
                with lock:
                    seen[needle] += 1

    client.store.db.trace(trace)
    return seen


def _beat(client, credential: str) -> int:
    return client.post(CLAIM, json={"wait": 0, "readings": {"cpu_percent": 1.0}},
                       headers=auth(credential)).status_code


def test_heartbeat_claims_on_an_idle_queue_read_whether_anything_is_offerable_once(
        client, clock):
    fleet = [_runner(client, f"r{i}") for i in range(5)]
    seen = _counting(client, OFFER_STATE)
    for _ in range(4):
        for credential in fleet:
            assert _beat(client, credential) == 204  # nothing for you
    assert seen[OFFER_STATE] == 1  # the first claim read it; the nineteen others knew
    clock.advance(NOTHING_HOLDS_FOR)  # a second on: read again, once
    for credential in fleet:
        assert _beat(client, credential) == 204
    assert seen[OFFER_STATE] == 2


def test_a_flight_opened_after_a_read_found_nothing_goes_to_the_next_claim(client, clock):
    credential = _runner(client, "r")
    assert _beat(client, credential) == 204  # nothing offerable, known from now on
    opened = client.post("/v1/flights", json={"command": ["true"]}, headers=auth(client.owner))
    assert opened.status_code == 201, opened.text
    got = client.post(CLAIM, json={"wait": 0, "readings": {"cpu_percent": 1.0}},
                      headers=auth(credential))  # the open poked: what was known is not
    assert got.status_code == 200 and got.json()["flight"]["id"] == opened.json()["id"]


def test_a_lease_due_is_offered_again_to_a_claim_although_nothing_poked(client, clock):
    holder, other = _runner(client, "holder"), _runner(client, "other")
    opened = client.post("/v1/flights", json={"command": ["true"]}, headers=auth(client.owner))
    assert client.post(CLAIM, json={"wait": 0}, headers=auth(holder)).status_code == 200
    assert _beat(client, other) == 204  # read: nothing offerable, the lease due in 60 s
    clock.advance(30)
    assert _beat(client, holder) == 204 and _beat(client, other) == 204
    clock.advance(31)  # the holder went silent: its lease is due, with no poke
    got = client.post(CLAIM, json={"wait": 0}, headers=auth(other))
    assert got.status_code == 200 and got.json()["flight"]["id"] == opened.json()["id"]


def test_many_runners_heartbeats_are_judged_by_one_read_of_the_runners(client):
    fleet = [_runner(client, f"r{i}") for i in range(6)]
    core = client.app.state.core
    gate = threading.Event()
    held = core.store.db.submit(lambda: gate.wait(30))  # the writer is busy meanwhile
    seen = _counting(client, RUNNERS_READ)
    answers: list[int] = []
    claims = [threading.Thread(target=lambda c=c: answers.append(_beat(client, c)))
              for c in fleet]
    for claim in claims:
        claim.start()
    try:
        wait_until(lambda: len(core.heartbeats.pending) == len(fleet), timeout=30,
                   what="every heartbeat noted while the writer is busy")
    finally:
        gate.set()
    for claim in claims:
        claim.join(30)
    held.result(timeout=30)
    assert answers == [204] * len(fleet)
    assert seen[RUNNERS_READ] == 1


@pytest.mark.parametrize("settings", [Settings(dev=True, claim_wait=30, claim_wait_spread=6)])
def test_heartbeat_claims_parked_together_end_each_at_its_own_moment_of_the_spread(client):
    fleet = [_runner(client, f"r{i}") for i in range(12)]
    dispatcher = client.app.state.dispatcher
    answers: list[int] = []
    claims = [threading.Thread(target=lambda c=c: answers.append(client.post(
        CLAIM, json={"wait": 30, "readings": {"cpu_percent": 1.0}}, headers=auth(c)).status_code))
        for c in fleet]
    plain = threading.Thread(target=lambda: answers.append(client.post(
        CLAIM, json={"wait": 30}, headers=auth(fleet[0])).status_code))
    for claim in claims:
        claim.start()
    try:
        wait_until(lambda: dispatcher.parked_count == len(fleet), timeout=30,
                   what="every heartbeat claim parked")
        waits = [p.waits for p in list(dispatcher.parked.values())]
        plain.start()  # a claim without readings (an older runner's): the wait it asked
        wait_until(lambda: dispatcher.parked_count == len(fleet) + 1, timeout=30,
                   what="the plain claim parked")
        assert [p.waits for p in list(dispatcher.parked.values())
                if not p.instructable] == [30]
    finally:
        for runner_id in {p.runner_id for p in list(dispatcher.parked.values())}:
            dispatcher.loop.call_soon_threadsafe(dispatcher.release, runner_id)
        for claim in [*claims, plain]:
            if claim.is_alive():
                claim.join(30)
    assert all(24 <= w <= 30 for w in waits), waits  # within the wait's last 6 seconds
    assert len(set(waits)) > 1, waits  # not all together: each drew its own moment
    assert answers == [204] * (len(fleet) + 1)


def test_claims_arriving_while_the_offerable_read_is_under_way_take_its_answer(client):
    fleet = [_runner(client, f"r{i}") for i in range(5)]
    dispatcher = client.app.state.dispatcher
    release = threading.Event()
    reads = [0]

    def trace(sql: str) -> None:
        if OFFER_STATE in sql:
            reads[0] += 1
            release.wait(30)  # the read stays on its way while the other claims come

    client.store.db.trace(trace)
    answers: list[int] = []
    claims = [threading.Thread(target=lambda c=c: answers.append(_beat(client, c)))
              for c in fleet]
    try:
        for claim in claims:
            claim.start()
        wait_until(lambda: dispatcher.reads_shared >= len(fleet) - 1, timeout=30,
                   what="every later claim waiting for the read under way")
    finally:
        release.set()
        for claim in claims:
            claim.join(30)
    assert answers == [204] * len(fleet)
    assert reads[0] == 1  # one read answered all five (a read each before)


def test_a_runner_back_online_leaves_known_that_nothing_is_offerable(client, clock):
    fleet = [_runner(client, f"r{i}") for i in range(3)]
    for credential in fleet:
        assert _beat(client, credential) == 204
    clock.advance(client.app.state.core.settings.offline_after + 1)  # the fleet went silent
    seen = _counting(client, OFFER_STATE)
    for credential in fleet:
        assert _beat(client, credential) == 204  # each one back: nothing became ready
    assert seen[OFFER_STATE] == 1  # a fleet's first check-ins after a restart: one read


def test_a_runner_relabelled_while_parked_is_offered_the_flight_it_now_fits(client):
    credential = _runner(client, "r")
    opened = client.post("/v1/flights", json={"command": ["true"], "labels": {"gpu": "a100"}},
                         headers=auth(client.owner))
    assert opened.status_code == 201, opened.text
    dispatcher = client.app.state.dispatcher
    got: list = []
    claim = threading.Thread(target=lambda: got.append(client.post(
        CLAIM, json={"wait": 30, "readings": {"cpu_percent": 1.0}}, headers=auth(credential))))
    claim.start()
    try:
        wait_until(lambda: dispatcher.parked_count == 1, timeout=30, what="the claim parked")
        assert client.post("/v1/runner/check-in", json={"labels": {"gpu": "a100"}},
                           headers=auth(credential)).status_code == 200
    finally:
        claim.join(30)
        for parked in list(dispatcher.parked.values()):  # only when it failed: end the claim
            dispatcher.loop.call_soon_threadsafe(dispatcher.release, parked.runner_id)
    assert got and got[0].status_code == 200, got and got[0].text
    assert got[0].json()["flight"]["id"] == opened.json()["id"]
