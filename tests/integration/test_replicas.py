"""Several ``gg server`` replicas on one PostgreSQL database: wake-ups cross them and the
background duties are done once.

Real replicas (tests/replica_support.py) and real runners. Where a test is about a wake-up,
check-ins and re-parked claims are minutes apart (PARKED), so only the wake-up can answer in
time: without it, each wait below would run into its bound.
"""

from __future__ import annotations

import json
import signal
import threading

import httpx
from integration.test_hooks import Receiver

from gg.client import Client

from support import new_key, wait_until

PARKED = {"GG_CHECK_IN_INTERVAL": "120", "GG_CLAIM_WAIT": "120", "GG_OFFLINE_AFTER": "300"}


def _sent(replicas, name: str, ending: str) -> list[dict]:
    path = replicas.root / f"state-{name}" / "sent.jsonl"
    if not path.exists():
        return []
    return [e for e in (json.loads(line) for line in path.read_text().splitlines() if line)
            if e["path"].endswith(ending)]


def _in_background(fn):
    """Call ``fn`` in a thread; a list that holds its answer once it came."""
    out: list = []
    thread = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    thread.start()
    return out


def test_a_flight_opened_on_one_replica_answers_a_claim_parked_on_another(make_replicas):
    replicas = make_replicas(2, PARKED)
    replicas.runner("b", first=1, only=True)
    wait_until(lambda: _sent(replicas, "b", "/claim"), what="its claim to park on replica 1")
    flight = replicas.api(0).open_flight({"command": ["echo", "crossed"]})["id"]
    wait_until(lambda: replicas.api(1).flight(flight)["stage"] == "landed", 30,
               what="the flight opened on replica 0 to land through replica 1")
    shown = replicas.api(0).flight(flight)
    assert shown["runner"] and len(shown["attempts"]) == 1


def test_wake_ups_cross_again_after_the_listening_connections_were_cut(make_replicas):
    import psycopg

    replicas = make_replicas(2, PARKED)
    replicas.runner("b", first=1, only=True)
    wait_until(lambda: _sent(replicas, "b", "/claim"), what="its claim to park on replica 1")
    listening = ("SELECT pid, backend_start FROM pg_stat_activity "
                 "WHERE datname = current_database() AND query LIKE 'LISTEN%'")
    with psycopg.connect(replicas.database_url, autocommit=True) as conn:
        before = wait_until(lambda: (rows := conn.execute(listening).fetchall())
                            and len(rows) == 2 and rows, what="both replicas listening")
        for pid, _ in before:
            conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
        wait_until(lambda: len({pid for pid, _ in conn.execute(listening).fetchall()}
                               - {pid for pid, _ in before}) == 2, 30,
                   what="both replicas listening again on new connections")
    flight = replicas.api(0).open_flight({"command": ["echo", "again"]})["id"]
    wait_until(lambda: replicas.api(1).flight(flight)["stage"] == "landed", 30,
               what="the flight opened on replica 0 to land through replica 1")


def test_an_instruction_reaches_a_runner_parked_on_another_replica(make_replicas):
    replicas = make_replicas(2, PARKED)
    replicas.runner("d", first=1, only=True)
    wait_until(lambda: _sent(replicas, "d", "/claim"), what="its claim to park on replica 1")
    done = replicas.gg("runner", "drain", "d", replica=0)
    assert done.returncode == 0, done.stderr
    wait_until(lambda: "told to drain: taking nothing new" in replicas.log("d"), 30,
               what="the runner parked on replica 1 to hear the drain decided on replica 0")


def test_a_runner_retired_on_one_replica_is_refused_by_another_at_once(make_replicas):
    """Each replica caches runner credentials; the retirement on replica 0 drops replica 1's
    entry (cached for ten minutes here), so its very next request there is refused."""
    replicas = make_replicas(2, {"GG_CREDENTIAL_CACHE_TTL": "600"})
    credential = Client(replicas.servers[1].url, replicas.owner_token()).register(
        {"name": "leaving"}, new_key()).credential

    def check_in() -> httpx.Response:
        return httpx.post(replicas.servers[1].url + "/v1/runner/check-in", json={},
                          headers={"authorization": f"Bearer {credential}"})

    assert check_in().status_code == 200 and check_in().status_code == 200  # cached now
    replicas.api(0).retire_runner("leaving")
    refused = wait_until(lambda: (r := check_in()).status_code == 403 and r, 20,
                         what="replica 1 to refuse the retired runner's credential")
    assert refused.json()["error"]["code"] == "runner_retired"


def test_followers_served_by_one_replica_hear_what_another_recorded(make_replicas, tmp_path):
    replicas = make_replicas(2, PARKED)
    replicas.runner("a", first=0, only=True)
    gate = tmp_path / "go"
    flight = replicas.api(0).open_flight({"command": [
        "sh", "-c", f"echo one; while [ ! -e {gate} ]; do sleep 0.05; done; echo two"]})["id"]
    follower = Client(replicas.servers[1].url, replicas.owner_token())

    def output(facts) -> str:
        return "".join(f.body.get("text", "") for f in facts if f.kind == "output")

    first = wait_until(lambda: follower.facts(flight).facts if "one" in output(
        follower.facts(flight).facts) else None, 30, what="the first line")
    after = max(f.seq for f in first)
    answer = _in_background(lambda: follower.facts(flight, after=after, wait=60))
    events_after = max(e.seq for e in follower.events())
    heard = _in_background(lambda: follower.events(after=events_after, wait=60))
    gate.touch()
    wait_until(lambda: answer, 30, what="the parked read on replica 1 to be answered")
    assert "two" in output(answer[0].facts) or answer[0].facts  # woken by the report
    wait_until(lambda: heard, 30, what="the events follower on replica 1 to be answered")
    assert heard[0], "woken by an event recorded through replica 0"
    waited = replicas.gg("show", flight, "-f", replica=1)
    assert waited.returncode == 0 and "two" in waited.stdout, waited.stderr


def test_a_lease_that_expires_is_re_offered_to_a_claim_parked_on_another_replica(make_replicas):
    replicas = make_replicas(2, PARKED)
    holder = replicas.runner("holder", first=0, only=True, labels="x=1")
    flight = replicas.api(0).open_flight({"command": ["sleep", "600"],
                                          "labels": {"x": "1"}})["id"]
    wait_until(lambda: replicas.api(0).flight(flight)["stage"] == "flying", 30,
               what="the holder to take the flight")
    replicas.runner("spare", first=1, only=True, labels="x=1")
    wait_until(lambda: _sent(replicas, "spare", "/claim"), what="the spare's claim to park")
    holder.proc.send_signal(signal.SIGKILL)
    holder.proc.wait()

    def retaken():
        shown = replicas.api(1).flight(flight)
        return shown if shown["stage"] == "flying" and len(shown["attempts"]) == 2 else None

    shown = wait_until(retaken, 40, what="the expired lease to be re-offered to the spare")
    assert shown["attempts"][-1]["runner"] != shown["attempts"][0]["runner"]
    expired = replicas.api(0).events(kind="info:flight:expired", flight=flight)
    assert len(expired) == 1


def test_each_duty_is_done_once_across_replicas(make_replicas):
    """Two replicas, each with its liveness watch, attended-deadline wake, expiry looks and
    hooks' outbox: every episode is recorded once, and every hook delivery is sent once."""
    receiver = Receiver().start()
    replicas = make_replicas(2, {"GG_HOOK_BACKOFF": "0.05", "GG_HOOK_POLL": "0.2",
                                 "GG_DUTY_TTL": "2"})
    try:
        replicas.api(1).add_hook(receiver.url(), ["opened", "expired", "failed",
                                                  "runner.offline", "runner.version_skew"])
        gone = replicas.runner("gone", first=0, only=True)
        flight = replicas.api(0).open_flight({"command": ["sleep", "600"]})["id"]
        wait_until(lambda: replicas.api(1).flight(flight)["stage"] == "flying", 30,
                   what="the runner to take the flight")
        gone.proc.send_signal(signal.SIGKILL)
        gone.proc.wait()
        # A runner checking in with an old build, alternately on both replicas.
        old = Client(replicas.servers[0].url, replicas.owner_token()).register(
            {"name": "old"}, new_key()).credential
        health = httpx.get(replicas.servers[0].url + "/v1/health").json()
        for i in range(6):
            httpx.post(replicas.servers[i % 2].url + "/v1/runner/check-in",
                       json={"version": "0.0.1", "inventory": {"gg_commit": health["commit"]}},
                       headers={"authorization": f"Bearer {old}"}).raise_for_status()
        # An attended flight its runner does not take: failed once, whoever looks.
        attended = replicas.api(1).open_flight({"command": ["true"], "attended": True,
                                                "runner": "old"})["id"]

        def recorded():
            kinds = {k: replicas.api(0).events(kind=k) for k in (
                "info:flight:expired", "warn:runner:aged_out", "warn:runner:version_skew")}
            done = replicas.api(1).flight(attended)["stage"] == "failed"
            return kinds if done and all(kinds.values()) else None

        wait_until(recorded, 60, what="the expiry, the aged-out runner, the skew and the "
                                      "attended deadline")
        for i in (0, 1, 0, 1):  # more looks, on both replicas
            replicas.api(i).runners()
            replicas.api(i).flight(flight)
        events = replicas.api(0).events(limit=10000)
        episodes = [(e["kind"], e["flight_id"], e["runner_id"]) for e in events
                    if e["kind"] in ("info:flight:expired", "warn:runner:aged_out",
                                     "warn:runner:version_skew", "info:flight:failed")]
        assert len(episodes) == len(set(episodes)), "an episode recorded twice"
        wanted = {e["seq"] for e in events if e["kind"] in (
            "info:flight:opened", "info:flight:expired", "info:flight:failed",
            "warn:runner:aged_out", "warn:runner:version_skew")}
        wait_until(lambda: {json.loads(r["body"])["seq"] for r in receiver.requests} >= wanted,
                   30, what="every event delivered to the hook")
        sent = [json.loads(r["body"])["delivery"] for r in receiver.requests]
        assert len(sent) == len(set(sent)) == len(wanted), "each delivery sent once"
    finally:
        receiver.stop()


def test_a_pull_runner_is_polled_by_the_one_replica_holding_the_duty(make_replicas, tmp_path):
    """Every replica has a poller; only the holder of the ``pull`` duty polls, so a pull-mode
    runner is handed its flights by one replica, whichever served the attach or the open."""
    import psycopg

    from pull_support import PullRunner

    replicas = make_replicas(2, {"GG_DUTY_TTL": "2"})
    runner = PullRunner(tmp_path, "p1", replicas.env)
    try:
        wait_until(runner.fingerprint, what="the runner to listen")
        attached = replicas.gg("runner", "attach", runner.url, "--name", "p1", replica=1)
        assert attached.returncode == 0, attached.stderr
        flight = replicas.api(0).open_flight({"command": ["echo", "pulled"]})["id"]
        wait_until(lambda: replicas.api(1).flight(flight)["stage"] == "landed", 60,
                   what="the flight to land through the pull runner")
        with psycopg.connect(replicas.database_url) as db:
            holders = db.execute("SELECT holder FROM duties WHERE name = 'pull'").fetchall()
        assert len(holders) == 1
    finally:
        runner.stop()


def test_a_web_console_session_made_on_one_replica_works_on_another_and_ends_on_both(
        make_replicas):
    """Console sessions are rows of the shared database: nothing is sticky, so a browser
    sent to either replica by a load balancer stays signed in, and signing out ends it on
    every replica."""
    from console_support import form_token

    replicas = make_replicas(2)
    first, second = replicas.urls
    with httpx.Client(timeout=30, follow_redirects=False) as browser:  # one cookie jar
        page = browser.get(first + "/ui/login")
        signed = browser.post(first + "/ui/login", headers={"origin": first}, data={
            "token": replicas.owner_token(), "form_token": form_token(page.text)})
        assert signed.status_code == 303, signed.text
        assert browser.get(first + "/ui/flights").status_code == 200
        there = browser.get(second + "/ui/flights")
        assert there.status_code == 200, there.headers.get("location")
        out = browser.post(second + "/ui/logout", headers={"origin": second}, data={
            "form_token": form_token(there.text)})
        assert out.status_code == 303 and out.headers["location"] == "/ui/login"
        for url in (first, second):
            gone = browser.get(url + "/ui/flights")
            assert gone.status_code == 303 and gone.headers["location"] == "/ui/login"


STALE_POOL = {"environment": "ui", "inventory": {"name": "ui-pool", "size": 1, "warm": 0},
              "image": {"ref": "ui-image", "digest": "sha256:" + "c" * 64}}


def test_a_stale_pool_is_recorded_once_per_episode_across_replicas(make_replicas):
    """Three replicas, each asked for the pools over and over at the same time while the
    pool's maintainer is silent: ``warn:pool:stale`` is recorded by whichever looks first,
    once per episode (a stale episode is the time after one last attestation), never once per
    replica; the maintainer back, then silent again, is one more episode, recorded once."""
    replicas = make_replicas(3, {"GG_POOL_ATTESTATION_STALE": "3"})
    admin = replicas.api(0)
    admin.clear_gate(admin.request("POST", "/v1/environments",
                                   json={"name": "ui", "means": "true"})["gate"])
    admin.clear_gate(admin.apply_strategy("ui", STALE_POOL)["gate"]["id"])
    refused = replicas.maintainer("ui-pool", "keeper")  # registers, then is refused the pool
    assert refused.proc.wait(timeout=60) == 4, replicas.log("keeper")
    admin.allow_maintainer("ui-pool", "keeper")

    def stale_events(i: int) -> list[dict]:
        return [e for e in replicas.api(i).events(kind="warn:pool:stale", limit=1000)
                if e["body"]["pool"] == "ui-pool"]

    def silent_episode(first: int) -> float:
        """The maintainer attests through replica ``first``, then goes silent (SIGKILL)
        while every replica is asked for the pools at once, until each has seen the pool
        stale; the last attestation, which names the episode."""
        keeper = replicas.maintainer("ui-pool", "keeper", first=first)
        before = replicas.api(first).pool("ui-pool")["last_attested_at"]
        wait_until(lambda: replicas.api(first).pool("ui-pool")["last_attested_at"] != before,
                   60, what="the maintainer to attest")
        keeper.proc.send_signal(signal.SIGKILL)
        keeper.proc.wait()
        looks = [_in_background(lambda i=i: _look_until_stale(replicas.api(i)))
                 for i in range(3)]
        wait_until(lambda: all(looks), 90, what="every replica to see the pool stale")
        return replicas.api(first).pool("ui-pool")["last_attested_at"]

    first = silent_episode(0)
    second = silent_episode(1)
    assert second > first
    for i in range(3):  # each replica answers the same events: one per episode
        episodes = [e["body"]["last_attested_at"] for e in stale_events(i)]
        assert episodes.count(first) == 1 and episodes.count(second) == 1, episodes
        assert len(episodes) == len(set(episodes)), f"an episode recorded twice: {episodes}"


def _look_until_stale(api, more: int = 5) -> bool:
    """Ask for the pools until ``ui-pool`` is stale, then ``more`` times again: each look
    records the episode if nobody did yet."""
    def stale():
        [pool] = [p for p in api.pools() if p["name"] == "ui-pool"]
        return pool["attested_age"] is not None and pool["attested_age"] > 3

    wait_until(stale, 60, interval=0.02, what="the pool to be stale")
    for _ in range(more):
        api.pools()
        api.pool("ui-pool")
    return True


def test_a_stale_pool_is_recorded_once_with_nobody_looking(make_replicas):
    """Nobody lists the pools: the liveness watch of whichever replica holds it records the
    silent maintainer's episode, once, so a ``pool.stale`` hook fires on a fleet nobody
    watches."""
    replicas = make_replicas(2, {"GG_POOL_ATTESTATION_STALE": "3"})
    admin = replicas.api(0)
    admin.clear_gate(admin.request("POST", "/v1/environments",
                                   json={"name": "ui", "means": "true"})["gate"])
    admin.clear_gate(admin.apply_strategy("ui", STALE_POOL)["gate"]["id"])
    refused = replicas.maintainer("ui-pool", "keeper")
    assert refused.proc.wait(timeout=60) == 4, replicas.log("keeper")
    admin.allow_maintainer("ui-pool", "keeper")
    keeper = replicas.maintainer("ui-pool", "keeper")

    def attested() -> list[dict]:  # the events feed: reading it records nothing
        return [e for e in admin.events(kind="info:pool:attested", limit=1000)
                if e["body"].get("pool") == "ui-pool"]

    wait_until(attested, 60, what="the maintainer to attest")
    keeper.proc.send_signal(signal.SIGKILL)
    keeper.proc.wait()

    def stale_events(i: int) -> list[dict]:
        return [e for e in replicas.api(i).events(kind="warn:pool:stale", limit=1000)
                if e["body"]["pool"] == "ui-pool"]

    wait_until(lambda: stale_events(0), 60, what="the stale pool to be recorded, unasked")
    for i in range(2):
        assert len(stale_events(i)) == 1, stale_events(i)
