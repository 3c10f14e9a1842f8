"""``POST /v1/graphs`` opens a graph's flights in one transaction, all or none, and
``GET /v1/flights/F/graph`` reads the graph back, on both stores (docs/work-graphs.md)."""

from __future__ import annotations

from support import auth

STORES = ("sqlite", "postgresql")  # one transaction on each store


def _graph(client, flights: list[dict]):
    return client.post("/v1/graphs", json={"flights": flights}, headers=auth(client.owner))


def _count(client) -> tuple[int, int]:
    """(flights, flight-opened events): what a refused graph must leave as it was."""
    h = auth(client.owner)
    rows = client.get("/v1/flights", params={"limit": 1000}, headers=h).json()["items"]
    events = client.get("/v1/events", params={"kind": "info:flight:opened"}, headers=h).json()
    return len(rows), len(events)


THREE_STAGES = [
    {"name": "publish", "command": ["true"], "needs": ["test-1", "test-2", "test-3"]},
    {"name": "build", "command": ["make"]},
    *({"name": f"test-{i}", "command": ["make", "test"], "needs": ["build"],
       "labels": {"shard": str(i)}} for i in (1, 2, 3)),
]


def test_a_graph_opens_in_dependency_order_with_its_needs_as_after_and_names_as_titles(client):
    answer = _graph(client, THREE_STAGES)
    assert answer.status_code == 201, answer.text
    opened = answer.json()["flights"]
    assert [f["name"] for f in opened] == ["publish", "build", "test-1", "test-2", "test-3"]
    ids = {f["name"]: f["id"] for f in opened}
    h = auth(client.owner)
    publish = client.get(f"/v1/flights/{ids['publish']}", headers=h).json()
    assert [d["id"] for d in publish["after"]] == [ids[f"test-{i}"] for i in (1, 2, 3)]
    assert publish["title"] == "publish" and publish["waiting"].startswith(
        f"waiting: {ids['test-1']} (test-1) is still")
    build = client.get(f"/v1/flights/{ids['build']}", headers=h).json()
    assert [d["id"] for d in build["dependents"]] == [ids[f"test-{i}"] for i in (1, 2, 3)]

    graph = client.get(f"/v1/flights/{ids['test-2']}/graph", headers=h).json()
    assert {n["id"] for n in graph["nodes"]} == set(ids.values())
    assert [(line["depth"], line["id"], line["repeated"]) for line in graph["lines"]] == [
        (0, ids["build"], False), (1, ids["test-1"], False), (2, ids["publish"], False),
        (1, ids["test-2"], False), (2, ids["publish"], True),
        (1, ids["test-3"], False), (2, ids["publish"], True)]
    assert all(n["stage"] == "ready" for n in graph["nodes"])


def test_a_graph_with_one_refused_flight_opens_none_and_the_refusal_names_that_flight(client):
    before = _count(client)
    flights = [*THREE_STAGES[:4], {"name": "test-3", "command": ["true"], "needs": ["build"],
                                   "environment": "prod"}]
    refused = _graph(client, flights)
    assert refused.status_code == 400
    message = refused.json()["error"]["message"]
    assert message.startswith("flight test-3: ") and "prod" in message
    assert _count(client) == before  # not one flight, not one event of the others


def test_a_cycle_an_unknown_need_and_a_name_given_twice_are_refused_in_one_sentence(client):
    before = _count(client)
    cases = [
        ([{"name": "a", "command": ["true"], "needs": ["b"]},
          {"name": "b", "command": ["true"], "needs": ["a"]}],
         "needs go round in a cycle (a -> b -> a): no flight of it could ever start"),
        ([{"name": "a", "command": ["true"], "needs": ["c"]}],
         "a needs 'c', which is no flight of this graph"),
        ([{"name": "a", "command": ["true"]}, {"name": "a", "command": ["true"]}],
         "two flights are named 'a': each name is given once"),
    ]
    for flights, sentence in cases:
        refused = _graph(client, flights)
        assert (refused.status_code, refused.json()["error"]["message"]) == (400, sentence)
    assert _count(client) == before


def test_the_graph_of_an_unknown_flight_is_not_found(client):
    answer = client.get("/v1/flights/f_0000000000/graph", headers=auth(client.owner))
    assert answer.status_code == 404
