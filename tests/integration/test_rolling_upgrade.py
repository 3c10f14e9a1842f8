"""A rolling upgrade, run for real: replicas and runners of the previous version and of this
one side by side on one PostgreSQL database (docs/scale-out.md, "Storage: upgrades with two
adjacent versions side by side").

The previous version is real older code, taken from this checkout's history: the newest
commit on the first-parent line of ``HEAD`` whose migrations are fewer than this tree's, that
is the code just before the latest schema change (every later commit has this tree's schema,
so running beside it would upgrade nothing; with a migration not committed yet, ``HEAD``
itself is the previous version). So the test keeps its meaning as migrations are added. Its
``gg`` package is extracted with ``git archive`` and run by the same interpreter with the same
installed dependencies: ``PYTHONPATH`` names the extracted folder and ``PYTHONSAFEPATH`` keeps
the working directory (this tree's own ``gg``) off the path.

Without such a commit (the newest migration already in the root commit) the test fails and
says why. It skips, saying why, only where there is no history to take a previous version
from: a source tree that is not a git checkout at all (an unpacked sdist), or a shallow clone
(``.ci/run`` fetches the whole history of one first).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg
import pytest

from gg.api import paths
from gg.launch import LocalServer, sign_in
from gg.proof.invariants import check_postgresql
from gg.refusals import Internal
from gg.store.migrations import MIGRATIONS

from replica_support import ReplicaSet
from support import FAST, wait_until

ROOT = Path(__file__).resolve().parents[2]
# A migration as a commit's gg writes it: a line of the list gg.store.migrations.MIGRATIONS
# (``Migration(N, ...``), or, in versions before that list, a decorator (``@migration(N, ...``)
# in whichever store module held the migration.
LISTED = r"[mM]igration\([0-9]+"
REGISTERED = re.compile(r"[mM]igration\(([0-9]+)")
CURRENT = {m.number for m in MIGRATIONS}
# Leases of 10 s (renewed at 5): the test proves each flight flies once across versions, not
# how a lease runs out, and on two busy cores a runner switching replicas under 3 s leases
# could lose one to load alone (its flight then flies again, legitimately).
PROTOCOL = {**FAST, "GG_LEASE_TTL": "10", "GG_LEASE_RENEW_AT": "5"}
LEASE_TTL = float(PROTOCOL["GG_LEASE_TTL"])


# -- the previous version ---------------------------------------------------------------------


def _git(*args: str) -> subprocess.CompletedProcess:
    # safe.directory: a checkout owned by another user than the one testing is still read
    return subprocess.run(["git", "-c", f"safe.directory={ROOT}", "-C", str(ROOT), *args],
                          capture_output=True, text=True, timeout=60)


def _migrations_at(commits: list[str]) -> dict[str, set[int]]:
    """The migration numbers each commit's ``gg`` registers (read as this tree writes them)."""
    done = _git("grep", "-o", "-E", LISTED, *commits, "--", "gg/*.py")
    if done.returncode not in (0, 1):  # 1: no match anywhere
        pytest.fail(f"git grep failed: {done.stderr.strip()}")
    found: dict[str, set[int]] = {c: set() for c in commits}
    for line in done.stdout.splitlines():
        commit, _, match = line.partition(":")
        found[commit].update(int(n) for n in REGISTERED.findall(match))
    return found


def previous_version() -> str:
    """The newest first-parent commit of HEAD that lacks some of this tree's migrations."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout (an sdist?): the previous version is taken from the "
                    "history, and this source tree has none")
    current = CURRENT
    written = {int(n) for path in (ROOT / "gg").rglob("*.py")
               for n in REGISTERED.findall(path.read_text())}
    assert written == current, (
        f"this test reads a commit's migrations as 'Migration(N' or '@migration(N' in gg/*.py, "
        f"which finds "
        f"{sorted(written ^ current)} differently from the registry: teach it the new way")
    listed = _git("rev-list", "--first-parent", "HEAD")
    assert listed.returncode == 0, f"git rev-list failed: {listed.stderr.strip()}"
    commits = listed.stdout.split()
    for start in range(0, len(commits), 64):
        batch = commits[start:start + 64]
        found = _migrations_at(batch)
        for commit in batch:
            if found[commit] == current:
                continue
            assert found[commit] < current, (
                f"commit {commit[:12]} registers migrations {sorted(found[commit] - current)} "
                f"that this tree does not: migrations are append-only")
            return commit
    if _git("rev-parse", "--is-shallow-repository").stdout.strip() == "true":
        pytest.skip(f"this clone is shallow (down to {commits[-1][:12]}, every commit with all "
                    f"of this tree's migrations): fetch its whole history (git fetch "
                    f"--unshallow, as .ci/run does) to run the previous version beside this one")
    pytest.fail(
        f"every commit in this checkout's history, down to {commits[-1][:12]}, already has "
        f"all of this tree's migrations, so there is no previous version to upgrade from")


@dataclass(frozen=True)
class Previous:
    commit: str
    env: dict[str, str]  # what runs its gg: added to a process's environment
    migrations: frozenset[int]
    claims_next: bool  # its protocol says hand_back_claims: a hand-back may ask for the next
    usage_rides: bool = False  # its protocol says hand_back_usage: the usage note rides along


@pytest.fixture(scope="module")
def previous(tmp_path_factory) -> Previous:
    """The previous version, extracted, and checked to be what a process given its
    environment imports (from this tree's directory, where ``gg`` would be this one)."""
    commit = previous_version()
    where = tmp_path_factory.mktemp("previous")
    archive = subprocess.Popen(["git", "-c", f"safe.directory={ROOT}", "-C", str(ROOT),
                                "archive", commit, "gg"],
                               stdout=subprocess.PIPE)
    subprocess.run(["tar", "-x", "-C", str(where)], stdin=archive.stdout, check=True, timeout=60)
    archive.stdout.close()
    assert archive.wait(timeout=60) == 0, f"git archive {commit} failed"
    (where / "gg" / "BUILD_COMMIT").write_text(commit + "\n")  # as a release build writes it
    env = {"PYTHONPATH": str(where), "PYTHONSAFEPATH": "1"}
    # Run from this tree, where a plain `python -m gg` would find this tree's gg first.
    probe = subprocess.run(
        # MIGRATIONS: a dict keyed by number before the list, a tuple of Migration since
        [sys.executable, "-c", "import json, gg, gg.store; from gg.store.migrations import "
         "MIGRATIONS; from gg.settings import Settings; print(json.dumps([gg.__file__, "
         "sorted(getattr(m, 'number', m) for m in MIGRATIONS), "
         "bool(Settings().protocol().get('hand_back_claims')), "
         "bool(Settings().protocol().get('hand_back_usage'))]))"],
        env={**os.environ, **env}, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert probe.returncode == 0, probe.stderr
    loaded, numbers, claims_next, usage_rides = json.loads(probe.stdout)
    assert Path(loaded).is_relative_to(where), f"the previous version ran {loaded}"
    assert set(numbers) < CURRENT, (commit, numbers)
    return Previous(commit, env, frozenset(numbers), claims_next, usage_rides)


# -- the upgrade ------------------------------------------------------------------------------


def _applied(url: str) -> set[int]:
    with psycopg.connect(url) as conn:
        return {n for (n,) in conn.execute("SELECT number FROM _migrations")}


def _commit(server: LocalServer) -> str:
    return httpx.get(server.url + "/v1/health", timeout=30).json()["commit"]


def _held(tmp_path: Path, name: str) -> list[str]:
    """A command that runs until the file ``name`` exists (the test lets it go)."""
    gate = tmp_path / name
    return ["sh", "-c", f"while [ ! -e {gate} ]; do sleep 0.05; done"]


def _answered(server: LocalServer) -> dict[tuple[str, str], float]:
    """Requests this replica answered since it started, by (route, status): its /metrics."""
    counts: dict[tuple[str, str], float] = {}
    for line in httpx.get(server.url + "/metrics", timeout=30).text.splitlines():
        found = re.match(r'gg_http_requests_total\{(.*)\} (\S+)$', line)
        if found:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', found[1]))
            key = (labels["route"], labels["status"])
            counts[key] = counts.get(key, 0) + float(found[2])
    return counts


def _answered_well(server: LocalServer, who: str, hand_backs_refused: int = 0) -> None:
    """No request failed on the server's side (5xx), and none was refused as not understood
    (400: a body it cannot read) but the hand-backs expected to carry ``claim_next``."""
    counts = _answered(server)
    failed = {k: n for k, n in counts.items() if k[1].startswith("5")}
    assert not failed, f"{who} failed {failed} (all: {counts})"
    refused = {k: n for k, n in counts.items() if k[1] == "400"}
    expected = {(paths.LEASE_HAND_BACK, "400"): hand_backs_refused} if hand_backs_refused else {}
    assert refused == expected, f"{who} refused {refused} (all: {counts})"


def _hand_backs(tmp_path: Path, runner: str) -> list[tuple[str, dict]]:
    """(flight, body) of every hand-back ``runner`` sent, from its sent log."""
    lines = (tmp_path / f"state-{runner}" / "sent.jsonl").read_text().splitlines()
    return [(e["path"].split("/")[-2], e["body"]) for e in map(json.loads, lines)
            if e["path"].endswith("/hand-back")]


class Upgrade:
    """The fleet under upgrade: replicas A (index 0, first the previous version) and B (this
    version) on one database, runners of both versions on each."""

    def __init__(self, replicas: ReplicaSet, previous: Previous, tmp_path: Path):
        self.replicas = replicas
        self.previous = previous
        self.tmp_path = tmp_path
        self.opened: list[str] = []

    def open(self, replica: int, **body) -> str:
        flight = self.replicas.api(replica).open_flight(
            {"command": ["echo", "upgraded"], **body})["id"]
        self.opened.append(flight)
        return flight

    def online(self, *names: str) -> None:
        def listed():
            try:
                rows = {r["name"]: r for r in self.replicas.api(0).runners()}
            except Internal:  # the previous version, once per statement it had prepared
                return False  # before this version's migration added a column under it
            return all(n in rows and rows[n]["online"] for n in names)
        wait_until(listed, 60, interval=0.2, what=f"runners {names} online")

    def registered(self) -> list[tuple[str, str]]:
        return sorted((r["name"], r["id"]) for r in self.replicas.api(0).runners())

    def stage(self, flight: str, replica: int = 0) -> str:
        return self.replicas.api(replica).flight(flight)["stage"]

    def landed(self, flights: list[str], replica: int, what: str) -> None:
        def all_landed() -> bool:
            try:
                return all(self.stage(f, replica) == "landed" for f in flights)
            except Internal:  # as in online(): the previous version's prepared statements
                return False
        wait_until(all_landed, 60, interval=0.2, what=what)

    def every_pairing(self, runners: list[str], what: str) -> None:
        """A flight for each runner opened through each replica, and one for any runner
        through each: every one lands."""
        flights = [self.open(i, runner=name) for name in runners for i in (0, 1)]
        flights += [self.open(i) for i in (0, 1)]
        self.landed(flights, 1, what)


@pytest.fixture
def upgrade(previous, pg_cluster, tmp_path):
    url = pg_cluster.new_database(migrated=False)  # the previous version makes its schema
    replicas = ReplicaSet(tmp_path, url, 2, dict(PROTOCOL))
    replicas.servers[0].env = {**replicas.env, **previous.env}
    try:
        yield Upgrade(replicas, previous, tmp_path)
    finally:
        replicas.stop()


@pytest.mark.timeout(400)  # two versions' servers and eight runners: ~50 s, minutes when loaded
def test_a_rolling_upgrade_from_the_previous_version_lands_every_flight_once(upgrade):
    up, replicas, previous = upgrade, upgrade.replicas, upgrade.previous
    a, b = replicas.servers
    url = replicas.database_url
    everyone = ["old-a", "new-a", "old-b", "new-b"]

    # 1. The previous version alone: it made the schema it knows, and serves.
    a.start(timeout=60)
    sign_in(replicas.config_dir, a.url, replicas.owner_token())
    assert _commit(a) == previous.commit
    assert _applied(url) == previous.migrations
    replicas.runner("old-a", first=0, only=True, env=previous.env)
    replicas.runner("new-a", first=0)
    up.online("old-a", "new-a")
    held = [up.open(0, runner=name, command=_held(up.tmp_path, "go"))
            for name in ("old-a", "new-a")]
    wait_until(lambda: all(up.stage(f) == "flying" for f in held), 60,
               what="both runners on the previous version's replica to fly a held flight")

    # 2. A replica of this version starts on the same database and migrates it forward
    #    under its lock while the old one serves (the held flights' lease calls go there).
    b.start(timeout=60)
    assert _commit(b) != previous.commit
    assert _applied(url) == CURRENT
    replicas.runner("old-b", first=1, env=previous.env)
    replicas.runner("new-b", first=1)
    up.online("old-b", "new-b")
    (up.tmp_path / "go").touch()
    up.landed(held, 0, "the held flights to land through the old replica")
    up.every_pairing(everyone, "every flight of the mixed fleet to land")
    # A new runner granted its flights by an old replica that does not know claim_next never
    # asks it for one.
    if not previous.claims_next:
        assert all("claim_next" not in body for _, body in _hand_backs(up.tmp_path, "new-a"))

    # 3. A flight granted by the new replica is handed back through the old one (the new
    #    one went away mid-flight; a balancer spreading requests does the same).
    crossing = up.open(1, runner="new-b", command=_held(up.tmp_path, "cross"))
    wait_until(lambda: up.stage(crossing, 1) == "flying", 60,
               what="the runner on the new replica to fly the held flight")
    _answered_well(b, "the new replica")
    b.stop()
    (up.tmp_path / "cross").touch()
    up.landed([crossing], 0, "the flight granted by the new replica to land through the old")
    assert len(replicas.api(0).flight(crossing)["attempts"]) == 1, "it flew again"
    # It asked for its next flight: an old replica that does not know the field refused it,
    # and it was sent again without (the sent log has every attempt, one at the stopped
    # replica too if it was tried first); one that knows it answered it.
    asked = [body.get("claim_next") for flight, body in _hand_backs(up.tmp_path, "new-b")
             if flight == crossing]
    if previous.claims_next:
        assert set(asked) == {1}, asked
    else:
        assert asked[-1] is None and set(asked[:-1]) == {1}, asked
    b.start(timeout=60)

    # 4. The previous version restarted against the newer schema starts and serves.
    # The crossing hand-back carried the usage note the new replica's protocol takes
    # (hand_back_usage): the old replica refused it once, and it went again without.
    usage_refused = 0 if previous.usage_rides else 1
    _answered_well(a, "the old replica",
                   hand_backs_refused=usage_refused + (0 if previous.claims_next else 1))
    a.stop()
    a.start(timeout=60)
    assert _commit(a) == previous.commit and _applied(url) == CURRENT
    up.every_pairing(everyone, "every flight to land with the old replica restarted")
    _answered_well(a, "the restarted old replica")
    _answered_well(b, "the restarted new replica")

    # 5. The old replica is replaced by one of this version (its address and data dir), and
    #    the old runner pinned to that address by this version's runner (its state dir). The
    #    runner stops first: a claim it sends as it stops may park after its goodbye, and
    #    would take a flight opened meanwhile to a process that is gone (it would fly again
    #    when its lease ran out); stopping the replica it parked on ends it.
    registered = up.registered()
    next(r for r in replicas.runners if r.name == "old-a").stop()
    a.stop()
    c = replicas.servers[0] = LocalServer(a.data_dir, a.port, env=replicas.env,
                                          log=up.tmp_path / "replica0-new.log")
    c.start(timeout=60)
    assert _commit(c) == _commit(b) != previous.commit
    replicas.runner("old-a", first=0, only=True)
    up.every_pairing(everyone, "every flight to land with the old replica replaced")
    assert up.registered() == registered  # the upgraded runner kept its registration
    _answered_well(c, "the replacing replica")

    # Every flight landed once, on one grant; nothing recorded twice; no lease ran out.
    report = check_postgresql(url, lease_ttl=LEASE_TTL, stuck_grace=LEASE_TTL)
    assert report.ok, report.summary()
    with psycopg.connect(url) as conn:
        grants = dict(conn.execute("SELECT flight_id, count(*) FROM grants GROUP BY flight_id"))
        landed = dict(conn.execute("SELECT flight_id, count(*) FROM events "
                                   "WHERE kind = 'info:flight:landed' GROUP BY flight_id"))
        duplicates = conn.execute(
            "SELECT kind, flight_id, runner_id, body, count(*) FROM events "
            "WHERE kind NOT LIKE 'info:runner:%' GROUP BY kind, flight_id, runner_id, body "
            "HAVING count(*) > 1").fetchall()
        expired = conn.execute("SELECT count(*) FROM events "
                               "WHERE kind = 'info:flight:expired'").fetchone()[0]
        commits = {name: json.loads(inventory).get("gg_commit") for name, inventory in
                   conn.execute("SELECT name, inventory FROM runners")}
        again = {f: conn.execute("SELECT kind, runner_id, body FROM events WHERE flight_id = %s "
                                 "ORDER BY seq", (f,)).fetchall()
                 for f, n in grants.items() if n != 1}
    assert not again, f"flights granted more than once, with their events: {again}"
    assert grants == {f: 1 for f in up.opened} and landed == grants
    assert not duplicates and expired == 0
    assert commits["old-b"] == previous.commit
    assert commits["new-a"] == commits["new-b"] == commits["old-a"] != previous.commit
    for log in ("replica0.log", "replica0-new.log", "replica1.log",
                *(f"runner-{name}.log" for name in everyone)):
        text = (up.tmp_path / log).read_text()
        assert "Traceback" not in text, f"{log}:\n{text[-3000:]}"
