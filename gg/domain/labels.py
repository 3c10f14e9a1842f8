"""Labels and their dispositions (SPEC section 8).

A label is ``key=value`` that a runner advertises. Whether gg believes it is its
*disposition*, decided from the runner's reported facts each time it is asked::

    no meaning registered for key=value  ------------------------>  stated
    meaning registered, evaluates True on the runner's facts  ---->  measured
    meaning registered, evaluates False  ------------------------->  refuted   (never matched)
    meaning registered, cannot decide (None, or the meaning fails) ->  stated
    meaning registered, ran over the evaluation deadline  -------->  refuted   ("took too long")
    meaning registered, not evaluated yet for these facts  ------->  stated    (for a moment)

Unknown is not refutation: a runner whose inventory lacks a fact the meaning reads (an old
gg version, a first check-in without inventory) keeps its claim as *stated* rather than
losing work it may well be able to do. Only facts that positively contradict the meaning
take a label out of matching.

A meaning that runs over its deadline is refuted, not left stated: a claim nobody can check
in time is not usable, and stating it would let a slow meaning pass for a true one. A
verdict that is still being computed (the control plane evaluates off its event loop, then
recomputes) is unknown, so stated, until it arrives.

Pure and stdlib only: the meanings arrive as plain callables (``gg.domain.meanings.Meaning`` is one),
so this module never imports CEL and is tested without it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

KEY_PATTERN = re.compile(r"[a-z][a-z0-9_.-]*")
MAX_KEY_LENGTH = 63
MAX_VALUE_LENGTH = 255

# Readings a runner reports every check-in (load, free memory…) change by the second and are
# shown in ``gg runners``; SPEC section 8 says they are never usable to require anything, so
# their names cannot be labels either, or a stated ``cpu=idle`` would pass for one.
RESERVED_KEYS = frozenset({
    "cpu", "cpu_percent", "cpu_load", "load", "load_average", "loadavg",
    "memory", "memory_free", "memory_available", "memory_used", "memory_percent",
    "disk_free", "swap", "readings", "free_slots",
})


class Disposition(StrEnum):
    STATED = "stated"
    MEASURED = "measured"
    REFUTED = "refuted"


@dataclass(frozen=True)
class LabelDisposition:
    key: str
    value: str
    disposition: Disposition
    reason: str

    @property
    def pair(self) -> str:
        return f"{self.key}={self.value}"

    @property
    def usable(self) -> bool:
        return self.disposition is not Disposition.REFUTED


def check_label(key: str, value: str) -> None:
    """Raise ValueError (one plain sentence) unless ``key=value`` is a valid label."""
    if not isinstance(key, str) or not KEY_PATTERN.fullmatch(key):
        raise ValueError(f"the label key {key!r} is not valid; a key starts with a lower-case "
                         f"letter and has only lower-case letters, digits, '_', '.' and '-'")
    if len(key) > MAX_KEY_LENGTH:
        raise ValueError(f"the label key {key!r} is longer than {MAX_KEY_LENGTH} characters")
    if key in RESERVED_KEYS:
        raise ValueError(f"the label key {key!r} is reserved for a reading, which can never "
                         f"be a label")
    if not isinstance(value, str) or not value:
        raise ValueError(f"the label {key!r} has an empty value")
    if len(value) > MAX_VALUE_LENGTH:
        raise ValueError(f"the value of label {key!r} is longer than {MAX_VALUE_LENGTH} "
                         f"characters")
    if any(c in ",=" or c.isspace() or not c.isprintable() for c in value):
        raise ValueError(f"the value of label {key!r} contains a comma, '=', a space or a "
                         f"control character")


def check_labels(labels: Mapping[str, str]) -> dict[str, str]:
    """Validate a label mapping from any source (API body, YAML) and return a copy."""
    for key, value in labels.items():
        check_label(key, value)
    return dict(labels)


def parse_labels(text: str) -> dict[str, str]:
    """``"k=v,k2=v2"`` to a dict; an empty or blank string means no labels.

    Spaces around items are forgiven (``"a=b, c=d"``); an empty item, a missing ``=`` and a
    repeated key are refused, because each is far more likely a typo than an intent.
    """
    labels: dict[str, str] = {}
    if not text.strip():
        return labels
    for item in text.split(","):
        item = item.strip()
        if not item:
            raise ValueError(f"the labels {text!r} have an empty item between commas")
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"the label {item!r} has no '='; write it as key=value")
        key, value = key.strip(), value.strip()
        if key in labels:
            raise ValueError(f"the label key {key!r} is given more than once")
        check_label(key, value)
        labels[key] = value
    return labels


def format_labels(labels: Mapping[str, str]) -> str:
    """The inverse of :func:`parse_labels`, sorted so that output is stable."""
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


class Verdict(StrEnum):
    """What a meaning may answer besides True, False and None (cannot decide)."""

    TOO_LONG = "too_long"  # the evaluation ran over the deadline
    PENDING = "pending"  # not evaluated yet for these facts; not usable until it is


TOOK_TOO_LONG = "the meaning took too long"

MeaningFn = Callable[[dict[str, Any]], "bool | None | Verdict"]


def dispositions(labels: Mapping[str, str], meanings: Mapping[str, MeaningFn],
                 facts: dict[str, Any]) -> list[LabelDisposition]:
    """Each of ``labels`` with its disposition, sorted by key.

    ``meanings`` is keyed by ``"key=value"`` (``"environment=ui"``): a meaning belongs to one
    value of a key, because ``environment=ui`` and ``environment=gpu`` mean different things.
    A meaning that raises is treated like one that cannot decide, so a single broken meaning
    can never take work away from the fleet.
    """
    found = []
    for key, value in sorted(labels.items()):
        pair = f"{key}={value}"
        meaning = meanings.get(pair)
        if meaning is None:
            found.append(LabelDisposition(key, value, Disposition.STATED,
                                          f"no meaning is registered for {pair}"))
            continue
        try:
            verdict = meaning(facts)
        except Exception:  # noqa: BLE001 -- see docstring: undecided, not refuted
            verdict = None
        if verdict is True:
            found.append(LabelDisposition(key, value, Disposition.MEASURED,
                                          f"the runner's facts satisfy the meaning of {pair}"))
        elif verdict is Verdict.TOO_LONG:
            found.append(LabelDisposition(key, value, Disposition.REFUTED, TOOK_TOO_LONG))
        elif verdict is Verdict.PENDING:  # never usable before it is checked
            found.append(LabelDisposition(key, value, Disposition.REFUTED,
                                          f"the meaning of {pair} is being evaluated; the label "
                                          f"is not used until it is"))
        elif verdict is False:
            found.append(LabelDisposition(key, value, Disposition.REFUTED,
                                          f"the runner's facts contradict the meaning of {pair}"))
        else:
            found.append(LabelDisposition(key, value, Disposition.STATED,
                                          f"the runner's facts cannot decide the meaning of "
                                          f"{pair}, so the claim stands unchecked"))
    return found


def usable_labels(found: Iterable[LabelDisposition]) -> dict[str, str]:
    """The labels matching may use: every label except the refuted ones."""
    return {d.key: d.value for d in found if d.usable}


def refuted_pairs(found: Iterable[LabelDisposition]) -> frozenset[str]:
    """``"key=value"`` of every refuted label (the shape ``matching.seat`` takes)."""
    return frozenset(d.pair for d in found if not d.usable)


def requirements_met(required: Mapping[str, str], usable: Mapping[str, str]) -> list[str]:
    """The ``key=value`` pairs of ``required`` that ``usable`` lacks, sorted; empty means met.

    Despite the name it returns what is *missing*, because that list is what the waiting
    sentence and ``gg plan`` print.
    """
    return [f"{k}={v}" for k, v in sorted(required.items()) if usable.get(k) != v]
