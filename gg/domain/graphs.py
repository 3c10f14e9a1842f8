"""Work graphs: many flights opened at once, each naming the flights it ``needs``
(``gg fly --file flights.yaml``, docs/work-graphs.md).

A graph is given as names in the order written, each with the names it needs. Before
anything opens it must name only its own flights, and hold no cycle; then it opens in an
order where every flight comes after the flights it needs (:func:`order`), so that each
one's ``--after`` names flights that already exist, as a single ``gg fly --after`` does.
A graph read back from the store (:func:`tree`) is drawn from its roots (the flights that
need none of the graph's flights) down to their dependents::

    build ──> test-1 ──> publish
          ──> test-2 ──┘
          ──> test-3 ──┘

Pure: values in, decisions out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gg.domain.flight_spec import FlightSpec

MAX_GRAPH_FLIGHTS = 500  # flights one graph may open at once
MAX_GRAPH_SHOWN = 1000  # flights a drawing of one graph reads at most
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
NAME_RULE = ("letters, digits, '.', '_' and '-', starting with a letter or a digit, "
             "at most 63")

Needs = Mapping[str, Sequence[str]]


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a flight of a graph (None: it can)."""
    if not NAME.match(name):
        return f"a flight's name is {NAME_RULE} (got {name!r})"
    return None


def unknown_need(needs: Sequence[str], names: Sequence[str]) -> str | None:
    """The first of ``needs`` that names no flight of the graph (None: all do)."""
    known = set(names)
    return next((n for n in needs if n not in known), None)


def cycle(needs: Needs) -> list[str] | None:
    """A cycle in the graph, as the names along it with the first again at the end
    (``[a, b, a]``; a flight needing itself is ``[a, a]``), or None: it holds none. The
    first cycle found walking the flights in the order given (a walk with a stack, not a
    recursion: a chain may be long). Names ``needs`` does not hold are ignored."""
    done: set[str] = set()
    for start in needs:
        if start in done:
            continue
        path: list[str] = [start]
        on_path = {start}
        stack = [iter(needs.get(start, ()))]
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                stack.pop()
                finished = path.pop()
                on_path.discard(finished)
                done.add(finished)
                continue
            if nxt not in needs or nxt in done:
                continue
            if nxt in on_path:
                return path[path.index(nxt):] + [nxt]
            path.append(nxt)
            on_path.add(nxt)
            stack.append(iter(needs.get(nxt, ())))
    return None


def cycle_sentence(found: list[str]) -> str:
    """How a cycle is refused, in one sentence."""
    if len(found) == 2:
        return f"{found[0]} needs itself: a flight cannot run after itself"
    return (f"needs go round in a cycle ({' -> '.join(found)}): no flight of it could ever "
            "start")


def problem(names: Sequence[str], needs: Needs) -> str | None:
    """Why this graph cannot open, in one sentence (None: it can): too many flights, a name
    given twice or malformed, a need naming no flight of the graph, or a cycle."""
    if not names:
        return "a graph needs at least one flight"
    if len(names) > MAX_GRAPH_FLIGHTS:
        return (f"the graph has {len(names)} flights; one graph opens at most "
                f"{MAX_GRAPH_FLIGHTS}")
    seen: set[str] = set()
    for name in names:
        if (why := name_problem(name)) is not None:
            return why
        if name in seen:
            return f"two flights are named {name!r}: each name is given once"
        seen.add(name)
    for name in names:
        if (missing := unknown_need(needs.get(name, ()), names)) is not None:
            return f"{name} needs {missing!r}, which is no flight of this graph"
    if (found := cycle(needs)) is not None:
        return cycle_sentence(found)
    return None


def order(names: Sequence[str], needs: Needs) -> list[str]:
    """The names in an order where each comes after every flight it needs, otherwise as
    given (a graph :func:`problem` accepted)."""
    placed: set[str] = set()
    out: list[str] = []
    waiting = list(names)
    while waiting:
        ready = [n for n in waiting if all(d in placed for d in needs.get(n, ()))]
        if not ready:  # pragma: no cover - problem() refuses a cycle first
            raise ValueError(cycle_sentence(cycle(needs) or waiting[:1] * 2))
        for name in ready:
            placed.add(name)
            out.append(name)
        waiting = [n for n in waiting if n not in placed]
    return out


def tree(ids: Sequence[str], after: Mapping[str, Sequence[str]]) -> list[tuple[int, str, bool]]:
    """A drawing of a graph read from the store, as lines (depth, flight id, repeated):
    each root (a flight none of whose dependencies is in the graph) at depth 0, oldest
    first, each flight's dependents under it; a flight with several dependencies is drawn
    in full under the first one reached and ``repeated`` under the others (its own
    dependents are not drawn again). ``ids`` are the graph's flights, oldest first;
    ``after`` maps a flight to its dependencies."""
    present = set(ids)
    below: dict[str, list[str]] = {i: [] for i in ids}
    for flight_id in ids:
        for dependency in after.get(flight_id, ()):
            if dependency in present and flight_id not in below[dependency]:
                below[dependency].append(flight_id)
    roots = [i for i in ids if not any(d in present for d in after.get(i, ()))]
    lines: list[tuple[int, str, bool]] = []
    drawn: set[str] = set()
    stack: list[tuple[int, str]] = [(0, r) for r in reversed(roots)]
    while stack:
        depth, flight_id = stack.pop()
        if flight_id in drawn:
            lines.append((depth, flight_id, True))
            continue
        drawn.add(flight_id)
        lines.append((depth, flight_id, False))
        stack.extend((depth + 1, d) for d in reversed(below[flight_id]))
    return lines


@dataclass(frozen=True)
class GraphFlight:
    """One flight of a graph about to open: its name in the graph, its spec as asked
    (``after``: flights open already), and the names of the graph's flights it needs."""

    name: str
    spec: FlightSpec
    needs: tuple[str, ...] = ()
