"""The runner's lease calls, answered ahead of the framework (gg/server/lease_calls.py), over a
real ``gg server``: fencing by epoch and the one error shape hold exactly as before."""

from __future__ import annotations

import httpx

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


def test_a_stale_epoch_is_refused_and_bad_bodies_get_the_one_error_shape(make_fleet):
    fleet = make_fleet({"GG_OFFLINE_AFTER": "60"})
    a, b = _register(fleet, "a"), _register(fleet, "b")
    flight = fleet.api().open_flight({"command": ["true"]})["id"]
    base = f"/v1/runner/flights/{flight}"
    with httpx.Client(base_url=fleet.url, timeout=30) as http:
        as_a = {"authorization": f"Bearer {a}"}
        assert _claim(http, a)["lease"]["epoch"] == 1
        took = http.post(base + "/facts", headers=as_a, json={"epoch": 1, "facts": [
            {"kind": "started", "key": "1:started:1", "ago": 0.1},
            {"kind": "output", "body": {"text": "from a\n"}, "key": "1:output:2"}]})
        assert took.status_code == 200 and took.json() == {"stored": 2, "received": 2}
        renewed = http.post(base + "/renew", headers=as_a, json={"epoch": 1})
        assert renewed.status_code == 200 and renewed.json()["epoch"] == 1
        # a goes quiet; its lease (GG_LEASE_TTL 3 s) runs out and b takes epoch 2
        granted = wait_until(lambda: (_check_in(fleet, b), _claim(http, b))[1], timeout=30,
                             what="b to be granted epoch 2")
        assert granted["lease"]["epoch"] == 2
        stale = [("renew", {"epoch": 1}),
                 ("facts", {"epoch": 1, "facts": [{"kind": "output", "body": {"text": "late"}}]}),
                 ("hand-back", {"epoch": 1, "outcome": "landed", "exit_code": 0,
                                "key": "1:hand-back", "facts": [{"kind": "started", "ago": 1}]})]
        for call, body in stale:
            refused = http.post(f"{base}/{call}", headers=as_a, json=body)
            assert refused.status_code == 409, (call, refused.text)
            assert refused.json()["error"]["code"] == "lease_superseded"
        bad = [b'{"epoch": 2', b'{"epoch": NaN}', b'{"epoch": 2, "outcome": "flew"}',
               b'{"epoch": 2, "outcome": "landed", "facts": [{"kind": "exit"}]}']
        for content in bad:
            answer = http.post(base + "/hand-back", content=content,
                               headers={"authorization": f"Bearer {b}",
                                        "content-type": "application/json"})
            assert answer.status_code == 400, (content, answer.text)
            assert answer.json()["error"]["code"] == "invalid_request"
        handed = http.post(base + "/hand-back", headers={"authorization": f"Bearer {b}"},
                           json={"epoch": 2, "outcome": "landed", "exit_code": 0,
                                 "key": "2:hand-back", "facts": [{"kind": "started", "ago": 0.5,
                                                                  "key": "2:started:1"}]})
        assert handed.status_code == 200 and handed.json()["stage"] == "landed", handed.text
        metrics = http.get("/metrics").text
    shown = fleet.api().flight(flight)
    assert shown["stage"] == "landed"
    # Nothing from epoch 1 after its expiry; epoch 2's started stored with its hand-back.
    expired_at = next(f["at"] for f in shown["facts"] if f["kind"] == "expired")
    assert all(f["at"] <= expired_at for f in shown["facts"] if f["epoch"] == 1)
    assert [f["epoch"] for f in shown["facts"] if f["kind"] == "started"] == [1, 2]
    assert "".join(f["body"]["text"] for f in shown["facts"] if f["kind"] == "output") == "from a\n"
    counted = [line for line in metrics.splitlines() if line.startswith("gg_http_requests_total")
               and "/hand-back" in line]
    assert any('status="409"' in line for line in counted) and \
        any('status="400"' in line for line in counted), counted
