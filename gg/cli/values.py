"""Plain checks for plain option values, so that a command starts without pydantic.

Typer (0.29 and later) checks every option's value with a pydantic ``TypeAdapter`` that it
builds on first use: importing pydantic and building a schema per option costs a command
such as ``gg fly`` (twenty options, every one a string, a whole number or a flag) about
60 ms of CPU before it has done anything. Click has already split those values; what is
left to check is that a whole number is one. :func:`plain_values` gives each such option a
plain check, and leaves Typer's own to everything else (ranges, choices, paths, files,
dates, enums, custom parsers) and to every value the plain check does not accept, so a bad
value is refused with Typer's own sentence.
"""

from __future__ import annotations

import re
import types
import typing
from dataclasses import dataclass
from typing import Any

try:  # Typer's runtime coercion; an older or newer Typer without it keeps its own checks
    from typer._coercion import RuntimeParam, build_runtime_param
except ImportError:  # pragma: no cover - depends on the installed Typer
    RuntimeParam = None  # type: ignore[assignment,misc]

_WHOLE = re.compile(r"[+-]?\d+")
_PLAIN = (str, int, float, bool)


def plain_values(command) -> None:
    """Give every option of ``command`` (and of its subcommands) whose type is a string,
    a whole number, a float or a flag, alone or in a list, a plain check (see the module's
    doc)."""
    if RuntimeParam is None:
        return
    for param in [*getattr(command, "params", ()), getattr(command, "_help_option", None)]:
        _plain(param)
    for sub in getattr(command, "commands", {}).values():
        plain_values(sub)


def _plain(param) -> None:
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is None or getattr(param, "_runtime_param", False) is not None:
        return
    info = descriptor.parameter_info
    if (descriptor.is_path or descriptor.is_file or descriptor.is_choice or descriptor.is_ranged
            or getattr(info, "parser", None) is not None):
        return
    annotation = _without_none(descriptor.annotation)
    many = typing.get_origin(annotation) is list
    if many:
        (annotation,) = typing.get_args(annotation) or (None,)
        annotation = _without_none(annotation)
    if annotation not in _PLAIN:
        return
    param._runtime_param = _PlainValue(parameter_info=info, annotation=descriptor.annotation,
                                       kind=annotation, many=many)


def _without_none(annotation: Any) -> Any:
    """``X`` for ``Optional[X]`` (a missing value never reaches the check)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        rest = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(rest) == 1:
            return rest[0]
    return annotation


def _one(kind: type, value: Any) -> tuple[bool, Any]:
    """(True, the value as ``kind``) when the plain check accepts it, else (False, None)."""
    if isinstance(value, bool) or kind is bool:
        return (True, value) if isinstance(value, bool) and kind is bool else (False, None)
    if kind is str:
        return (True, value) if isinstance(value, str) else (False, None)
    if isinstance(value, kind):
        return True, value
    if kind is int and isinstance(value, str) and _WHOLE.fullmatch(value.strip()):
        return True, int(value)
    if kind is float and isinstance(value, int):
        return True, float(value)
    if kind is float and isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return False, None
        return (True, number) if number == number and abs(number) != float("inf") else (False, None)
    return False, None


if RuntimeParam is not None:

    @dataclass(frozen=True)
    class _PlainValue(RuntimeParam):
        kind: type = str
        many: bool = False

        def _coerce_value(self, value: Any, param, ctx) -> Any:
            if self.many and isinstance(value, (list, tuple)):
                checked = [_one(self.kind, item) for item in value]
                if all(ok for ok, _ in checked):
                    return [item for _, item in checked]
            elif not self.many:
                ok, checked_value = _one(self.kind, value)
                if ok:
                    return checked_value
            # not a plain value: Typer's own check decides, and words its refusal
            own = build_runtime_param(param.type_descriptor)
            return own._coerce_value(value, param=param, ctx=ctx)
