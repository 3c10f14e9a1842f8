"""The flight page lists the graph the flight belongs to: each flight with its stage, its
dependents nested under it, server-rendered (docs/work-graphs.md, docs/web-console.md)."""

from __future__ import annotations

import re

from console_support import open_flight, sign_in
from support import auth


def test_the_flight_page_lists_its_graph_nested_from_the_roots_with_each_stage(browser, owner):
    opened = browser.post("/v1/graphs", headers=auth(owner), json={"flights": [
        {"name": "build", "command": ["make"]},
        {"name": "test-1", "command": ["true"], "needs": ["build"]},
        {"name": "test-2", "command": ["true"], "needs": ["build"]},
        {"name": "publish", "command": ["true"], "needs": ["test-1", "test-2"]}]})
    ids = {f["name"]: f["id"] for f in opened.json()["flights"]}
    browser.post(f"/v1/flights/{ids['test-1']}/cancel", headers=auth(owner))
    alone = open_flight(browser, owner, "true")
    sign_in(browser, owner)
    page = browser.get(f"/ui/flights/{ids['test-2']}").text
    graph = page[page.index('<ul class="graph"'):]
    graph = graph[:graph.index("<h2>")]
    shown = re.findall(r'>([\w-]+)</(?:a|strong)> <span class="id">(f_\w+)</span> '
                       r'<span class="badge stage" data-stage="(\w+)"', graph)
    assert shown == [("build", ids["build"], "ready"), ("test-1", ids["test-1"], "cancelled"),
                     ("publish", ids["publish"], "cancelled"),
                     ("test-2", ids["test-2"], "ready"), ("publish", ids["publish"], "cancelled")]
    assert f'href="/ui/flights/{ids["build"]}"' in graph and "(above)" in graph
    assert graph.count("<ul") == graph.count("</ul>") == 4  # the roots, the tests, a publish each
    assert f"dependency {ids['test-1']} was cancelled" in graph
    assert '<ul class="graph"' not in browser.get(f"/ui/flights/{alone}").text
