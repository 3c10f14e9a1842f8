"""The rules of a work graph: names, needs, cycles, the opening order and the drawing
(gg.domain.graphs; docs/work-graphs.md)."""

from __future__ import annotations

from gg.domain import graphs

THREE = {"build": (), "test-1": ("build",), "test-2": ("build",), "test-3": ("build",),
         "publish": ("test-1", "test-2", "test-3")}


def test_a_cycle_is_found_with_the_names_along_it_and_a_dag_has_none():
    assert graphs.cycle(THREE) is None
    assert graphs.cycle({"a": ("b",), "b": ("c",), "c": ("a",)}) == ["a", "b", "c", "a"]
    assert graphs.cycle({"x": (), "a": ("a",)}) == ["a", "a"]
    assert graphs.cycle({"a": ("x",), "x": ("b",), "b": ("x",)}) == ["x", "b", "x"]


def test_a_long_chain_is_checked_without_recursion():
    chain = {f"n{i}": (f"n{i + 1}",) for i in range(20000)} | {"n20000": ()}
    assert graphs.cycle(chain) is None
    chain["n20000"] = ("n0",)
    assert len(graphs.cycle(chain)) == 20002


def test_the_opening_order_puts_every_flight_after_what_it_needs_and_keeps_the_rest_as_given():
    names = ["publish", "test-2", "build", "test-1", "test-3"]
    assert graphs.order(names, THREE) == ["build", "test-2", "test-1", "test-3", "publish"]


def test_a_graph_is_refused_for_a_cycle_an_unknown_need_a_repeated_or_bad_name_or_its_size():
    assert graphs.problem(list(THREE), THREE) is None
    assert graphs.problem(["a", "b"], {"a": ("b",), "b": ("a",)}) == (
        "needs go round in a cycle (a -> b -> a): no flight of it could ever start")
    assert graphs.problem(["a"], {"a": ("a",)}) == "a needs itself: a flight cannot run after itself"
    assert graphs.problem(["a"], {"a": ("zz",)}) == "a needs 'zz', which is no flight of this graph"
    assert graphs.problem(["a", "a"], {}) == "two flights are named 'a': each name is given once"
    assert graphs.problem(["-a"], {}).startswith("a flight's name is letters, digits")
    assert graphs.problem([], {}) == "a graph needs at least one flight"
    many = [f"f{i}" for i in range(graphs.MAX_GRAPH_FLIGHTS + 1)]
    assert graphs.problem(many, {}) == (
        f"the graph has {len(many)} flights; one graph opens at most {graphs.MAX_GRAPH_FLIGHTS}")


def test_the_drawing_puts_each_flight_under_its_dependencies_in_full_only_once():
    ids = ["b", "t1", "t2", "t3", "p", "lone"]
    after = {"t1": ["b"], "t2": ["b"], "t3": ["b"], "p": ["t1", "t2", "t3"], "lone": ["gone"]}
    assert graphs.tree(ids, after) == [
        (0, "b", False), (1, "t1", False), (2, "p", False), (1, "t2", False), (2, "p", True),
        (1, "t3", False), (2, "p", True), (0, "lone", False)]
