"""Artifacts' use cases on both stores (files beside SQLite, chunk rows on PostgreSQL): a
content stored once however many names point at it, read back a chunk at a time, refused
whole past the server's quota, and dropped with the last flight that names it."""

from __future__ import annotations

import hashlib
from dataclasses import replace

import pytest

from gg.control import artifacts, flights, leases, retention
from gg.domain.artifacts import CHUNK
from gg.domain.flight_spec import FlightSpec
from gg.errors import TooLarge
from gg.settings import Settings

from support import check_in, make_runner

STORES = ("sqlite", "postgresql")

DAY = 86400.0


@pytest.fixture
def settings() -> Settings:
    return Settings(dev=True, claim_wait=30, lease_ttl=600, offline_after=45,
                    retain_flights=10 * DAY, retain_events=30 * DAY)


def _flying(core, owner, runner):
    check_in(core, runner)
    f = flights.open_flight(core, owner, FlightSpec(command=["true"]))
    flight, grant = leases.try_claim(core, runner.id)
    assert flight.id == f.id
    return f.id, grant.epoch, core.store.runner(runner.id)


def _upload(core, holder, flight_id, epoch, name, data: bytes, tmp_path) -> dict:
    spooled = tmp_path / f"spooled-{name.replace('/', '-')}"
    spooled.write_bytes(data)
    return artifacts.uploaded(core, holder, flight_id, epoch=epoch, name=name,
                              digest=hashlib.sha256(data).hexdigest(), size=len(data),
                              spooled=spooled, spool=tmp_path)


def _land(core, holder, flight_id, epoch):
    leases.hand_back(core, holder, flight_id, epoch=epoch, outcome="landed", exit_code=0,
                     reason=None, key=None)


def test_a_content_is_stored_once_however_many_names_and_read_back_in_chunks(
        core, owner, tmp_path):
    runner = make_runner(core, owner, "r1")
    flight_id, epoch, holder = _flying(core, owner, runner)
    data = bytes(range(256)) * (CHUNK // 256) * 2 + b"tail"  # two chunks and a bit
    assert _upload(core, holder, flight_id, epoch, "dist/a.bin", data, tmp_path)["stored"]
    assert not _upload(core, holder, flight_id, epoch, "dist/b.bin", data, tmp_path)["stored"]
    assert not _upload(core, holder, flight_id, epoch, "dist/a.bin", data, tmp_path)["stored"]
    assert core.store.db.one("SELECT count(*) FROM artifact_blobs")[0] == 1
    row, chunks = artifacts.opened(core, flight_id, "dist/b.bin")
    read = list(chunks)
    assert len(read) == 3 and max(len(c) for c in read) <= CHUNK
    assert b"".join(read) == data and row["sha256"] == hashlib.sha256(data).hexdigest()
    assert [a["name"] for a in artifacts.listed(core, flight_id)["artifacts"]] == [
        "dist/a.bin", "dist/b.bin"]


def test_past_the_servers_quota_an_upload_is_refused_whole(core, owner, tmp_path):
    core.settings = replace(core.settings, artifact_quota=1000)
    runner = make_runner(core, owner, "r1")
    flight_id, epoch, holder = _flying(core, owner, runner)
    _upload(core, holder, flight_id, epoch, "small.txt", b"x" * 600, tmp_path)
    with pytest.raises(TooLarge) as refused:
        _upload(core, holder, flight_id, epoch, "more.txt", b"y" * 600, tmp_path)
    assert str(refused.value) == ("the server's artifacts would take 1.2k, over its quota of "
                                  "1000 bytes (gg server --artifact-quota)")
    assert [a["name"] for a in artifacts.listed(core, flight_id)["artifacts"]] == ["small.txt"]
    assert core.store.blobs_bytes() == 600


def test_pruning_a_flight_drops_the_contents_only_it_named(core, owner, tmp_path, clock):
    runner = make_runner(core, owner, "r1")
    old, epoch, holder = _flying(core, owner, runner)
    _upload(core, holder, old, epoch, "shared.txt", b"shared", tmp_path)
    _upload(core, holder, old, epoch, "own.txt", b"only the old flight's", tmp_path)
    _land(core, holder, old, epoch)
    clock.advance(20 * DAY)
    kept, epoch, holder = _flying(core, owner, runner)
    _upload(core, holder, kept, epoch, "shared-too.txt", b"shared", tmp_path)
    _land(core, holder, kept, epoch)
    clock.advance(5 * DAY)
    for _ in range(100):
        if not retention.prune_batch(core).full:
            break
    assert core.store.flight(old) is None and core.store.flight(kept) is not None
    left = {r[0] for r in core.store.db.all("SELECT digest FROM artifact_blobs")}
    assert left == {hashlib.sha256(b"shared").hexdigest()}
    assert core.store.db.one("SELECT count(*) FROM flight_artifacts WHERE flight_id = ?",
                             (old,))[0] == 0
    if core.store.dialect == "sqlite":
        files = sorted(p.name for p in (tmp_path / "artifacts").rglob("*")
                       if p.is_file() and p.parent.name != "spool")
        assert files == [hashlib.sha256(b"shared").hexdigest()]
    else:
        assert {r[0] for r in core.store.db.all("SELECT DISTINCT digest FROM artifact_chunks")} \
            == left
    _, chunks = artifacts.opened(core, kept, "shared-too.txt")
    assert b"".join(chunks) == b"shared"
