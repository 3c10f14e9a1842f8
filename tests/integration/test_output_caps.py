"""Output caps across real processes: a flight printing without end keeps running, its output
is cut at its limit with one note and a tail, and the control plane's database stays small."""

from __future__ import annotations

import json

import httpx

from gg.launch import LocalServer, free_port

from support import http_proof, wait_until

PRINTED = 50 * 1024 * 1024
CAP = 256 * 1024
TAIL = 64 * 1024


def _landed(fleet, flight_id: str):
    def ended():
        shown = fleet.api().flight(flight_id)
        return shown if shown["stage"] in ("landed", "failed", "cancelled") else None
    return wait_until(ended, timeout=120, what="the flight to end")


def test_a_flight_printing_without_end_lands_with_its_output_capped_and_its_tail(fleet):
    fleet.runner("r1")
    fleet.wait_online("r1")
    script = f"yes 0123456789abcdef 2>/dev/null | head -c {PRINTED}; echo; echo the last words"
    opened = fleet.gg("fly", "--json", "--output-limit", "256k", "--", script)
    assert opened.returncode == 0, opened.stderr
    flight_id = json.loads(opened.stdout)["id"]

    shown = _landed(fleet, flight_id)
    assert shown["stage"] == "landed" and shown["exit_code"] == 0, shown
    facts = fleet.api().facts(flight_id, after=0)["facts"]
    outputs = [f for f in facts if f["kind"] == "output" and not f["body"].get("tail")]
    tails = [f for f in facts if f["kind"] == "output" and f["body"].get("tail")]
    notes = [f for f in facts if f["kind"] == "note" and "truncated" in f["body"].get("text", "")]

    sent = "".join(f["body"]["text"] for f in outputs)
    assert len(sent.encode()) == CAP and sent.startswith("0123456789abcdef\n0123")
    assert [n["body"]["text"] for n in notes] == [f"output truncated after {CAP} bytes"]
    assert len(tails) == 1
    tail = tails[0]["body"]
    line = b"0123456789abcdef\n"
    printed = (line * (PRINTED // len(line) + 1))[:PRINTED] + b"\nthe last words\n"
    assert tail["text"].encode() == printed[-TAIL:]  # exactly the last 64k printed
    assert tail["printed"] == PRINTED + len("\nthe last words\n")
    assert shown["output_limit"] == CAP and shown["output_bytes"] == CAP + TAIL
    assert [f["kind"] for f in facts].count("exit") == 1  # the final report came after the tail
    assert facts.index(tails[0]) < [f["kind"] for f in facts].index("exit")

    stored = sum(p.stat().st_size for p in (fleet.root / "data").iterdir() if p.is_file())
    assert stored < 8 * 1024 * 1024, f"the data directory holds {stored} bytes"


def test_fly_refuses_a_malformed_size_and_a_limit_above_the_servers_maximum(make_fleet):
    fleet = make_fleet({"GG_OUTPUT_LIMIT_MAX": "1MB"})
    bad = fleet.gg("fly", "--output-limit", "ten megs", "--", "true")
    assert bad.returncode != 0 and bad.stdout == ""
    assert bad.stderr.strip().splitlines() == [
        "--output-limit: 'ten megs' is not a size (try 512k, 10MB or 1G)"]
    over = fleet.gg("fly", "--output-limit", "2MB", "--", "true")
    assert over.returncode != 0 and "Traceback" not in over.stderr
    assert over.stderr.strip().splitlines() == [
        "an output limit of 2MB is more than this server allows (1MB)"]
    assert fleet.api().flights() == []


def test_output_reported_beyond_the_cap_is_refused_with_413_and_nothing_is_stored(tmp_path):
    server = LocalServer(tmp_path / "data", free_port(), env={"GG_CLAIM_WAIT": "0.2"},
                         log=tmp_path / "server.log").start()
    try:
        owner = {"authorization": f"Bearer {server.owner_token()}"}
        url = server.url
        reg = httpx.post(url + "/v1/runners", headers=owner,
                         json={"name": "r1", **http_proof(httpx, "register", base=url)}).json()
        runner = {"authorization": f"Bearer {reg['credential']}"}
        httpx.post(url + "/v1/runner/check-in", headers=runner, json={}).raise_for_status()
        httpx.post(url + "/v1/flights", headers=owner,
                   json={"command": ["true"], "output_limit": 1000}).raise_for_status()
        claim = httpx.post(url + "/v1/runner/claim", headers=runner, json={"wait": 0}).json()
        flight, epoch = claim["flight"]["id"], claim["lease"]["epoch"]
        assert claim["flight"]["output_room"] == 1000 and claim["flight"]["output_tail"] == TAIL
        facts_url = f"{url}/v1/runner/flights/{flight}/facts"

        def report(*facts):
            return httpx.post(facts_url, headers=runner, json={"epoch": epoch, "facts": list(facts)})

        assert report({"kind": "output", "body": {"text": "a" * 600}, "key": "1:o:1"}).status_code == 200
        again = report({"kind": "output", "body": {"text": "a" * 600}, "key": "1:o:1"})
        assert again.status_code == 200 and again.json()["stored"] == 0  # a repeat counts once
        refused = report({"kind": "note", "body": {"text": "kept?"}, "key": "1:n:1"},
                         {"kind": "output", "body": {"text": "b" * 401}, "key": "1:o:2"})
        assert refused.status_code == 413
        assert refused.json()["error"]["code"] == "output_capped"
        assert report({"kind": "output", "body": {"text": "c" * 400}, "key": "1:o:3"}).status_code == 200
        assert report({"kind": "output", "body": {"text": "d"}, "key": "1:o:4"}).status_code == 413
        stored = httpx.get(f"{url}/v1/flights/{flight}/facts", headers=owner).json()["facts"]
        assert [f["body"]["text"][0] for f in stored] == ["a", "c"]  # nothing of what was refused
        shown = httpx.get(f"{url}/v1/flights/{flight}", headers=owner).json()
        assert shown["output_bytes"] == 1000
    finally:
        server.stop()
