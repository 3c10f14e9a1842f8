"""Names once: an AST scan of gg/ for words and numbers that have one home.

Stage, liveness and health words live in the domain's enums, retry budgets in gg/client.py,
exit codes in gg.cli.exits.Exit, error codes in gg.error_codes.ErrorCode, and the protocol's
defaults in gg/settings.py; everything else imports them. (Event kinds: tests/domain/test_event_kinds.py.)
"""

from __future__ import annotations

import ast
from pathlib import Path

import gg
from gg.domain.flights import Stage
from gg.domain.runners import HealthState, Liveness
from gg.error_codes import ErrorCode
from gg.runner.loop import Runner, RunnerOptions
from gg.settings import Settings

GG = Path(gg.__file__).resolve().parent
# The invariant checker knows nothing of gg's code by design (see its docstring).
CHECKER = GG / "proof" / "invariants.py"


def _trees(under: Path = GG):
    for path in sorted(under.rglob("*.py")):
        if path != CHECKER:
            yield path.relative_to(GG.parent), ast.parse(path.read_text(), str(path))


def _is_number(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
    return isinstance(node, ast.Call) and getattr(node.func, "id", None) == "float"


def test_every_retry_budget_is_a_name_from_the_client():
    found = []
    for path, tree in _trees():
        if path == Path("gg/client.py"):
            continue
        for node in ast.walk(tree):
            given = []
            if isinstance(node, ast.keyword) and node.arg == "retry_for":
                given = [node.value]  # a call's retry_for=...
            elif isinstance(node, ast.arguments):  # a parameter's default
                named = node.posonlyargs + node.args
                given = [d for a, d in zip(named[len(named) - len(node.defaults):], node.defaults,
                                                 strict=True)
                         if a.arg == "retry_for"]
                given += [d for a, d in zip(node.kwonlyargs, node.kw_defaults, strict=True)
                          if a.arg == "retry_for" and d is not None]
            found += [f"{path}:{v.lineno}: retry_for={ast.unparse(v)}" for v in given
                      if _is_number(v)]
    assert found == []


def test_every_cli_refusal_names_its_exit_code():
    found = []
    for path, tree in _trees(GG / "cli"):
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "CliError":
                codes = node.args[1:2] + [k.value for k in node.keywords if k.arg == "exit_code"]
                found += [f"{path}:{node.lineno}" for c in codes if _is_number(c)]
    assert found == []


def test_no_module_redeclares_the_stage_names():
    stages = {s.value for s in Stage}
    found = []
    for path, tree in _trees():
        if path == Path("gg/domain/flights.py"):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and len(node.elts) >= 2:
                words = [e.value for e in node.elts if isinstance(e, ast.Constant)]
                if len(words) == len(node.elts) and set(words) <= stages:
                    found.append(f"{path}:{node.lineno}: {ast.unparse(node)}")
    assert found == []


def test_liveness_and_health_words_come_from_their_enums():
    pairs = [{s.value for s in Liveness}, {s.value for s in HealthState}]
    found = []
    for path, tree in _trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.IfExp) and all(
                    isinstance(b, ast.Constant) for b in (node.body, node.orelse)):
                if {node.body.value, node.orelse.value} in pairs:
                    found.append(f"{path}:{node.lineno}: {ast.unparse(node)}")
    assert found == []


def test_a_runner_starts_with_the_settings_defaults_until_the_server_answers(tmp_path):
    runner = Runner(RunnerOptions(server="http://127.0.0.1:9", state_dir=tmp_path, name="r"))
    try:
        assert runner.protocol == Settings().protocol()
    finally:
        runner.client.close()
        runner.claim_client.close()


# Where a code's word means something else: a GitError's reasons, an environment listing's
# key, an assertion's message. ``error`` is not looked for: it is also the one error shape's
# key and an ordinary word (a fact's kind, a hook's outcome).
NOT_A_CODE = {(Path("gg/runner/git.py"), "not_found"), (Path("gg/runner/git.py"), "unreachable"),
              (Path("gg/control/environments.py"), "not_in_force"),
              (Path("gg/client.py"), "unreachable"), (Path("gg/store/postgres.py"), "unreachable")}


def test_error_codes_are_said_only_by_their_enum():
    codes = {code.value for code in ErrorCode} - {ErrorCode.ERROR.value}
    found = []
    for path, tree in _trees():
        if path == Path("gg/error_codes.py"):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in codes \
                    and (path, node.value) not in NOT_A_CODE:
                found.append(f"{path}:{node.lineno}: {node.value!r}")
    assert found == [], "say ErrorCode.<NAME> (gg/error_codes.py):\n" + "\n".join(found)
