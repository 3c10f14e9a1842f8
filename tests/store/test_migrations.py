"""The schema's migrations are one ordered list (gg.store.migrations.MIGRATIONS): which exist
never depends on which modules happen to be imported, and both stores run them in its order."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from gg.store.migrations import MIGRATIONS

GG = Path(__file__).resolve().parents[2] / "gg"
LIST = GG / "store" / "migrations.py"
# A decorator that registers a migration: @migration(N, ...), @store.migration(...), ...
_DECORATOR = re.compile(r"^\s*@\s*[\w.]*migration\b", re.IGNORECASE | re.MULTILINE)


def _modules() -> dict[str, str]:
    return {str(p.relative_to(GG.parent)): p.read_text() for p in sorted(GG.rglob("*.py"))}


def test_migration_numbers_strictly_increase_down_the_list():
    numbers = [m.number for m in MIGRATIONS]
    out_of_order = [(a, b) for a, b in zip(numbers, numbers[1:], strict=False) if b <= a]
    assert out_of_order == [], (
        "MIGRATIONS must list each number once, in increasing order (a new one goes at the end)")


def test_no_module_registers_a_migration_by_a_decorator():
    found = [f"{rel}: {m.group().strip()}" for rel, source in _modules().items()
             for m in _DECORATOR.finditer(source)]
    assert found == [], "list the migration in gg.store.migrations.MIGRATIONS instead"


def test_migrations_are_made_only_in_the_list():
    """A ``Migration(...)`` built anywhere else would be one the stores never run."""
    made = sorted(rel for rel, source in _modules().items()
                  if rel != str(LIST.relative_to(GG.parent))
                  and any(isinstance(n, ast.Call) and getattr(n.func, "id", "") == "Migration"
                          for n in ast.walk(ast.parse(source))))
    assert made == []


def test_every_migration_function_in_the_store_is_listed():
    """A function written as a migration (it takes the schema's ``sqlite_utils.Database``) but
    missing from the list would never run: on a merge, a migration whose registration was
    dropped and not listed fails here."""
    listed = {(m.step.__module__, m.step.__name__) for m in MIGRATIONS}
    written = set()
    for path in sorted((GG / "store").glob("*.py")):
        module = "gg.store." + path.stem
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and node.args.args and \
                    ast.unparse(node.args.args[0].annotation or ast.Constant("")) == \
                    "sqlite_utils.Database":
                written.add((module, node.name))
    assert written - listed == set()
    assert listed <= written  # the list names only such functions of the store


def test_migration_names_are_unique():
    names = [m.name for m in MIGRATIONS]
    assert len(set(names)) == len(names)
