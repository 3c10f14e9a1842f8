"""Environment meanings: a CEL predicate over a runner's reported facts.

``gg environment chart NAME --means "PREDICATE"`` gives the label ``environment=NAME`` a
meaning. When a runner states that label, the control plane evaluates the meaning on the
runner's facts: true makes the label *measured*, false makes it *refuted* (never used for
matching), and anything it cannot decide leaves it *stated* (see ``gg.domain.labels``).

This is the one module that imports ``celpy``. It exists so that the rest of gg sees three
plain things: :func:`compile_meaning`, which refuses a bad predicate *before* it is charted
(syntax error, unknown fact, a comparison that can never work, a result that is not true or
false, a cost that is unbounded or above the limit) with a one-sentence message and the line
and column; :meth:`Meaning.evaluate`, which never raises; and :func:`facts_from_inventory`,
which is the only definition of what a fact is. The control plane never calls
:meth:`Meaning.evaluate` itself: it asks a worker process (:func:`serve`) under a deadline
(``gg.control.verdicts``), because CEL is Python code that cannot be interrupted.

Why the cost bound: a valid meaning can be very expensive (three nested ``.all()`` over
40-element lists take seconds), and it is evaluated on every registration and check-in of
every runner that states its label. So a comprehension (``all``, ``exists``, ``exists_one``,
``map``, ``filter``) inside another's condition is refused, and so is a meaning whose static
cost (:class:`_Cost`) is above ``GG_MEANING_COST_LIMIT``.

Why the static checks: celpy evaluates lazily and turns every mistake into an evaluation
error, so a typo such as ``cpu_cuont`` would otherwise chart fine and silently leave every
runner's label unchecked. A predicate is read once by a person and evaluated thousands of
times, so it is checked when it is written.

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

import difflib
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import celpy
import celpy.celtypes as celtypes
import lark
from celpy.celparser import CELParser
from celpy.evaluation import TranspilerTree, base_functions
from lark.exceptions import UnexpectedCharacters, UnexpectedToken

from gg.errors import BadRequest
from gg.settings import Settings

__all__ = ["COST_LIMIT", "FACT_TYPES", "Meaning", "MeaningError", "compile_meaning",
           "facts_from_inventory", "serve"]

# name -> CEL type. The single list of names a predicate may use; docs/environments.md
# documents each with an example. Readings (CPU load, free memory) are deliberately absent:
# SPEC section 8 says they are never usable to require anything.
FACT_TYPES: Mapping[str, str] = {
    "os": "string",
    "arch": "string",
    "cpu_count": "int",
    "memory": "int",
    "memory_gb": "double",
    "hostname": "string",
    "tools": "list<string>",
    "python": "string",
    "gg_version": "string",
    "labels": "map<string>",
    "isolation": "list<string>",
    "container_engine": "string",
    "addresses": "list<string>",
}

MAX_LENGTH = 4000

# The default static cost limit (the setting GG_MEANING_COST_LIMIT overrides it). A unit is
# about one CEL operation; ``os == "linux" && cpu_count >= 4 && "git" in tools`` costs 75,
# and celpy runs 10,000 units in about a tenth of a second, under the deadline's 0.25 s.
COST_LIMIT = Settings.meaning_cost_limit
# What the cost bound assumes for the size of a list or map fact (tools, addresses, labels…)
# and of a string fact: a runner reports what it has, so the true size is only known when
# the meaning runs; the deadline bounds what this assumption misses.
FACT_SIZE = 64

_LOCK = threading.Lock()
_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
_FUNCTIONS = frozenset(n for n in base_functions if n.isidentifier()) | {"has", "dyn"}
_TYPE_NAMES = frozenset({"int", "uint", "double", "bool", "string", "bytes", "list", "map",
                         "null_type", "type"})
_RETURNS = {"size": "int", "int": "int", "uint": "uint", "double": "double",
            "string": "string", "bool": "bool", "bytes": "bytes", "has": "bool",
            "startsWith": "bool", "endsWith": "bool", "contains": "bool", "matches": "bool",
            "all": "bool", "exists": "bool", "exists_one": "bool", "type": "type"}
_LITERALS = {"INT_LIT": "int", "UINT_LIT": "uint", "FLOAT_LIT": "double",
             "STRING_LIT": "string", "MLSTRING_LIT": "string", "BYTES_LIT": "bytes",
             "BOOL_LIT": "bool", "NULL_LIT": "null"}
_ORDERED = frozenset({"int", "uint", "double", "string", "bytes", "bool"})
_NUMBERS = frozenset({"int", "uint", "double"})
_CLOSERS = {"RPAR": "')'", "RSQB": "']'", "RBRACE": "'}'"}

logging.getLogger("celpy").setLevel(logging.CRITICAL)


class MeaningError(BadRequest):
    """A predicate that cannot be charted; ``line`` and ``column`` are 1-based."""

    code = "invalid_meaning"

    def __init__(self, message: str, line: int, column: int):
        super().__init__(message)
        self.line = line
        self.column = column


def _environment() -> celpy.Environment:
    parser = CELParser.CEL_PARSER
    if parser is not None and parser.options.tree_class is not TranspilerTree:
        CELParser.CEL_PARSER = None  # the documented way to rebuild celpy's singleton parser
    limit = sys.getrecursionlimit()
    env = celpy.Environment(runner_class=celpy.CompiledRunner)
    sys.setrecursionlimit(max(limit, sys.getrecursionlimit()))
    return env


_ENV = _environment()


@dataclass(frozen=True, eq=False)
class Meaning:
    """A checked predicate, compiled once and evaluated against many runners' facts."""

    text: str
    facts_used: frozenset[str]
    _program: Any = field(repr=False)
    cost: int = 0

    def evaluate(self, facts: Mapping[str, Any]) -> bool | None:
        """True or False, or None when the facts cannot decide (a missing or ill-typed fact).

        Never raises: one runner's odd inventory must not break a listing of the fleet.
        """
        try:
            activation = {name: _to_cel(facts[name]) for name in self.facts_used if name in facts}
            with _LOCK:
                value = self._program.evaluate(activation)
        except Exception:  # noqa: BLE001 -- celpy raises many types; all mean "cannot decide"
            return None
        if isinstance(value, (bool, celtypes.BoolType)):
            return bool(value)
        return None

    __call__ = evaluate


def compile_meaning(text: str, cost_limit: int | None = COST_LIMIT) -> Meaning:
    """Parse and check ``text``; raise :class:`MeaningError` with the position of the fault.

    ``cost_limit`` None skips the cost bound (a worker re-compiling a meaning the control
    plane has already accepted); nested comprehensions are refused either way.
    """
    if not text.strip():
        raise MeaningError('the meaning is empty; write a condition such as os == "linux"', 1, 1)
    if len(text) > MAX_LENGTH:
        raise MeaningError(f"the meaning is longer than {MAX_LENGTH} characters", 1, 1)
    try:
        with _LOCK:
            tree = _ENV.compile(text)
    except celpy.CELParseError as exc:
        raise _parse_error(text, exc) from None
    except RecursionError:
        raise MeaningError("the meaning is nested too deeply", 1, 1) from None
    checker = _Checker()
    try:
        result = checker.infer(tree, {})
    except RecursionError:
        raise MeaningError("the meaning is nested too deeply", 1, 1) from None
    if result is not None and result != "bool":
        line, column = _position(tree)
        raise MeaningError(f"the meaning gives {_a(result)}, not true or false, "
                           f"at line {line}, column {column}", line, column)
    try:
        cost = _Cost().bound(tree, cost_limit)
    except RecursionError:
        raise MeaningError("the meaning is nested too deeply", 1, 1) from None
    try:
        with _LOCK:
            program = _ENV.program(tree)
    except Exception:  # noqa: BLE001 -- a celpy limitation, not the operator's typo
        raise MeaningError("the meaning uses a construct gg cannot evaluate", 1, 1) from None
    return Meaning(text, frozenset(checker.facts), program, cost)


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


def facts_from_inventory(inventory: Mapping[str, Any] | None,
                         capabilities: Mapping[str, Any] | None,
                         labels: Mapping[str, str] | None) -> dict[str, Any]:
    """The facts a meaning may read, from a runner's check-in report.

    A key that is missing or of the wrong type yields *no* fact rather than a default, so a
    meaning that reads it evaluates to unknown (the label stays stated) instead of being
    refuted by a zero nobody measured.
    """
    inv = inventory or {}
    cap = capabilities or {}
    facts: dict[str, Any] = {}
    for name in ("os", "arch"):
        if isinstance(inv.get(name), str):
            facts[name] = inv[name].lower()
    for name in ("hostname", "python", "gg_version"):
        if isinstance(inv.get(name), str):
            facts[name] = inv[name]
    if _is_int(inv.get("cpu_count")):
        facts["cpu_count"] = inv["cpu_count"]
    if _is_int(inv.get("memory_total")):
        facts["memory"] = inv["memory_total"]
        facts["memory_gb"] = round(inv["memory_total"] / 2**30, 2)
    for fact, source, key in (("addresses", inv, "addresses"), ("tools", cap, "tools"),
                              ("isolation", cap, "isolation_levels")):
        value = source.get(key)
        if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            facts[fact] = sorted(set(value))
    engine = cap.get("container_engine", 0)  # absent: not reported; None or "": none found
    if engine is None or isinstance(engine, str):
        facts["container_engine"] = engine or ""
    facts["labels"] = {str(k): str(v) for k, v in (labels or {}).items()}
    return facts


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


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# -- static checks ------------------------------------------------------------------------

def _kind(t: str | None) -> str | None:
    return None if t is None else t.split("<", 1)[0]


def _element(t: str | None) -> str | None:
    return t[t.index("<") + 1:-1] if t and "<" in t else None


def _a(t: str) -> str:
    kind = _kind(t) or t
    return ("an " if kind == "int" else "a ") + kind  # every other CEL type name takes "a"


def _position(node: lark.Tree | lark.Token) -> tuple[int, int]:
    if isinstance(node, lark.Token):
        return node.line or 1, node.column or 1
    meta = node.meta
    return getattr(meta, "line", 1), getattr(meta, "column", 1)


def _fail(node: lark.Tree | lark.Token, head: str, tail: str = "") -> MeaningError:
    """The position goes after the main clause: "<head> at line L, column C<tail>"."""
    line, column = _position(node)
    return MeaningError(f"{head} at line {line}, column {column}{tail}", line, column)


class _Checker:
    """Walks the parse tree once: names must be facts, and types are inferred where known.

    A type is a CEL type name (``int``, ``string``…), ``list<string>``/``map<string>`` when
    the element type is known, or None for "not known until evaluation". Only certain
    mistakes are refused; anything unknown is left to evaluation, which answers None.
    """

    def __init__(self) -> None:
        self.facts: set[str] = set()

    def infer(self, node: lark.Tree, scope: dict[str, str | None]) -> str | None:
        handler = getattr(self, "_" + node.data, None)
        if handler is not None:
            return handler(node, scope)
        kids = [self.infer(c, scope) for c in node.children if isinstance(c, lark.Tree)]
        return kids[0] if len(kids) == 1 else None

    def _expr(self, node: lark.Tree, scope: dict) -> str | None:
        if len(node.children) == 1:
            return self.infer(node.children[0], scope)
        cond, yes, no = (self.infer(c, scope) for c in node.children)
        self._need_bool(node.children[0], cond, "the condition of ? :")
        return yes if yes == no else None

    def _conditionalor(self, node: lark.Tree, scope: dict) -> str | None:
        return self._logical(node, scope, "||")

    def _conditionaland(self, node: lark.Tree, scope: dict) -> str | None:
        return self._logical(node, scope, "&&")

    def _logical(self, node: lark.Tree, scope: dict, op: str) -> str | None:
        if len(node.children) == 1:
            return self.infer(node.children[0], scope)
        for child in node.children:
            self._need_bool(child, self.infer(child, scope), f"each side of {op}")
        return "bool"

    def _need_bool(self, node: lark.Tree, t: str | None, what: str) -> None:
        if t is not None and t != "bool":
            raise _fail(node, f"{what} must be true or false, but this is {_a(t)}")

    def _relation(self, node: lark.Tree, scope: dict) -> str | None:
        if len(node.children) == 1:
            return self.infer(node.children[0], scope)
        op_node, right_node = node.children
        op = op_node.data.removeprefix("relation_")
        left = self.infer(op_node.children[0], scope)
        right = self.infer(right_node, scope)
        if op == "in":
            if _kind(right) not in (None, "list", "map", "string"):
                raise _fail(node, f"'in' needs a list or a map on its right, not {_a(right)}")
            inner = "string" if _kind(right) in ("map", "string") else _element(right)
            if _kind(left) and _kind(inner) and _kind(left) != _kind(inner):
                raise _fail(node, f"'in' looks for {_a(left)}, but the right side holds "
                                  f"{_kind(inner)} values")
            return "bool"
        self._same(node, left, right, "compares", "with")
        if op in ("lt", "le", "gt", "ge") and _kind(left) not in (None, *_ORDERED):
            raise _fail(node, f"the meaning orders {_a(left)}, which has no order")
        return "bool"

    def _same(self, node: lark.Tree, left: str | None, right: str | None,
              verb: str, joint: str) -> None:
        a, b = _kind(left), _kind(right)
        if a is None or b is None or a == b:
            return
        tail = ""
        if a in _NUMBERS and b in _NUMBERS:
            tail = "; numbers must be of the same kind (write 16.0 for a double, 16 for an int)"
        raise _fail(node, f"the meaning {verb} {_a(a)} {joint} {_a(b)}", tail)

    def _addition(self, node: lark.Tree, scope: dict) -> str | None:
        return self._arithmetic(node, scope, {"int", "uint", "double", "string", "bytes", "list"})

    def _multiplication(self, node: lark.Tree, scope: dict) -> str | None:
        return self._arithmetic(node, scope, _NUMBERS)

    def _arithmetic(self, node: lark.Tree, scope: dict, allowed: set | frozenset) -> str | None:
        if len(node.children) == 1:
            return self.infer(node.children[0], scope)
        op_node, right_node = node.children
        left = self.infer(op_node.children[0], scope)
        right = self.infer(right_node, scope)
        for t in (left, right):
            if _kind(t) is not None and _kind(t) not in allowed:
                raise _fail(node, f"arithmetic cannot use {_a(t)}")
        self._same(node, left, right, "combines", "with")
        return left if left == right else None

    def _unary(self, node: lark.Tree, scope: dict) -> str | None:
        if len(node.children) == 1:
            return self.infer(node.children[0], scope)
        op, operand = node.children
        t = self.infer(operand, scope)
        if op.data == "unary_not":
            self._need_bool(operand, t, "the operand of !")
            return "bool"
        if _kind(t) is not None and _kind(t) not in ("int", "double"):
            raise _fail(node, f"the meaning negates {_a(t)}")
        return t

    def _member_dot(self, node: lark.Tree, scope: dict) -> str | None:
        receiver = self.infer(node.children[0], scope)
        if _kind(receiver) not in (None, "map"):
            raise _fail(node.children[1], f"{_a(receiver)} has no field {node.children[1]}")
        return _element(receiver)

    def _member_index(self, node: lark.Tree, scope: dict) -> str | None:
        receiver = self.infer(node.children[0], scope)
        self.infer(node.children[1], scope)
        return _element(receiver)

    def _member_dot_arg(self, node: lark.Tree, scope: dict) -> str | None:
        receiver_node, name = node.children[0], node.children[1]
        args = list(node.children[2].children) if len(node.children) > 2 else []
        receiver = self.infer(receiver_node, scope)
        if name in _MACROS:
            return self._macro(node, str(name), receiver, args, scope)
        if name not in _FUNCTIONS:
            raise _fail(name, f"the meaning calls an unknown function {name}()")
        for arg in args:
            self.infer(arg, scope)
        return _RETURNS.get(str(name))

    def _macro(self, node: lark.Tree, name: str, receiver: str | None, args: list,
               scope: dict) -> str | None:
        variable = _plain_name(args[0]) if len(args) == 2 else None
        if variable is None:
            example = f'{name}(t, t == "git")'
            raise _fail(node, f"{name}() takes a name and a condition, as in {example}")
        if _kind(receiver) not in (None, "list", "map"):
            raise _fail(node, f"{name}() needs a list or a map, not {_a(receiver)}")
        each = "string" if _kind(receiver) == "map" else _element(receiver)  # map: its keys
        inner = {**scope, variable: each}
        body = self.infer(args[1], inner)
        if name in ("all", "exists", "exists_one", "filter"):
            self._need_bool(args[1], body, f"the condition of {name}()")
        if name == "map":
            return f"list<{body}>" if body and "<" not in body else "list"
        return receiver if name == "filter" else "bool"

    def _ident_arg(self, node: lark.Tree, scope: dict) -> str | None:
        name = node.children[0]
        if name not in _FUNCTIONS:
            raise _fail(name, f"the meaning calls an unknown function {name}()")
        for arg in (node.children[1].children if len(node.children) > 1 else []):
            self.infer(arg, scope)
        return _RETURNS.get(str(name))

    _dot_ident_arg = _ident_arg

    def _ident(self, node: lark.Tree, scope: dict) -> str | None:
        token = node.children[0]
        name = str(token)
        if name in scope:
            return scope[name]
        if name in FACT_TYPES:
            self.facts.add(name)
            return FACT_TYPES[name]
        if name in _TYPE_NAMES:
            return "type"
        close = difflib.get_close_matches(name, list(FACT_TYPES), n=1)
        hint = f"; did you mean {close[0]}?" if close else f"; facts are {', '.join(FACT_TYPES)}"
        raise _fail(token, f"the meaning names an unknown fact {name}", hint)

    _dot_ident = _ident

    def _literal(self, node: lark.Tree, scope: dict) -> str | None:
        return _LITERALS.get(node.children[0].type) if node.children else None

    def _list_lit(self, node: lark.Tree, scope: dict) -> str | None:
        items = node.children[0].children if node.children else []
        kinds = {self.infer(item, scope) for item in items}
        only = kinds.pop() if len(kinds) == 1 else None
        return f"list<{only}>" if only and "<" not in only else "list"

    def _map_lit(self, node: lark.Tree, scope: dict) -> str | None:
        for child in node.children:
            self.infer(child, scope)
        return "map"


def _plain_name(node: lark.Tree) -> str | None:
    """The identifier an expression consists of, or None (macro variables must be names)."""
    while isinstance(node, lark.Tree) and len(node.children) == 1:
        if node.data == "ident":
            return str(node.children[0])
        node = node.children[0]
    return None


# -- cost ---------------------------------------------------------------------------------

class _Cost:
    """A static upper bound on the work a meaning does, in units of about one CEL operation.

    Every operator, literal and name costs 1; ``x in L`` costs the size of ``L``; a
    comprehension costs its receiver plus the receiver's size times its condition; a
    string function costs the string's size (``matches`` too: celpy matches with RE2, which
    never backtracks). The size of a literal is counted, a fact's is assumed
    (:data:`FACT_SIZE`). A comprehension inside another's condition is refused outright:
    its cost multiplies with each level, which is how a 400-character meaning takes minutes.
    """

    def __init__(self) -> None:
        self.worst: tuple[int, lark.Tree | lark.Token | None] = (0, None)

    def bound(self, tree: lark.Tree, limit: int | None) -> int:
        cost, _ = self.walk(tree, None)
        if limit is not None and cost > limit:
            raise _fail(self.worst[1] or tree,
                        f"the meaning may cost up to {cost} steps, more than the limit of "
                        f"{limit} (GG_MEANING_COST_LIMIT), most of them")
        return cost

    def _note(self, cost: int, node: lark.Tree | lark.Token) -> None:
        if cost > self.worst[0]:
            self.worst = (cost, node)

    def walk(self, node: lark.Tree, within: str | None) -> tuple[int, int]:
        """(cost, size) of ``node``; ``within`` names the comprehension whose condition
        this is. Size is the element count of a list or map, the length of a string."""
        handler = getattr(self, "_" + node.data, None)
        if handler is not None:
            return handler(node, within)
        kids = [self.walk(c, within) for c in node.children if isinstance(c, lark.Tree)]
        if len(kids) == 1:
            return kids[0]
        cost = 1 + sum(c for c, _ in kids)
        return cost, max((s for _, s in kids), default=1)

    def _literal(self, node: lark.Tree, within: str | None) -> tuple[int, int]:
        token = node.children[0] if node.children else None
        if token is not None and token.type in ("STRING_LIT", "MLSTRING_LIT", "BYTES_LIT"):
            return 1, max(1, len(str(token)))
        return 1, 1

    def _ident(self, node: lark.Tree, within: str | None) -> tuple[int, int]:
        name = str(node.children[0])
        kind = _kind(FACT_TYPES.get(name))
        return 1, FACT_SIZE if kind in ("list", "map", "string") else 1

    _dot_ident = _ident

    def _list_lit(self, node: lark.Tree, within: str | None) -> tuple[int, int]:
        items = node.children[0].children if node.children else []
        return 1 + sum(self.walk(i, within)[0] for i in items), max(1, len(items))

    def _map_lit(self, node: lark.Tree, within: str | None) -> tuple[int, int]:
        kids = [self.walk(c, within) for c in node.children if isinstance(c, lark.Tree)]
        entries = node.children[0].children if node.children else []
        return 1 + sum(c for c, _ in kids), max(1, len(entries) // 2)

    def _relation(self, node: lark.Tree, within: str | None) -> tuple[int, int]:
        if len(node.children) == 1:
            return self.walk(node.children[0], within)
        op_node, right_node = node.children
        left, _ = self.walk(op_node.children[0], within)
        right, size = self.walk(right_node, within)
        cost = 1 + left + right
        if op_node.data == "relation_in":
            cost += size
            self._note(size, node)
        return cost, 1

    def _addition(self, node: lark.Tree, within: str | None) -> tuple[int, int]:
        if len(node.children) == 1:
            return self.walk(node.children[0], within)
        op_node, right_node = node.children
        left, left_size = self.walk(op_node.children[0], within)
        right, right_size = self.walk(right_node, within)
        size = left_size + right_size  # joined lists or strings: copying costs their size
        return 1 + left + right + size, size

    def _member_dot_arg(self, node: lark.Tree, within: str | None) -> tuple[int, int]:
        receiver_node, name = node.children[0], str(node.children[1])
        args = list(node.children[2].children) if len(node.children) > 2 else []
        receiver, size = self.walk(receiver_node, within)
        if name in _MACROS:
            if within is not None:
                raise _fail(node.children[1], f"the meaning puts {name}() inside the "
                                              f"condition of {within}()",
                            "; a comprehension inside another is refused because its cost "
                            "multiplies")
            body = sum(self.walk(a, name)[0] for a in args[1:])
            loop = size * (1 + body)
            self._note(loop, node.children[1])
            return 1 + receiver + loop, size if name in ("map", "filter") else 1
        cost = 1 + receiver + sum(self.walk(a, within)[0] for a in args)
        if name in ("contains", "startsWith", "endsWith", "matches"):
            work = size
            self._note(work, node.children[1])
            cost += work
        return cost, size if name in ("string", "bytes") else 1

    def _ident_arg(self, node: lark.Tree, within: str | None) -> tuple[int, int]:
        args = list(node.children[1].children) if len(node.children) > 1 else []
        walked = [self.walk(a, within) for a in args]
        size = max((s for _, s in walked), default=1)
        keeps = str(node.children[0]) in ("dyn", "string", "bytes")  # size() gives an int
        return 1 + sum(c for c, _ in walked), size if keeps else 1

    _dot_ident_arg = _ident_arg


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
