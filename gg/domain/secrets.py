"""Secrets a flight may ask for (``gg fly --secret NAME[=ENVVAR]``), and masking them in output.

A secret is a name and a scope: one environment, or every environment (``ALL``, stored as
the empty string). A flight of environment E uses the secret of that name scoped to E when
there is one, else the one for every environment; a flight of no environment uses only the
latter (:func:`pick`). Who may set one and who may use one is
gg.control.secrets's to check with these rules.

Masking (:class:`Masker`) runs on the runner over every output chunk before it leaves the
machine: each occurrence of a value, or of its base64 form, reads ``***``. A value split
across two chunks is still caught: what could be the start of a value is held back until
the next chunk (or the end) says whether it was one. Pure: no I/O.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field
from typing import Any

ALL = ""  # the scope of a secret set without --env: every environment
MASK = "***"
MAX_VALUE = 64 * 1024  # bytes
MAX_PER_FLIGHT = 100
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}\Z")
RESERVED_PREFIX = "GG_"  # the runner's own variables (GG_FLIGHT, GG_WORKSPACE, ...)


def name_problem(name: str, what: str = "a secret's name") -> str | None:
    """Why ``name`` cannot name a secret (or the variable it is put in), or None."""
    if not _NAME.match(name or ""):
        return (f"{name!r} is not {what}: letters, digits and _, not starting with a digit, "
                "at most 128 characters")
    if name.upper().startswith(RESERVED_PREFIX):
        return f"{what} may not start with {RESERVED_PREFIX} (gg's own variables do): {name}"
    return None


def value_problem(value: bytes) -> str | None:
    if not value:
        return "a secret's value is empty: give it on standard input or with --from-file F"
    if len(value) > MAX_VALUE:
        return f"a secret's value is at most {MAX_VALUE // 1024} KiB"
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return "a secret's value is text (UTF-8): base64 a binary value first"
    return None


@dataclass(frozen=True)
class Use:
    """One ``--secret NAME[=ENVVAR]``: the secret, and the variable it is put in."""

    name: str
    envvar: str

    @classmethod
    def parse(cls, text: str) -> Use:
        """``NAME`` or ``NAME=ENVVAR``; ValueError with one sentence for anything else."""
        name, _, envvar = text.partition("=")
        envvar = envvar if "=" in text else name
        for part, what in ((name, "a secret's name"), (envvar, "a variable's name")):
            if problem := name_problem(part, what):
                raise ValueError(f"--secret {text}: {problem}")
        return cls(name, envvar)

    @classmethod
    def of(cls, value: Any) -> Use:
        """A use, from itself or its wire form (``{"name", "envvar"}``)."""
        if isinstance(value, Use):
            return value
        return cls(value["name"], value.get("envvar") or value["name"])

    def to_wire(self) -> dict[str, str]:
        return {"name": self.name, "envvar": self.envvar}


def uses_problem(uses: list[Use]) -> str | None:
    """Why these uses cannot go together, or None."""
    if len(uses) > MAX_PER_FLIGHT:
        return f"a flight may use at most {MAX_PER_FLIGHT} secrets"
    seen: dict[str, str] = {}
    for use in uses:
        if use.envvar in seen:
            return (f"--secret: {seen[use.envvar]} and {use.name} both go in ${use.envvar}; "
                    "give one of them another variable (--secret NAME=ENVVAR)")
        seen[use.envvar] = use.name
    return None


def pick(scopes: set[str], environment: str | None) -> str | None:
    """Which scope of a secret a flight of ``environment`` uses, among the ``scopes`` it is
    set in: its environment's, else every environment's; None: the flight may not use it."""
    if environment and environment in scopes:
        return environment
    return ALL if ALL in scopes else None


def refusal(name: str, scopes: set[str], environment: str | None) -> str | None:
    """One sentence for a flight of ``environment`` that may not use secret ``name``."""
    if pick(scopes, environment) is not None:
        return None
    if not scopes:
        return f"there is no secret {name}: an admin sets it with gg secret set {name}"
    where = ", ".join(sorted(scopes))
    here = f"environment {environment}" if environment else "no environment"
    return (f"secret {name} is only for flights of environment {where}; this flight is of "
            f"{here}")


def scope_sentence(environment: str | None) -> str:
    """What ``gg secret set`` says of who may use it."""
    if environment:
        return (f"only flights of environment {environment} receive it, on runners allowed "
                f"to run {environment}")
    return "every environment's flights may receive it: anyone who may open flights can use it"


# -- masking --------------------------------------------------------------------------------


def forms(value: str) -> list[str]:
    """What masking hides of ``value``: itself and its base64 form (with and without its
    padding), longest first."""
    b64 = base64.b64encode(value.encode("utf-8")).decode("ascii")
    out = {value, b64, b64.rstrip("=")}
    return sorted((f for f in out if f), key=len, reverse=True)


def _held(text: str, hidden: list[str]) -> int:
    """How many characters at the end of ``text`` could start one of ``hidden``."""
    longest = 0
    for form in hidden:
        i = text.find(form[0], max(0, len(text) - len(form) + 1))
        while i != -1 and len(text) - i > longest:
            if form.startswith(text[i:]):  # the earliest such start is the longest tail
                longest = len(text) - i
                break
            i = text.find(form[0], i + 1)
    return longest


def mask(pending: str, chunk: str, hidden: list[str], final: bool = False) -> tuple[str, str]:
    """``pending + chunk`` with every form in ``hidden`` replaced by ``***``: what may leave
    now, and what is held back (a tail that could be the start of one; nothing when
    ``final``)."""
    text = pending + chunk
    for form in hidden:
        text = text.replace(form, MASK)
    keep = 0 if final else _held(text, hidden)
    return (text[:len(text) - keep], text[len(text) - keep:]) if keep else (text, "")


@dataclass
class Masker:
    """The masking of one flight's output stream (not thread-safe: its caller's lock)."""

    hidden: list[str] = field(default_factory=list)
    pending: str = ""

    @classmethod
    def of(cls, values: list[str]) -> Masker:
        hidden = sorted({f for v in values if v for f in forms(v)}, key=len, reverse=True)
        return cls(hidden)

    def feed(self, chunk: str) -> str:
        if not self.hidden:
            return chunk
        out, self.pending = mask(self.pending, chunk, self.hidden)
        return out

    def rest(self) -> str:
        """What was held back, at the end of the output."""
        out, self.pending = mask(self.pending, "", self.hidden, final=True)
        return out
