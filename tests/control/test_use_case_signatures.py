"""Use cases read at their call sites: past the first few, parameters are passed by name.

``f(core, person, ref, *, isolation=…, workers=…)``: the subject of a use case goes first,
its details by keyword, so a call such as ``hand_back(core, r, f, 1, "landed", 0, None, "k")``
cannot silently swap two of them.
"""

from __future__ import annotations

import ast
from pathlib import Path

import gg.control

MAX_POSITIONAL = 4


def positional_heavy(root: Path) -> list[str]:
    found = []
    for path in sorted(root.glob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            positional = node.args.posonlyargs + node.args.args
            if len(positional) > MAX_POSITIONAL:
                found.append(f"{path.name}:{node.lineno} {node.name}"
                             f"({', '.join(a.arg for a in positional)})")
    return found


def test_no_use_case_takes_more_than_four_parameters_by_position():
    found = positional_heavy(Path(gg.control.__file__).parent)
    assert not found, ("take the details keyword-only (def f(core, person, *, name, …)):\n  "
                       + "\n  ".join(found))


def test_the_scan_finds_a_use_case_with_five_positional_parameters(tmp_path):
    (tmp_path / "x.py").write_text("def f(core, person, name, admin, ttl):\n    pass\n"
                                   "def g(core, person, name, *, admin, ttl):\n    pass\n")
    assert positional_heavy(tmp_path) == ["x.py:1 f(core, person, name, admin, ttl)"]
