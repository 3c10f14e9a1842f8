"""A runner's hand-back asks for its next flight and flies it from the answer: a busy runner
makes one request a flight fewer (docs/lease-protocol.md, "A flight's requests"). Real
server, real runner process; what the runner sent is read from its sent log."""

from __future__ import annotations

import json

from support import wait_until


def _sent(fleet, name: str) -> list[dict]:
    path = fleet.root / f"state-{name}" / "sent.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_queued_flights_come_with_the_hand_backs_not_with_claims(make_fleet):
    fleet = make_fleet()
    api = fleet.api()
    # All five wait before the runner starts: each hand-back finds the next one ready,
    # however slowly this machine opens them.
    flights = [api.open_flight({"command": ["sleep 0.1"]})["id"] for _ in range(5)]
    fleet.runner("r1")
    wait_until(lambda: all(api.flight(f)["stage"] == "landed" for f in flights), timeout=60,
               what="the five flights to land")
    sent = _sent(fleet, "r1")
    hand_backs = [r for r in sent if r["path"].endswith("/hand-back")]
    assert len(hand_backs) == 5 and all(r["body"]["claim_next"] == 1 for r in hand_backs)
    first = min(i for i, r in enumerate(sent) if f"/{flights[0]}/" in r["path"])
    last = max(i for i, r in enumerate(sent) if f"/{flights[-1]}/" in r["path"])
    claims = [r for r in sent[first:last] if r["path"] == "/v1/runner/claim"]
    assert claims == [], claims  # flights 2 to 5 each came in the hand-back before it
    rows = [api.flight(f) for f in flights]
    assert rows[0]["lease_runner"] and all(r["lease_runner"] == rows[0]["lease_runner"] for r in rows)


def test_a_control_plane_that_does_not_say_it_takes_claim_next_is_never_sent_it():
    """An older control plane refuses a body field it does not know (400): the runner sends
    ``claim_next`` only where the grant's protocol says ``hand_back_claims``."""
    from gg.api.runners import Claimed
    from gg.settings import Settings

    protocol = Settings().protocol()
    older = {k: v for k, v in protocol.items() if k != "hand_back_claims"}
    grant = {"flight": {"id": "f_1", "command": ["true"]}, "policy": {},
             "lease": {"epoch": 1, "expires_at": 60.0, "granted_at": 0.0}}
    assert Claimed.model_validate({**grant, "protocol": older}).protocol.hand_back_claims is False
    assert Claimed.model_validate({**grant, "protocol": protocol}).protocol.hand_back_claims
