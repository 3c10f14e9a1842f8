"""The sent log: what the runner put on the wire, private, bounded, and without secrets."""

from __future__ import annotations

import json
import stat
import threading

import httpx

from gg.client import Client
from gg.domain import tokens
from gg.runner import sent
from gg.runner.sent import SentLog, scrub


def test_every_gg_secret_shape_is_scrubbed_to_its_fingerprint_wherever_it_hides():
    secrets = [tokens.mint(p) for p in tokens.PREFIXES]
    body = {"note": f"token {secrets[0]} leaked", "list": [secrets[1], {"deep": secrets[2]}],
            "code": secrets[3], "credential": "plain-looking", "fine": "ggx_notatoken"}
    out = json.dumps(scrub(body))
    for secret in secrets:
        assert secret not in out
        assert tokens.fingerprint(secret) in out
    assert "plain-looking" not in out and '"credential": "[scrubbed]"' in out
    assert "ggx_notatoken" in out


def test_a_logged_line_is_scrubbed_as_the_walk_of_every_value_scrubs_it(tmp_path):
    """The log scrubs a line in one pass unless a key is named like a secret: what it writes
    is what walking every value writes, token by token and key by key, at any depth."""
    secrets = [tokens.mint(p) for p in tokens.PREFIXES]
    bodies = [
        {"facts": [{"k": "v"}], "usage": {"cpu": 1.5}, "note": f"x{secrets[0]}y"},
        {"list": [secrets[1], {"deep": [secrets[2], 3]}], "n": None, "ok": True},
        {"outer": {"Token": "plain-looking", "inner": {"PASSWORD": "hunter2"}}},
        {"authorization": ["not a string: kept"], "secret": 5, "credential": secrets[3]},
        {"tokens": "a key only like one", "note": "the word token: in a value"},
        {"odd": 'quote " and \\ and \u00e9 and newline\n' + secrets[0]},
        {"to\u212aen": "lower-cases to token (the Kelvin sign)", "ok": 1},
    ]
    for body in bodies:
        entry = {"at": 1.0, "method": "POST", "path": "/v1/x", "params": {"q": secrets[2]},
                 "body": body}
        walked = json.dumps(scrub(entry), sort_keys=True) + "\n"
        assert sent.scrubbed_line(entry).decode() == walked
        log = SentLog(tmp_path)
        log.record("POST", "/v1/x", {"q": secrets[2]}, body)
        assert sent.read(tmp_path)[-1]["body"] == scrub(body)
    assert "hunter2" not in sent.scrubbed_line({"body": bodies[2]}).decode()
    assert "Kelvin" not in sent.scrubbed_line({"body": bodies[6]}).decode()


def test_the_log_file_is_private_and_holds_path_time_and_body(tmp_path):
    log = SentLog(tmp_path, clock=lambda: 123.5)
    log.record("POST", "/v1/runner/check-in", None, {"free_slots": 1})
    path = tmp_path / "sent.jsonl"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sent.read(tmp_path) == [{"at": 123.5, "method": "POST", "path": "/v1/runner/check-in",
                                    "params": None, "body": {"free_slots": 1}}]


def test_the_log_rotates_so_it_stays_bounded_and_keeps_the_newest(tmp_path):
    log = SentLog(tmp_path, max_bytes=2_000)
    for i in range(200):
        log.record("POST", "/v1/runner/check-in", None, {"n": i, "pad": "x" * 50})
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["sent.jsonl", "sent.jsonl.1"]
    assert all(p.stat().st_size < 2_200 for p in tmp_path.iterdir())
    entries = sent.read(tmp_path)
    numbers = [e["body"]["n"] for e in entries]
    assert numbers == sorted(numbers) and numbers[-1] == 199


def test_a_torn_last_line_is_skipped_not_fatal(tmp_path):
    SentLog(tmp_path).record("POST", "/a", None, {"ok": True})
    with open(tmp_path / "sent.jsonl", "a") as fh:
        fh.write('{"at": 1, "meth')
    assert [e["path"] for e in sent.read(tmp_path)] == ["/a"]


def test_the_client_records_each_attempt_through_its_hook_and_never_the_auth_header(tmp_path):
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"ok": True})

    log = SentLog(tmp_path)
    api = Client("http://gg.test", tokens.mint(tokens.RUNNER), on_send=log.record)
    api._http = httpx.Client(base_url="http://gg.test", transport=httpx.MockTransport(handler))
    api.request("POST", "/v1/runner/check-in", json={"free_slots": 2})
    api.request("GET", "/v1/events", params={"after": 3})
    assert seen[0].headers["authorization"].startswith("Bearer ggr_")
    text = (tmp_path / "sent.jsonl").read_text()
    assert "ggr_" not in text and "authorization" not in text.lower()
    entries = sent.read(tmp_path)
    assert [(e["method"], e["path"]) for e in entries] == [("POST", "/v1/runner/check-in"),
                                                            ("GET", "/v1/events")]
    assert entries[1]["params"] == {"after": 3}


def test_follow_yields_new_entries_across_a_rotation(tmp_path):
    from support import wait_until

    log = SentLog(tmp_path, max_bytes=400)  # rotates every few entries
    stop = threading.Event()
    got: list[int] = []

    def reader():
        for entry in sent.follow(tmp_path, stop=stop, interval=0.01, from_start=True):
            got.append(entry["body"]["n"])

    t = threading.Thread(target=reader)
    t.start()
    try:
        for i in range(30):
            log.record("POST", "/p", None, {"n": i, "pad": "y" * 40})
            wait_until(lambda: len(got) > i, timeout=10, what=f"entry {i} to be followed")
    finally:
        stop.set()
        t.join(timeout=10)
    assert got == list(range(30))
    assert (tmp_path / "sent.jsonl.1").exists()


def test_the_kelvin_sign_is_the_one_character_outside_ascii_whose_lower_case_is_ascii():
    """The sent log walks every value of a line only when a key may lower-case to a secret's
    name; among escaped characters only the Kelvin sign can make one (gg.runner.sent)."""
    lowering = [c for c in map(chr, range(0x80, 0x110000)) if c.lower().isascii()]
    assert lowering == ["\u212a"]
    assert json.dumps(lowering[0]) == '"' + sent._LOWERS_TO_ASCII + '"'
