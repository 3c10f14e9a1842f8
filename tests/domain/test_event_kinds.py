"""Event kinds are named once, in gg.domain.events.EventKind: the SPEC's list is there with
its stored strings unchanged, and no module records or filters by a literal kind."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import gg
from gg.domain.events import EVENT_KINDS, EventKind, flight_ended
from gg.domain.flights import Outcome

GG = Path(gg.__file__).parent

# SPEC section 13, word for word (``info:flight:opened|claimed|…`` spelled out).
SPEC_EVENTS = (
    "info:runner:registered", "info:runner:enrolled", "info:runner:goodbye",
    "info:runner:retired", "info:runner:forgotten", "info:runner:drain_changed",
    "warn:runner:aged_out", "warn:runner:version_skew", "warn:runner:degraded",
    "info:flight:opened", "info:flight:claimed", "info:flight:expired", "info:flight:landed",
    "info:flight:failed", "info:flight:cancelled",
    "info:gate:opened", "info:gate:cleared", "info:pool:attested", "warn:pool:stale",
)

KIND = re.compile(r"(info|warn|error):[a-z_]+:[a-z_]+")
QUOTED_KIND = re.compile(r"'(info|warn|error):[a-z_]+:[a-z_]+'")  # inside SQL
# The enum itself, and the invariant checker, which knows nothing of gg's code by design.
EXEMPT = {GG / "domain" / "events.py", GG / "proof" / "invariants.py"}


def _modules():
    return [p for p in sorted(GG.rglob("*.py")) if p not in EXEMPT]


@pytest.mark.parametrize("kind", SPEC_EVENTS)
def test_every_event_the_spec_lists_is_a_member_with_its_stored_string(kind):
    assert EventKind(kind).value == kind


def test_kinds_are_unique_and_read_level_subject_what():
    assert len(set(EVENT_KINDS)) == len(EVENT_KINDS) == len(EventKind)
    for kind in EVENT_KINDS:
        assert KIND.fullmatch(kind), kind


def test_a_final_hand_back_records_the_event_of_its_outcome():
    assert flight_ended("landed") is EventKind.FLIGHT_LANDED
    assert flight_ended(Outcome.FAILED) is EventKind.FLIGHT_FAILED
    with pytest.raises(KeyError):
        flight_ended("returned")  # a return is not an end: it records info:flight:returned


def test_no_module_records_an_event_by_a_string():
    found = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("event", "add_event") and node.args
                    and isinstance(node.args[0], (ast.Constant, ast.JoinedStr))):
                found.append(f"{path.relative_to(GG.parent)}:{node.lineno}")
    assert found == []


def test_no_module_spells_an_event_kind_outside_the_enum():
    found = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
                continue
            if KIND.fullmatch(node.value) or QUOTED_KIND.search(node.value):
                found.append(f"{path.relative_to(GG.parent)}:{node.lineno}: {node.value!r}")
    assert found == []
