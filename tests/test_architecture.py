"""The shape of gg, as docs/architecture.md draws it: which layer may import which, no import
loops anywhere, one writer of a flight's stage, and the lifecycle drawn as the table says."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import gg
from gg.domain import flights
from gg.domain.flights import TRANSITIONS, Event, Stage

ROOT = Path(gg.__file__).parent
DOC = ROOT.parent / "docs" / "architecture.md"

# Every layer may use these; the rest of what each may import is the table in the doc.
SHARED = {"errors", "error_codes", "settings", "version"}


def _may_import() -> dict[str, set[str]]:
    """The "may import from gg" column of docs/architecture.md, by layer."""
    table = {}
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        layer = cells[0].strip("`").rstrip("/").removesuffix(".py")
        table[layer] = set(re.findall(r"`(\w+)`", cells[2])) | SHARED
    return table


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """The gg modules ``name`` imports, at the top or inside a function."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "gg")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module.split(".")[0] != "gg":
                continue
            for alias in node.names:
                sub = f"{module}.{alias.name}"
                found.add(sub if sub in MODULES else module)
    return found


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _layer(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "version"
    return parts[1]


def test_each_layer_imports_only_what_docs_architecture_says_it_may():
    may = _may_import()
    assert {"domain", "store", "control", "server", "api", "client", "runner", "pool",
            "airspace", "cli"} <= set(may)
    wrong = sorted(f"{name} imports {dep}" for name, deps in GRAPH.items() for dep in deps
                   if _layer(name) in may and _layer(dep) != _layer(name)
                   and _layer(dep) not in may[_layer(name)])
    assert wrong == []


def _cycles(names: set[str]) -> list[list[str]]:
    """Strongly connected groups of more than one module among ``names`` (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in GRAPH.get(v, ()):
            if w not in names:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(names):
        if v not in index:
            visit(v)
    return out


def test_no_import_loop_in_the_domain_store_control_or_server():
    core = {n for n in MODULES if _layer(n) in ("domain", "store", "control", "server")}
    assert _cycles(core) == []
    assert "gg.control.pools" not in GRAPH["gg.control.flights"]


def test_no_import_loop_anywhere_in_gg():
    """Every layer, the command line and the pool's drivers too (imports inside functions
    count: a loop hidden in one is still a loop)."""
    assert _cycles(set(MODULES)) == []


# -- one writer of the stage -----------------------------------------------------------

_WRITERS = {"update_flight", "insert_flight", "Flight", "replace", "update", "insert"}
_SET_STAGE = re.compile(r"\bSET\b(?:(?!\bWHERE\b)[^;])*\bstage\s*=", re.IGNORECASE)
# The table that says which stages exist, and the store that applies its changes.
_OWNERS = ("gg/store/", "gg/domain/flights.py")


def _stage_writes(rel: str, source: str) -> list[str]:
    """Every write of a flight's stage in ``source`` (the module at ``rel``, e.g.
    ``gg/control/gates.py``): a ``stage=`` keyword to a writer, an assignment to ``.stage``,
    a ``["stage"]`` key set in a use case, or SQL that sets ``stage``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        where = f"{rel}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in _WRITERS and any(k.arg == "stage" for k in node.keywords):
                found.append(f"{where} {called}(stage=...)")
            if called == "dict" and any(k.arg == "stage" for k in node.keywords):
                found.append(f"{where} dict(stage=...)")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Attribute) and t.attr == "stage":
                    found.append(f"{where} .stage = ...")
                if (rel.startswith("gg/control/") and isinstance(t, ast.Subscript)
                        and isinstance(t.slice, ast.Constant) and t.slice.value == "stage"):
                    found.append(f"{where} [\"stage\"] = ...")
        elif isinstance(node, ast.Dict) and rel.startswith("gg/control/"):
            if any(isinstance(k, ast.Constant) and k.value == "stage" for k in node.keys) and \
                    not _is_answer(node):
                found.append(f"{where} {{\"stage\": ...}}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if _SET_STAGE.search(node.value):
                found.append(f"{where} SQL SET stage")
    return found


def _is_answer(node: ast.Dict) -> bool:
    """A dict that answers a request (it names the flight) rather than one that sets fields."""
    return any(isinstance(k, ast.Constant) and k.value == "flight" for k in node.keys)


def test_only_the_store_writes_a_flight_stage_and_only_as_the_table_says():
    writes = []
    for _, path in sorted(MODULES.items()):
        rel = path.relative_to(ROOT.parent).as_posix()
        if not rel.startswith(_OWNERS):
            writes.extend(_stage_writes(rel, path.read_text()))
    assert writes == []


def test_the_scan_sees_each_kind_of_raw_stage_write():
    source = ("def f(core, fid, flight):\n"
              "    core.store.update_flight(fid, stage='ready', gates=[])\n"
              "    core.store.db.run(\"UPDATE flights SET lease_runner = NULL, stage = 'ready' \"\n"
              "                      \"WHERE id = ?\", (fid,))\n"
              "    values = {'gates': []}\n"
              "    values['stage'] = 'ready'\n"
              "    core.store.update_flight(fid, **{'stage': 'ready'})\n"
              "    flight.stage = 'ready'\n")
    found = _stage_writes("gg/control/probe.py", source)
    assert sorted(found, key=lambda w: int(w.split(":")[1].split()[0])) == [
        "gg/control/probe.py:2 update_flight(stage=...)", "gg/control/probe.py:3 SQL SET stage",
        'gg/control/probe.py:6 ["stage"] = ...', 'gg/control/probe.py:7 {"stage": ...}',
        "gg/control/probe.py:8 .stage = ..."]
    assert _stage_writes("gg/control/probe.py", "SQL = 'UPDATE flights SET seen = 1 "
                                                "WHERE stage = \\'ready\\''\n") == []


# -- the lifecycle as drawn ------------------------------------------------------------

_EDGE = re.compile(r"^\s*(\w+)\s+--(\w+)-->\s+(\w+)")


def _drawn_edges(text: str) -> set[tuple[Stage, Event, Stage]]:
    return {(Stage(a), Event(e), Stage(b)) for a, e, b in
            (m.groups() for m in map(_EDGE.match, text.splitlines()) if m)}


def _fenced(markdown: str) -> str:
    return "\n".join(re.findall(r"^```[^\n]*\n(.*?)^```", markdown, re.MULTILINE | re.DOTALL))


def test_the_lifecycle_drawn_in_docs_architecture_is_the_transition_table():
    assert _drawn_edges(_fenced(DOC.read_text())) == set(TRANSITIONS)


def test_the_lifecycle_drawn_in_the_flights_docstring_is_the_transition_table():
    assert _drawn_edges(flights.__doc__) == set(TRANSITIONS)


# -- one writer for both stores --------------------------------------------------------

# Where the two stores differ only at the edges of a transaction, the rest is written once
# (gg/store/writer.py, gg.store.db.SharedDatabase): no run of this many lines stands in both.
_SHARED_RUN = 12


def _runs_in_both(one: str, other: str, length: int = _SHARED_RUN) -> list[str]:
    """The runs of ``length`` lines found in both texts, compared without indentation, blank
    lines and comment lines (the first line of each, as it reads in ``one``)."""
    def lines(text: str) -> list[str]:
        return [s for s in (line.strip() for line in text.splitlines())
                if s and not s.startswith("#")]

    theirs = lines(other)
    seen = {tuple(theirs[i:i + length]) for i in range(len(theirs) - length + 1)}
    ours = lines(one)
    return [ours[i] for i in range(len(ours) - length + 1)
            if tuple(ours[i:i + length]) in seen]


def test_no_run_of_a_dozen_lines_stands_in_both_stores():
    sqlite, postgres = (ROOT / "store" / "sqlite.py").read_text(), \
        (ROOT / "store" / "postgres.py").read_text()
    assert _runs_in_both(sqlite, postgres) == []


def test_a_run_of_a_dozen_lines_in_both_texts_is_found_whatever_its_indentation():
    run = "\n".join(f"x{i} = {i}" for i in range(_SHARED_RUN))
    assert _runs_in_both("a = 1\n" + run, "    # note\n" + run.replace("\n", "\n\n    ")) == \
        ["x0 = 0"]
    assert _runs_in_both(run, run.rsplit("\n", 1)[0]) == []
