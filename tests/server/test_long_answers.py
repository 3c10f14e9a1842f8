"""Long answers are validated and encoded on a worker thread, never on the event loop.

FastAPI validates and encodes a route's return value on the loop, even a plain ``def``'s: a
page of 500 runners or a feed of 10,000 events held every parked claim meanwhile. The routes
that answer them hand both to a worker thread (``gg.server.off_loop``), a row at a time, and
send the bytes their response model would have made."""

from __future__ import annotations

import threading

from pydantic import BaseModel, TypeAdapter

from gg.api.events import Event
from gg.api.flights import FactsPage
from gg.api.runners import RunnerRow
from gg.server import encoded
from gg.server.routes import flights as flight_routes
from gg.server.routes import runners as runner_routes

from support import auth, http_proof


class Recording:
    """The route's own adapter, noting the thread each validation and encoding ran on."""

    def __init__(self, adapter, name: str, threads: dict):
        self.adapter, self.name, self.threads = adapter, name, threads

    def validate_python(self, value):
        self.threads.setdefault(self.name, set()).add(threading.get_ident())
        return self.adapter.validate_python(value)

    def dump_json(self, value, **options):
        self.threads.setdefault(self.name, set()).add(threading.get_ident())
        return self.adapter.dump_json(value, **options)


async def _thread() -> int:
    return threading.get_ident()


def test_the_runners_page_the_event_feed_and_a_facts_page_are_encoded_off_the_loop(
        client, monkeypatch):
    threads: dict[str, set[int]] = {}
    for module, name in ((runner_routes, "RUNNER_ROW"), (flight_routes, "EVENT"),
                         (flight_routes, "FACTS_PAGE")):
        monkeypatch.setattr(module, name, Recording(getattr(module, name), name, threads))
    owner = auth(client.owner)
    for n in range(3):
        registered = client.post("/v1/runners", headers=owner,
                                 json={"name": f"r{n}", **http_proof(client, "register")})
        assert registered.status_code == 201, registered.text
    opened = client.post("/v1/flights", json={"command": ["true"]}, headers=owner)
    assert opened.status_code == 201, opened.text

    runners = client.get("/v1/runners", headers=owner)
    events = client.get("/v1/events", headers=owner)
    facts = client.get(f"/v1/flights/{opened.json()['id']}/facts", headers=owner)

    assert sorted(r["name"] for r in runners.json()) == ["r0", "r1", "r2"]
    assert events.json()[-1]["kind"] == "info:flight:opened", events.text
    assert facts.json()["flight"] == opened.json()["id"] and facts.json()["facts"] == []
    loop = client.portal.call(_thread)
    assert set(threads) == {"RUNNER_ROW", "EVENT", "FACTS_PAGE"}
    assert all(loop not in seen for seen in threads.values()), threads
    # the bytes the whole list's model makes
    for answer, model in ((runners, list[RunnerRow]), (events, list[Event])):
        whole = TypeAdapter(model)
        assert answer.content == whole.dump_json(whole.validate_json(answer.content),
                                                 by_alias=True)


def test_a_facts_page_encoded_a_fact_at_a_time_is_the_pages_own_encoding():
    page = {"flight": "f_1", "stage": "flying", "exit_code": None, "outcome": None,
            "facts": [{"seq": n, "flight_id": "f_1", "epoch": 1, "runner_id": "r_1",
                       "kind": "output", "body": {"text": f"line {n}\n", "n": n}, "at": 1.5}
                      for n in range(1, 4)]}
    whole = TypeAdapter(FactsPage)
    expected = whole.dump_json(whole.validate_python(page), by_alias=True)
    assert flight_routes.facts_answer(page).body == expected
    assert flight_routes.facts_answer({**page, "facts": []}).body == whole.dump_json(
        whole.validate_python({**page, "facts": []}), by_alias=True)


class _Row(BaseModel):
    n: int


class _ListFirst(BaseModel):
    rows: list[_Row]
    after: str


def test_a_page_whose_list_is_not_its_last_field_is_encoded_whole_as_its_model_does():
    whole, row = TypeAdapter(_ListFirst), TypeAdapter(_Row)
    value = {"rows": [{"n": 1}, {"n": 2}], "after": "x"}
    assert encoded.page(whole, row, value, "rows") == whole.dump_json(
        whole.validate_python(value), by_alias=True)
