"""Environment meanings, the rules: which facts exist, and which predicates may be charted.

``gg environment chart NAME --means "PREDICATE"`` gives the label ``environment=NAME`` a
meaning. When a runner states that label, the control plane evaluates the meaning on the
runner's facts: true makes the label *measured*, false makes it *refuted* (never used for
matching), and anything it cannot decide leaves it *stated* (see ``gg.domain.labels``).

This module holds what gg decides about a meaning, pure and stdlib only: the list of facts
(:data:`FACT_TYPES`) and :func:`facts_from_inventory`, the only definition of what a fact
is; the static checks of a parsed predicate (:func:`check`: unknown facts, comparisons that
can never work, a result that is not true or false, nested comprehensions, a cost above the
limit), each refused with a one-sentence :class:`MeaningError` and the line and column; and
:class:`Meaning`, a checked predicate whose evaluation never raises. Parsing and evaluating
CEL is the adapter's (``gg.control.cel``, the one module that imports ``celpy``); it hands
:func:`check` the parse tree and :class:`Meaning` a plain function to evaluate.

Why the cost bound: a valid meaning can be very expensive (three nested ``.all()`` over
40-element lists take seconds), and it is evaluated on every registration and check-in of
every runner that states its label. So a comprehension (``all``, ``exists``, ``exists_one``,
``map``, ``filter``) inside another's condition is refused, and so is a meaning whose static
cost (:class:`_Cost`) is above ``GG_MEANING_COST_LIMIT``.

Why the static checks: CEL evaluates lazily and turns every mistake into an evaluation
error, so a typo such as ``cpu_cuont`` would otherwise chart fine and silently leave every
runner's label unchecked. A predicate is read once by a person and evaluated thousands of
times, so it is checked when it is written.

A parse tree is read by its shape, not its class: a node has ``data``, ``children`` and
``meta`` (line and column), and a token is a string with ``type``, ``line`` and ``column``
(what the CEL parser produces), so this module needs no parser to be imported or tested.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from gg.error_codes import ErrorCode
from gg.errors import BadRequest

__all__ = ["FACT_TYPES", "MAX_LENGTH", "Meaning", "MeaningError", "check", "check_text",
           "facts_from_inventory"]

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

# What the cost bound assumes for the size of a list or map fact (tools, addresses, labels…)
# and of a string fact: a runner reports what it has, so the true size is only known when
# the meaning runs; the deadline bounds what this assumption misses.
FACT_SIZE = 64

_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
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
_ADDABLE = _NUMBERS | {"string", "bytes", "list"}


class Tree(Protocol):
    """A node of a parsed predicate; its children are nodes and tokens (strings)."""

    data: str
    children: list[Any]

    @property
    def meta(self) -> Any: ...  # read only (lark's Tree makes it on first use)


class MeaningError(BadRequest):
    """A predicate that cannot be charted; ``line`` and ``column`` are 1-based."""

    code = ErrorCode.INVALID_MEANING

    def __init__(self, message: str, line: int, column: int):
        super().__init__(message)
        self.line = line
        self.column = column


@dataclass(frozen=True, eq=False)
class Meaning:
    """A checked predicate, compiled once and evaluated against many runners' facts.

    ``_program`` is the compiled predicate: it takes the facts the meaning reads and gives
    True, False, or None when it cannot decide; it may raise.
    """

    text: str
    facts_used: frozenset[str]
    _program: Callable[[Mapping[str, Any]], Any] = field(repr=False)
    cost: int = 0

    def evaluate(self, facts: Mapping[str, Any]) -> bool | None:
        """True or False, or None when the facts cannot decide (a missing or ill-typed fact).

        Never raises: one runner's odd inventory must not break a listing of the fleet.
        """
        try:
            value = self._program({name: facts[name] for name in self.facts_used
                                   if name in facts})
        except Exception:  # noqa: BLE001 -- CEL raises many types; all mean "cannot decide"
            return None
        return value if isinstance(value, bool) else None

    __call__ = evaluate


def check_text(text: str) -> None:
    """Refuse an empty or overlong predicate before it is parsed."""
    if not text.strip():
        raise MeaningError('the meaning is empty; write a condition such as os == "linux"', 1, 1)
    if len(text) > MAX_LENGTH:
        raise MeaningError(f"the meaning is longer than {MAX_LENGTH} characters", 1, 1)


def check(tree: Tree, *, functions: frozenset[str],
          cost_limit: int | None) -> tuple[frozenset[str], int]:
    """The facts a parsed predicate reads and its static cost; raise :class:`MeaningError`
    with the position of the first fault.

    ``functions`` are the names the evaluator knows (besides the macros); ``cost_limit``
    None skips the cost bound (a worker re-compiling a meaning the control plane has
    already accepted); nested comprehensions are refused either way.
    """
    checker = _Checker(functions)
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
    return frozenset(checker.facts), cost


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


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# -- static checks ------------------------------------------------------------------------

def _is_tree(node: Any) -> bool:
    return hasattr(node, "children") and not isinstance(node, str)


# the names a comprehension binds, each with its type where known
_Scope = dict[str, "str | None"]


def _kind(t: str | None) -> str | None:
    return None if t is None else t.split("<", 1)[0]


def _element(t: str | None) -> str | None:
    return t[t.index("<") + 1:-1] if t and "<" in t else None


def _a(t: str | None) -> str:
    kind = _kind(t) or t or "value"
    return ("an " if kind == "int" else "a ") + kind  # every other CEL type name takes "a"


def _position(node: Tree | str) -> tuple[int, int]:
    if isinstance(node, str):  # a token
        return getattr(node, "line", None) or 1, getattr(node, "column", None) or 1
    meta = node.meta
    return getattr(meta, "line", 1), getattr(meta, "column", 1)


def _fail(node: Tree | str, head: str, tail: str = "") -> MeaningError:
    """The position goes after the main clause: "<head> at line L, column C<tail>"."""
    line, column = _position(node)
    return MeaningError(f"{head} at line {line}, column {column}{tail}", line, column)


class _Checker:
    """Walks the parse tree once: names must be facts, and types are inferred where known.

    A type is a CEL type name (``int``, ``string``…), ``list<string>``/``map<string>`` when
    the element type is known, or None for "not known until evaluation". Only certain
    mistakes are refused; anything unknown is left to evaluation, which answers None.
    """

    def __init__(self, functions: frozenset[str]) -> None:
        self.functions = functions
        self.facts: set[str] = set()

    def infer(self, node: Tree, scope: _Scope) -> str | None:
        handler = getattr(self, "_" + node.data, None)
        if handler is not None:
            found: str | None = handler(node, scope)
            return found
        kids = [self.infer(c, scope) for c in node.children if _is_tree(c)]
        return kids[0] if len(kids) == 1 else None

    def _expr(self, node: Tree, scope: _Scope) -> str | None:
        if len(node.children) == 1:
            return self.infer(node.children[0], scope)
        cond, yes, no = (self.infer(c, scope) for c in node.children)
        self._need_bool(node.children[0], cond, "the condition of ? :")
        return yes if yes == no else None

    def _conditionalor(self, node: Tree, scope: _Scope) -> str | None:
        return self._logical(node, scope, "||")

    def _conditionaland(self, node: Tree, scope: _Scope) -> str | None:
        return self._logical(node, scope, "&&")

    def _logical(self, node: Tree, scope: _Scope, op: str) -> str | None:
        if len(node.children) == 1:
            return self.infer(node.children[0], scope)
        for child in node.children:
            self._need_bool(child, self.infer(child, scope), f"each side of {op}")
        return "bool"

    def _need_bool(self, node: Tree, t: str | None, what: str) -> None:
        if t is not None and t != "bool":
            raise _fail(node, f"{what} must be true or false, but this is {_a(t)}")

    def _relation(self, node: Tree, scope: _Scope) -> str | None:
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

    def _same(self, node: Tree, left: str | None, right: str | None,
              verb: str, joint: str) -> None:
        a, b = _kind(left), _kind(right)
        if a is None or b is None or a == b:
            return
        tail = ""
        if a in _NUMBERS and b in _NUMBERS:
            tail = "; numbers must be of the same kind (write 16.0 for a double, 16 for an int)"
        raise _fail(node, f"the meaning {verb} {_a(a)} {joint} {_a(b)}", tail)

    def _addition(self, node: Tree, scope: _Scope) -> str | None:
        return self._arithmetic(node, scope, _ADDABLE)

    def _multiplication(self, node: Tree, scope: _Scope) -> str | None:
        return self._arithmetic(node, scope, _NUMBERS)

    def _arithmetic(self, node: Tree, scope: _Scope, allowed: frozenset[str]) -> str | None:
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

    def _unary(self, node: Tree, scope: _Scope) -> str | None:
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

    def _member_dot(self, node: Tree, scope: _Scope) -> str | None:
        receiver = self.infer(node.children[0], scope)
        if _kind(receiver) not in (None, "map"):
            raise _fail(node.children[1], f"{_a(receiver)} has no field {node.children[1]}")
        return _element(receiver)

    def _member_index(self, node: Tree, scope: _Scope) -> str | None:
        receiver = self.infer(node.children[0], scope)
        self.infer(node.children[1], scope)
        return _element(receiver)

    def _member_dot_arg(self, node: Tree, scope: _Scope) -> str | None:
        receiver_node, name = node.children[0], node.children[1]
        args = list(node.children[2].children) if len(node.children) > 2 else []
        receiver = self.infer(receiver_node, scope)
        if name in _MACROS:
            return self._macro(node, str(name), receiver, args, scope)
        if name not in self.functions:
            raise _fail(name, f"the meaning calls an unknown function {name}()")
        for arg in args:
            self.infer(arg, scope)
        return _RETURNS.get(str(name))

    def _macro(self, node: Tree, name: str, receiver: str | None, args: list[Any],
               scope: _Scope) -> str | None:
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

    def _ident_arg(self, node: Tree, scope: _Scope) -> str | None:
        name = node.children[0]
        if name not in self.functions:
            raise _fail(name, f"the meaning calls an unknown function {name}()")
        for arg in (node.children[1].children if len(node.children) > 1 else []):
            self.infer(arg, scope)
        return _RETURNS.get(str(name))

    _dot_ident_arg = _ident_arg

    def _ident(self, node: Tree, scope: _Scope) -> str | None:
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

    def _literal(self, node: Tree, scope: _Scope) -> str | None:
        return _LITERALS.get(node.children[0].type) if node.children else None

    def _list_lit(self, node: Tree, scope: _Scope) -> str | None:
        items = node.children[0].children if node.children else []
        kinds = {self.infer(item, scope) for item in items}
        only = kinds.pop() if len(kinds) == 1 else None
        return f"list<{only}>" if only and "<" not in only else "list"

    def _map_lit(self, node: Tree, scope: _Scope) -> str | None:
        for child in node.children:
            self.infer(child, scope)
        return "map"


def _plain_name(node: Tree) -> str | None:
    """The identifier an expression consists of, or None (macro variables must be names)."""
    while _is_tree(node) and len(node.children) == 1:
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
        self.worst: tuple[int, Tree | str | None] = (0, None)

    def bound(self, tree: Tree, limit: int | None) -> int:
        cost, _ = self.walk(tree, None)
        if limit is not None and cost > limit:
            raise _fail(self.worst[1] or tree,
                        f"the meaning may cost up to {cost} steps, more than the limit of "
                        f"{limit} (GG_MEANING_COST_LIMIT), most of them")
        return cost

    def _note(self, cost: int, node: Tree | str) -> None:
        if cost > self.worst[0]:
            self.worst = (cost, node)

    def walk(self, node: Tree, within: str | None) -> tuple[int, int]:
        """(cost, size) of ``node``; ``within`` names the comprehension whose condition
        this is. Size is the element count of a list or map, the length of a string."""
        handler = getattr(self, "_" + node.data, None)
        if handler is not None:
            measured: tuple[int, int] = handler(node, within)
            return measured
        kids = [self.walk(c, within) for c in node.children if _is_tree(c)]
        if len(kids) == 1:
            return kids[0]
        cost = 1 + sum(c for c, _ in kids)
        return cost, max((s for _, s in kids), default=1)

    def _literal(self, node: Tree, within: str | None) -> tuple[int, int]:
        token = node.children[0] if node.children else None
        if token is not None and token.type in ("STRING_LIT", "MLSTRING_LIT", "BYTES_LIT"):
            return 1, max(1, len(str(token)))
        return 1, 1

    def _ident(self, node: Tree, within: str | None) -> tuple[int, int]:
        name = str(node.children[0])
        kind = _kind(FACT_TYPES.get(name))
        return 1, FACT_SIZE if kind in ("list", "map", "string") else 1

    _dot_ident = _ident

    def _list_lit(self, node: Tree, within: str | None) -> tuple[int, int]:
        items = node.children[0].children if node.children else []
        return 1 + sum(self.walk(i, within)[0] for i in items), max(1, len(items))

    def _map_lit(self, node: Tree, within: str | None) -> tuple[int, int]:
        kids = [self.walk(c, within) for c in node.children if _is_tree(c)]
        entries = node.children[0].children if node.children else []
        return 1 + sum(c for c, _ in kids), max(1, len(entries) // 2)

    def _relation(self, node: Tree, within: str | None) -> tuple[int, int]:
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

    def _addition(self, node: Tree, within: str | None) -> tuple[int, int]:
        if len(node.children) == 1:
            return self.walk(node.children[0], within)
        op_node, right_node = node.children
        left, left_size = self.walk(op_node.children[0], within)
        right, right_size = self.walk(right_node, within)
        size = left_size + right_size  # joined lists or strings: copying costs their size
        return 1 + left + right + size, size

    def _member_dot_arg(self, node: Tree, within: str | None) -> tuple[int, int]:
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

    def _ident_arg(self, node: Tree, within: str | None) -> tuple[int, int]:
        args = list(node.children[1].children) if len(node.children) > 1 else []
        walked = [self.walk(a, within) for a in args]
        size = max((s for _, s in walked), default=1)
        keeps = str(node.children[0]) in ("dyn", "string", "bytes")  # size() gives an int
        return 1 + sum(c for c, _ in walked), size if keeps else 1

    _dot_ident_arg = _ident_arg
