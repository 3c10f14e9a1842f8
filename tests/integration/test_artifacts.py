"""Artifacts across real processes (docs/work-graphs.md, "Artifacts"): a real ``gg server``
(restarted once), real ``gg runner up`` processes and the real CLI. Uploads fenced by the
lease epoch, stored once per digest, refused whole past a cap; a three-stage file handing the
build's artifact byte for byte to the stages after it through ``$GG_INPUTS``."""

from __future__ import annotations

import hashlib
import json
import os

import httpx
import pytest

from gg.client import Client

from support import new_key, wait_until


def _register(fleet, name: str) -> str:
    credential = fleet.api().register({"name": name}, new_key())["credential"]
    _check_in(fleet, credential)
    return credential


def _check_in(fleet, credential: str) -> None:
    httpx.post(fleet.url + "/v1/runner/check-in", json={"free_slots": 1},
               headers={"authorization": f"Bearer {credential}"}).raise_for_status()


def _claim(http, credential: str) -> dict | None:
    answer = http.post("/v1/runner/claim", json={"free_slots": 1, "wait": 0},
                       headers={"authorization": f"Bearer {credential}"})
    return answer.json() if answer.status_code == 200 else None


def _put(http, credential: str, flight: str, name: str, data: bytes, *, epoch: int,
         digest: str | None = None, size: int | None = None):
    return http.put(f"/v1/runner/flights/{flight}/artifacts/{name}", content=data,
                    params={"epoch": epoch, "sha256": digest or hashlib.sha256(data).hexdigest(),
                            "size": len(data) if size is None else size},
                    headers={"authorization": f"Bearer {credential}",
                             "content-type": "application/octet-stream"})


def _blob_files(fleet) -> list[str]:
    root = fleet.server.data_dir / "artifacts"
    return sorted(name for folder, _, files in os.walk(root) if "spool" not in folder
                  for name in files)


def _one_sentence(answer, status: int, code: str | None = None) -> str:
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    if code is not None:
        assert error["code"] == code, error
    assert error["message"].count(". ") == 0 and "\n" not in error["message"], error
    return error["message"]


def test_an_upload_is_fenced_by_the_epoch_kept_once_per_digest_and_bad_input_changes_nothing(
        make_fleet, tmp_path):
    fleet = make_fleet({"GG_OFFLINE_AFTER": "60"})
    sqlite = "GG_DATABASE_URL" not in fleet.env
    a, b = _register(fleet, "a"), _register(fleet, "b")
    api = fleet.api()
    flight = api.open_flight({"command": ["true"], "artifacts": {"limit": 1000}})["id"]
    data = b"built once\n" * 10
    digest = hashlib.sha256(data).hexdigest()
    with httpx.Client(base_url=fleet.url, timeout=30) as http:
        assert _claim(http, a)["lease"]["epoch"] == 1
        first = _put(http, a, flight, "dist/app.txt", data, epoch=1)
        assert first.status_code == 200 and first.json()["stored"] is True, first.text
        # sent again (a lost answer retried), and the same bytes under another name: one copy
        again = _put(http, a, flight, "dist/app.txt", data, epoch=1)
        assert again.status_code == 200 and again.json()["stored"] is False
        offered = http.post(f"/v1/runner/flights/{flight}/artifacts",
                            headers={"authorization": f"Bearer {a}"},
                            json={"epoch": 1, "artifacts": [
                                {"name": "copy.txt", "sha256": digest, "size": len(data)}]})
        assert offered.status_code == 200 and offered.json()["needed"] == [], offered.text
        if sqlite:
            assert _blob_files(fleet) == [digest]
        before = api.request("GET", f"/v1/flights/{flight}/artifacts")["artifacts"]
        assert [(x["name"], x["sha256"]) for x in before] == [("copy.txt", digest),
                                                              ("dist/app.txt", digest)]

        # bad input: one sentence each, and nothing changes
        over = _put(http, a, flight, "big.bin", b"x" * 2000, epoch=1)
        assert _one_sentence(over, 413, "too_large") == (
            f"the artifacts of {flight} would take 2.2k, over its limit of 1000 bytes "
            "(gg fly --artifact-limit SIZE)")
        escaping = _put(http, a, flight, "a/../../etc/passwd", b"x", epoch=1)
        assert escaping.status_code in (400, 404), escaping.text
        dotted = _put(http, a, flight, "a/%2E%2E/b", b"x", epoch=1)
        assert _one_sentence(dotted, 400) == "artifact 'a/../b': a name's parts may not be " \
                                             "empty, '.' or '..'"
        lying = _put(http, a, flight, "lie.txt", b"other", epoch=1, digest=digest)
        assert _one_sentence(lying, 400).startswith("the body's SHA-256 is ")
        assert api.request("GET", f"/v1/flights/{flight}/artifacts")["artifacts"] == before
        if sqlite:
            assert _blob_files(fleet) == [digest]

        # a goes quiet; its lease runs out and b takes epoch 2: a's upload is refused
        granted = wait_until(lambda: (_check_in(fleet, b), _claim(http, b))[1], timeout=30,
                             what="b to be granted epoch 2")
        assert granted["lease"]["epoch"] == 2
        stale = _put(http, a, flight, "late.txt", b"from a stale attempt", epoch=1)
        assert _one_sentence(stale, 409, "lease_superseded") == (
            "this lease was superseded: another runner holds the flight now")
        stale_offer = http.post(f"/v1/runner/flights/{flight}/artifacts",
                                headers={"authorization": f"Bearer {a}"},
                                json={"epoch": 1, "artifacts": [
                                    {"name": "late.txt", "sha256": digest, "size": len(data)}]})
        assert stale_offer.status_code == 409
        assert api.request("GET", f"/v1/flights/{flight}/artifacts")["artifacts"] == before
        fresh = _put(http, b, flight, "dist/app.txt", b"epoch two\n", epoch=2)
        assert fresh.status_code == 200 and fresh.json()["stored"] is True
    events = api.events(kind="info:flight:artifact", flight=flight, limit=10)
    assert [(e["body"]["name"], e["body"]["epoch"]) for e in events] == [
        ("dist/app.txt", 1), ("copy.txt", 1), ("dist/app.txt", 2)]

    # NAME not found: one sentence, a non-zero exit, no file written
    out = tmp_path / "got"
    out.mkdir()
    missing = fleet.gg("artifact", "get", flight, "nope.txt", "-o", str(out / "nope.txt"))
    assert missing.returncode == 5 and missing.stdout == ""
    assert missing.stderr.strip().endswith(
        f"flight {flight} has no artifact 'nope.txt' (its artifacts: copy.txt, dist/app.txt)")
    assert len(missing.stderr.strip().splitlines()) == 1
    assert list(out.iterdir()) == []
    got = fleet.gg("artifact", "get", flight, "copy.txt", "-o", str(out / "copy.txt"))
    assert got.returncode == 0, got.stderr
    assert (out / "copy.txt").read_bytes() == data


BUILD = b"".join(hashlib.sha256(bytes([i])).digest() for i in range(256)) * 64  # 512 KiB

THREE_STAGES = """\
flights:
  build:
    command: [sh, -c, 'mkdir -p "$GG_ARTIFACTS/dist" && cp {source} "$GG_ARTIFACTS/dist/app.bin"']
  test-1: {{command: [sh, -c, 'cmp "$GG_INPUTS/build/dist/app.bin" {source}'], needs: [build], with-artifacts: true}}
  test-2: {{command: [sh, -c, 'cmp "$GG_INPUTS/build/dist/app.bin" {source}'], needs: [build], with-artifacts: true}}
  test-3: {{command: [sh, -c, 'echo passed > "$GG_ARTIFACTS/report.txt"'], needs: build}}
  publish:
    command: [sh, -c, 'cp "$GG_INPUTS/build/dist/app.bin" {published} && cp "$GG_INPUTS/test-3/report.txt" {report}']
    needs: [build, test-1, test-2, test-3]
    with-artifacts: true
"""


def test_a_three_stage_file_hands_the_builds_artifact_to_publish_byte_for_byte(fleet, tmp_path):
    source = tmp_path / "app.bin"
    source.write_bytes(BUILD)
    published, report = tmp_path / "published.bin", tmp_path / "report.txt"
    path = tmp_path / "three.yaml"
    path.write_text(THREE_STAGES.format(source=source, published=published, report=report))
    fleet.runner("r1", workers=3)
    fleet.wait_online("r1")
    api = fleet.api()
    done = fleet.gg("fly", "--file", str(path), "--json")
    assert done.returncode == 0, done.stderr
    ids = {f["name"]: f["id"] for f in json.loads(done.stdout)}
    landed = wait_until(lambda: (lambda f: f if f["stage"] in ("landed", "failed", "cancelled")
                                 else None)(api.flight(ids["publish"])), timeout=90,
                        what="publish to end")
    assert landed["stage"] == "landed", {n: api.flight(i)["ended_reason"] for n, i in ids.items()}
    assert published.read_bytes() == BUILD
    assert report.read_text() == "passed\n"
    for test in ("test-1", "test-2", "test-3"):
        assert api.flight(ids[test])["stage"] == "landed"
    listed = json.loads(fleet.gg("artifacts", ids["build"], "--json", check=True).stdout)
    assert [(a["name"], a["sha256"], a["size"]) for a in listed["artifacts"]] == [
        ("dist/app.bin", hashlib.sha256(BUILD).hexdigest(), len(BUILD))]
    assert [a["name"] for a in api.flight(ids["build"])["artifacts"]] == ["dist/app.bin"]

    fleet.server.stop()  # kept across a restart
    fleet.server.start()
    got = tmp_path / "got.bin"
    fleet.gg("artifact", "get", ids["build"], "dist/app.bin", "-o", str(got), check=True)
    assert got.read_bytes() == BUILD
    shown = fleet.gg("artifacts", ids["build"], check=True).stdout
    assert "dist/app.bin" in shown and str(len(BUILD)) in shown


def test_a_link_out_of_gg_artifacts_is_refused_not_followed_and_the_flight_fails_saying_so(
        fleet, tmp_path):
    secret = tmp_path / "host-secret"
    secret.write_text("not for the flight\n")
    fleet.runner("r1")
    fleet.wait_online("r1")
    api = fleet.api()
    flight = api.open_flight({"command": [
        f'echo fine > "$GG_ARTIFACTS/ok.txt" && ln -s {secret} "$GG_ARTIFACTS/leak"']})["id"]
    ended = wait_until(lambda: (lambda f: f if f["stage"] in ("landed", "failed") else None)(
        api.flight(flight)), timeout=60, what="the flight to end")
    assert (ended["stage"], ended["ended_reason"]) == ("failed", (
        f"artifact leak is a symbolic link to {secret}, outside $GG_ARTIFACTS: links are never "
        "followed; nothing was uploaded"))
    assert api.request("GET", f"/v1/flights/{flight}/artifacts")["artifacts"] == []


def test_a_sandboxed_flight_of_a_root_runner_writes_artifacts_and_reads_its_inputs(fleet,
                                                                                 tmp_path):
    from gg.runner.capabilities import probe

    caps = probe()
    if not (caps["bwrap_usable"] and caps["netns"]):
        pytest.skip("bubblewrap cannot make a sandbox on this machine")
    fleet.runner("r1")
    fleet.wait_online("r1")
    done = fleet.gg("runner", "policy", "r1", "--isolation", "sandbox", "--egress", "none")
    assert done.returncode == 0, done.stderr
    wait_until(lambda: fleet.runner_row("r1")["checks_verdict"] == "checks passed",
               what="r1 to check in under its new policy")
    api = fleet.api()
    build = api.open_flight({"command": [
        'mkdir -p "$GG_ARTIFACTS/out" && id -u > "$GG_ARTIFACTS/out/uid.txt"']})["id"]
    check = fleet.gg("fly", "--after", build, "--with-artifacts", "--", "sh", "-c",
                     f'cat "$GG_INPUTS/{build}/out/uid.txt" > "$GG_ARTIFACTS/seen.txt"')
    assert check.returncode == 0, check.stderr
    second = check.stdout.strip()
    ended = wait_until(lambda: (lambda f: f if f["stage"] in ("landed", "failed", "cancelled")
                                else None)(api.flight(second)), timeout=90, what="check to end")
    assert ended["stage"] == "landed", (api.flight(build)["ended_reason"], ended["ended_reason"])
    got = tmp_path / "seen.txt"
    fleet.gg("artifact", "get", second, "seen.txt", "-o", str(got), check=True)
    uid = got.read_text().strip()
    assert uid.isdigit() and uid != "0"  # written by the flight's own identity, not root
    assert api.flight(second)["artifacts"][0]["name"] == "seen.txt"


def test_an_artifact_stored_through_one_replica_is_handed_on_and_read_through_another(
        make_replicas, tmp_path):
    replicas = make_replicas(2)
    first, second = replicas.api(0), replicas.api(1)
    data = BUILD[:100_000]
    source = tmp_path / "app.bin"
    source.write_bytes(data)
    build = first.open_flight({"command": [f'cp {source} "$GG_ARTIFACTS/app.bin"'],
                               "labels": {"role": "build"}})["id"]
    check = second.open_flight({"command": [f'cmp "$GG_INPUTS/{build}/app.bin" {source}'],
                                "labels": {"role": "test"}, "after": [build],
                                "artifacts": {"inputs": True}})["id"]
    replicas.runner("builder", first=0, only=True, labels="role=build")
    replicas.runner("tester", first=1, only=True, labels="role=test")
    ended = wait_until(lambda: (lambda f: f if f["stage"] in ("landed", "failed", "cancelled")
                                else None)(second.flight(check)), timeout=90,
                       what="the dependent to end")
    assert ended["stage"] == "landed", (first.flight(build)["ended_reason"], ended["ended_reason"])
    got = []
    digest = Client(replicas.servers[1].url, replicas.owner_token()).download_artifact(
        build, "app.bin", got.append)
    assert b"".join(got) == data and digest == hashlib.sha256(data).hexdigest()
