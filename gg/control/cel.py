"""The CEL adapter: parses and compiles a meaning with ``celpy``, and the worker process that
evaluates it.

What gg decides about a meaning is in ``gg.domain.meanings`` (facts, static checks, cost
bound, :class:`~gg.domain.meanings.Meaning`), pure and stdlib only. This module is the one
that imports ``celpy``, and it lives beside the use cases rather than in the domain for two
reasons: ``celpy`` is a third-party framework, and :func:`serve` is the loop of a separate
process (pipes, an address-space limit, a watch on its parent), which is I/O. Its three
entry points: :func:`compile_meaning`, which parses a predicate and hands the tree to the
domain's checks, so a bad one is refused *before* it is charted with a one-sentence message
and its line and column; :func:`serve`, the worker loop; and the evaluation function a
:class:`~gg.domain.meanings.Meaning` calls. The control plane never evaluates a meaning in
its own process: it asks a worker (:func:`serve`) under a deadline (``gg.control.verdicts``),
because CEL is Python code that cannot be interrupted.

celpy quirks this module absorbs (cel-python 0.5):

- the compiled runner is ~5x faster than the interpreter, but it keeps the activation in a
  module global while it runs, so every evaluation holds ``_LOCK``;
- the parser is a process-wide singleton whose tree class decides which runner can be used,
  so it is rebuilt here if something else built it with the interpreter's tree class;
- ``Environment()`` sets the recursion limit; it is built once and never lowers the limit;
- it logs evaluation errors at ERROR level; an unknown fact value is expected here, so its
  logger is silenced.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import celpy
import celpy.celtypes as celtypes
from celpy.celparser import CELParser
from celpy.evaluation import TranspilerTree, base_functions
from lark.exceptions import UnexpectedCharacters, UnexpectedToken

from gg.domain.meanings import Meaning, MeaningError, check, check_text
from gg.settings import Settings

__all__ = ["COST_LIMIT", "compile_meaning", "serve"]

# The default static cost limit (the setting GG_MEANING_COST_LIMIT overrides it). A unit is
# about one CEL operation; ``os == "linux" && cpu_count >= 4 && "git" in tools`` costs 75,
# and celpy runs 10,000 units in about a tenth of a second, under the deadline's 0.25 s.
COST_LIMIT = Settings.meaning_cost_limit

_LOCK = threading.Lock()
_FUNCTIONS = frozenset(n for n in base_functions if n.isidentifier()) | {"has", "dyn"}
_CLOSERS = {"RPAR": "')'", "RSQB": "']'", "RBRACE": "'}'"}

logging.getLogger("celpy").setLevel(logging.CRITICAL)


def _environment() -> celpy.Environment:
    """celpy's environment, built on first use (:func:`_env`): building its LALR parser costs
    about half a second of CPU, which a control plane that never charts a meaning, and every
    process that only imports this module, need not pay."""
    parser = CELParser.CEL_PARSER
    if parser is not None and parser.options.tree_class is not TranspilerTree:
        CELParser.CEL_PARSER = None  # the documented way to rebuild celpy's singleton parser
    limit = sys.getrecursionlimit()
    env = celpy.Environment(runner_class=celpy.CompiledRunner)
    sys.setrecursionlimit(max(limit, sys.getrecursionlimit()))
    return env


_BUILT: list[celpy.Environment] = []


def _env() -> celpy.Environment:
    """The one environment of this process (call with ``_LOCK`` held)."""
    if not _BUILT:
        _BUILT.append(_environment())
    return _BUILT[0]


def compile_meaning(text: str, cost_limit: int | None = COST_LIMIT) -> Meaning:
    """Parse and check ``text``; raise :class:`MeaningError` with the position of the fault.

    ``cost_limit`` None skips the cost bound (a worker re-compiling a meaning the control
    plane has already accepted); nested comprehensions are refused either way.
    """
    check_text(text)
    try:
        with _LOCK:
            tree = _env().compile(text)
    except celpy.CELParseError as exc:
        raise _parse_error(text, exc) from None
    except RecursionError:
        raise MeaningError("the meaning is nested too deeply", 1, 1) from None
    facts_used, cost = check(tree, functions=_FUNCTIONS, cost_limit=cost_limit)
    try:
        with _LOCK:
            program = _env().program(tree)
    except Exception:  # noqa: BLE001 -- a celpy limitation, not the operator's typo
        raise MeaningError("the meaning uses a construct gg cannot evaluate", 1, 1) from None
    return Meaning(text, facts_used, _evaluator(program), cost)


def _evaluator(program: Any) -> Callable[[Mapping[str, Any]], bool | None]:
    """The compiled program as a plain function of the facts: True, False or None; it may
    raise (:meth:`Meaning.evaluate` turns that into None)."""

    def evaluate(facts: Mapping[str, Any]) -> bool | None:
        activation = {name: _to_cel(value) for name, value in facts.items()}
        with _LOCK:
            value = program.evaluate(activation)
        if isinstance(value, (bool, celtypes.BoolType)):
            return bool(value)
        return None

    return evaluate


_WORKER_MEMORY = 1 << 30  # bytes of address space a worker may use (a runaway map())


def serve(requests: Any = None, answers: Any = None) -> None:
    """The evaluation worker's loop: one JSON line in (``{"meaning", "facts"}``), one out
    (``{"verdict": true | false | null}``), until its input closes.

    The control plane runs this in a separate process (``gg.control.verdicts``) and kills
    it when an evaluation overruns the deadline, so it keeps no state worth keeping but the
    compiled meanings. The meaning was accepted when it was charted; if it no longer
    compiles, the answer is null (cannot decide).
    """
    requests = requests or sys.stdin.buffer
    answers = answers or sys.stdout.buffer
    _die_with_parent()
    try:
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (_WORKER_MEMORY, _WORKER_MEMORY))
    except (ImportError, ValueError, OSError):  # not every platform has it
        pass
    with _LOCK:
        _env()  # the parser is built before "ready": the deadline is for evaluations only
    compiled: dict[str, Meaning | None] = {}
    answers.write(b'{"ready": true}\n')
    answers.flush()
    for line in requests:
        try:
            request = json.loads(line)
            text = request["meaning"]
            if text not in compiled:
                if len(compiled) >= 256:
                    compiled.clear()
                try:
                    compiled[text] = compile_meaning(text, cost_limit=None)
                except MeaningError:
                    compiled[text] = None
            meaning = compiled[text]
            verdict = meaning.evaluate(request.get("facts") or {}) if meaning else None
        except (ValueError, KeyError, TypeError, MemoryError):
            verdict = None
        answers.write(json.dumps({"verdict": verdict}).encode() + b"\n")
        answers.flush()


def _die_with_parent() -> None:
    """End this worker when the control plane is gone, even in the middle of a long
    evaluation (its input closing is noticed only between two)."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                os._exit(0)

    threading.Thread(target=watch, name="gg-meaning-parent", daemon=True).start()


def _to_cel(value: Any) -> Any:
    """Plain JSON-like value to celpy's types; ``json_to_cel`` is slower (typing isinstance)."""
    if isinstance(value, str):
        return celtypes.StringType(value)
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int):
        return celtypes.IntType(value)
    if isinstance(value, float):
        return celtypes.DoubleType(value)
    if isinstance(value, (list, tuple)):
        return celtypes.ListType([_to_cel(v) for v in value])
    if isinstance(value, Mapping):
        return celtypes.MapType({_to_cel(k): _to_cel(v) for k, v in value.items()})
    return celpy.json_to_cel(value)


# -- syntax errors ------------------------------------------------------------------------

def _parse_error(text: str, exc: celpy.CELParseError) -> MeaningError:
    """One plain sentence from lark's exception, which celpy keeps as the context."""
    cause = exc.__context__
    line, column = exc.line or 1, exc.column or 1
    expected = set(getattr(cause, "expected", None) or getattr(cause, "allowed", None) or ())
    if isinstance(cause, UnexpectedCharacters):
        detail = _unexpected_character(text, line, column, str(cause.char))
    elif isinstance(cause, UnexpectedToken) and cause.token.type == "$END":
        head = text.rstrip()
        line = head.count("\n") + 1
        column = len(head.rsplit("\n", 1)[-1]) + 1
        detail = f"expected {_expectation(expected)}"
    elif isinstance(cause, UnexpectedToken):
        token = cause.token
        line, column = token.line or line, token.column or column
        if token.type in _CLOSERS and token.type not in expected and "IDENT" not in expected:
            detail = f"unexpected {_CLOSERS[token.type]}, nothing is open"
        else:
            detail = f"unexpected '{token}', expected {_expectation(expected)}"
    else:
        detail = "the expression is not valid CEL"
    return MeaningError(f"the meaning does not parse at line {line}, column {column}: {detail}",
                        line, column)


def _expectation(expected: set[str]) -> str:
    if "IDENT" in expected:
        return "an operand"
    closers = [_CLOSERS[t] for t in sorted(expected) if t in _CLOSERS]
    if len(closers) == 1 and len(expected) == 1:
        return closers[0]
    return "an operator or the end of the meaning"


def _unexpected_character(text: str, line: int, column: int, char: str) -> str:
    following = text.splitlines()[line - 1][column:column + 1] if text.splitlines() else ""
    if char in "\"'":
        return "a string is not closed"
    if char == "=" and following != "=":
        return "unexpected '=', use == to compare"
    if char in "&|" and following != char:
        return f"unexpected '{char}', use {char * 2}"
    return f"unexpected character '{char}'"
