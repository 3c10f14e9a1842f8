"""Retries and reruns across real processes (docs/jobs.md, "Retries and reruns"): one real
control plane, two real runners over loopback, the real CLI.

Whether a retry was offered is read from the flight's state (its attempts, its stage, and a
flight opened after it that the same runner took first), never from how long anything took.
The claim wait is long, so a retry that becomes due moves only by the control plane's own
wake-up, never by a claim that timed out and asked again.
"""

from __future__ import annotations

import httpx
import pytest

from gg.domain.retries import clock

import pg_support
from support import FAST, Fleet, flight_workspace, wait_until

# fails (exit 1) until it has been run N times, counting its runs in a file
COUNTS = 'n=$(cat {f} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {f}; [ "$n" -ge {n} ]'


@pytest.fixture(scope="module")
def fleet(tmp_path_factory, request):
    root = tmp_path_factory.mktemp("retries")
    f = Fleet(root, {**FAST, "GG_CLAIM_WAIT": "60", **pg_support.fleet_store(request)}).start()
    try:
        for name in ("r1", "r2"):
            f.runner(name, workers=1)
        f.wait_online("r1", "r2")
        yield f
    finally:
        f.stop()


@pytest.fixture
def work(tmp_path):
    return flight_workspace(tmp_path / "work")


def _fly(fleet, *args: str) -> str:
    opened = fleet.gg("fly", *args)
    assert opened.returncode == 0, opened.stderr
    return opened.stdout.strip().splitlines()[0]


def _ended(fleet, flight_id: str) -> dict:
    return wait_until(lambda: (lambda d: d if d["stage"] in ("landed", "failed", "cancelled")
                               else None)(fleet.api().flight(flight_id)),
                      timeout=60, what=f"{flight_id} to end")


def test_a_flight_failing_twice_then_landing_reads_three_attempts_with_their_reasons(
        fleet, work):
    counter = work / "count"
    flight_id = _fly(fleet, "--retries", "3", "--", COUNTS.format(f=counter, n=3))
    data = _ended(fleet, flight_id)
    assert (data["stage"], data["exit_code"], counter.read_text().strip()) == ("landed", 0, "3")
    attempts = [(a["attempt"], a["ended"], a["reason"], a["retry"]) for a in data["attempts"]]
    assert attempts == [(1, "failed", "exit 1", "retry 1 of 3 after exit 1"),
                        (2, "failed", "exit 1", "retry 2 of 3 after exit 1"),
                        (3, "landed", "exit 0", None)]
    assert [a["epoch"] for a in data["attempts"]] == [1, 2, 3]
    assert data["retry"] == {"retries": 3, "on": ["failed"], "delay": None, "elsewhere": False,
                             "text": "3 on failed"}
    assert data["retried"] == 2
    shown = fleet.gg("show", flight_id).stdout
    assert "retries   3 on failed (2 used)" in shown, shown
    assert "failed (exit 1): retry 1 of 3 after exit 1" in shown, shown
    assert "failed (exit 1): retry 2 of 3 after exit 1" in shown, shown
    retried = [e for e in fleet.api().events(kind="info:flight:retried", flight=flight_id)]
    assert [(e["body"]["retry"], e["body"]["of"]) for e in retried] == [(1, 3), (2, 3)]


def test_retries_run_out_and_the_last_attempts_failure_ends_the_flight(fleet, work):
    flight_id = _fly(fleet, "--retries", "1", "--", "exit 7")
    data = _ended(fleet, flight_id)
    assert (data["stage"], data["exit_code"], data["retried"]) == ("failed", 7, 1)
    assert [(a["ended"], a["retry"]) for a in data["attempts"]] == [
        ("failed", "retry 1 of 1 after exit 7"), ("failed", None)]


def test_retry_on_timed_out_retries_a_timeout_but_not_a_failure(fleet, work):
    marker = work / "timed-once"
    slow = _fly(fleet, "--retries", "2", "--retry-on", "timed-out", "--timeout", "1s",
                "--grace", "1s", "--",
                f"if [ -e {marker} ]; then exit 0; fi; touch {marker}; exec sleep 600")
    data = _ended(fleet, slow)
    assert data["stage"] == "landed", data
    assert [(a["ended"], a["retry"]) for a in data["attempts"]] == [
        ("failed", "retry 1 of 2 after timing out"), ("landed", None)]
    failing = _fly(fleet, "--retries", "2", "--retry-on", "timed-out", "--", "exit 1")
    data = _ended(fleet, failing)
    assert (data["stage"], data["retried"], len(data["attempts"])) == ("failed", 0, 1)


def test_a_retry_delay_names_the_time_and_the_retry_is_not_offered_before_it(fleet, work):
    held = _fly(fleet, "--retries", "1", "--retry-delay", "1h", "--runner", "r1", "--",
                "exit 3")
    data = wait_until(lambda: (lambda d: d if d["retried"] == 1 else None)(
        fleet.api().flight(held)), what="the first attempt to fail and be retried")
    assert data["stage"] == "ready", data
    said, offered = data["waiting"], data["attempts"][0]["offered_at"]
    assert said.startswith(f"waiting: retry 1 of 1 is offered at {clock(offered)} (in ") \
        and said.endswith(", after exit 3"), said
    assert data["remedy"] == f"wait: it is offered then (or cancel it: gg cancel {held})"
    assert "its retry's delay is over" in fleet.gg("plan", held).stdout
    # r1 is free and claiming: a flight opened after the retry is offered to r1 first
    probe = _fly(fleet, "--runner", "r1", "--", "true")
    assert _ended(fleet, probe)["stage"] == "landed"
    data = fleet.api().flight(held)
    assert (data["stage"], len(data["attempts"])) == ("ready", 1)
    assert data["waiting"].startswith(f"waiting: retry 1 of 1 is offered at {clock(offered)}")
    fleet.gg("cancel", held, check=True)

    # a short delay: offered once due, by the control plane's own look (the claims wait 60 s)
    soon = _fly(fleet, "--retries", "1", "--retry-delay", "1s", "--",
                COUNTS.format(f=work / "soon", n=2))
    data = _ended(fleet, soon)
    assert data["stage"] == "landed"
    first, second = data["attempts"]
    assert first["retry"] == "retry 1 of 1 after exit 1"
    assert second["granted_at"] >= first["offered_at"]


def test_retry_elsewhere_goes_to_another_runner(fleet, work):
    for _ in range(2):  # whichever runner takes it first, the retry goes to the other
        flight_id = _fly(fleet, "--retries", "1", "--retry-elsewhere", "--",
                         COUNTS.format(f=work / f"elsewhere-{_}", n=2))
        data = _ended(fleet, flight_id)
        assert data["stage"] == "landed"
        first, second = data["attempts"]
        assert first["runner"] != second["runner"], data["attempts"]


def test_rerun_opens_a_new_flight_from_the_spec_linked_both_ways(fleet, work):
    counter = work / "rerun"
    old = _fly(fleet, "--retries", "2", "--title", "counts", "--", COUNTS.format(f=counter, n=1))
    assert _ended(fleet, old)["stage"] == "landed"
    made = fleet.gg("rerun", old, "--with", "title=counts again", "--with", "retries=1")
    assert made.returncode == 0, made.stderr
    new = made.stdout.strip()
    data = _ended(fleet, new)
    assert (data["stage"], data["title"], data["rerun_of"]) == ("landed", "counts again", old)
    assert data["command"] == fleet.api().flight(old)["command"]
    assert data["retry"]["retries"] == 1 and data["retry"]["on"] == ["failed"]
    assert counter.read_text().strip() == "2"  # it ran the same command again
    assert fleet.api().flight(old)["reruns"] == [new]
    assert f"rerun of  {old}" in fleet.gg("show", new).stdout
    assert f"reruns    {new}" in fleet.gg("show", old).stdout


def test_bad_retries_or_rerun_input_gets_one_sentence_and_opens_nothing(fleet):
    before = len(fleet.api().flights(limit=1000))
    for args, said in ((["--retries", "11"], "--retries is a whole number from 0 to 10"),
                       (["--retries", "1", "--retry-on", "sometimes"], "--retry-on takes"),
                       (["--retry-delay", "0"], "--retry-delay must be longer than 0s"),
                       (["--retries", "1", "--retry-delay", "2d"], "at most one day")):
        refused = fleet.gg("fly", *args, "--", "true")
        assert refused.returncode != 0, args
        assert said in refused.stderr and len(refused.stderr.strip().splitlines()) == 1, \
            refused.stderr
    http = httpx.Client(base_url=fleet.url,
                        headers={"Authorization": f"Bearer {fleet.server.owner_token()}"})
    for body in ({"retries": -1}, {"retries": 11}, {"retries": "x"}, {"on": ["never"]},
                 {"on": []}, {"delay": 0}, {"delay": 1e9}):
        answer = http.post("/v1/flights", json={"command": ["true"], "retry": body})
        assert 400 <= answer.status_code < 500, (body, answer.status_code, answer.text)
        assert answer.json()["error"]["message"], answer.text
    refused = fleet.gg("rerun", "f_nosuchflight")
    assert refused.returncode != 0 and "no flight f_nosuchflight" in refused.stderr
    refused = fleet.gg("rerun", "f_nosuchflight", "--with", "colour=blue")
    assert refused.returncode != 0 and "--with takes KEY=VALUE" in refused.stderr
    assert len(fleet.api().flights(limit=1000)) == before
