"""The root envelope's ``approvals:``: environments whose every flight waits for an approval."""

from __future__ import annotations

import pytest

from gg.airspace import AirspaceError, Root, load_root, root_from_mapping


def test_approvals_load_in_the_order_written_and_round_trip(tmp_path):
    path = tmp_path / "root.yaml"
    path.write_text("environments: [ui, prod]\napprovals: [prod]\n")
    root = load_root(path)
    assert root == Root(environments=("ui", "prod"), approvals=("prod",))
    assert Root.from_dict(root.to_dict()) == root
    assert root_from_mapping({"environments": ["ui"], "approvals": None}).approvals == ()


@pytest.mark.parametrize("text,key,fragment", [
    ("environments: [ui]\napprovals: [prod]\n", "approvals[0]", "is not one of environments (ui)"),
    ("environments: [ui]\napprovals: [ui, ui]\n", "approvals[1]", "repeats"),
    ("environments: [ui]\napprovals: ui\n", "approvals", "must be a list"),
])
def test_an_approval_for_an_environment_not_listed_is_refused_with_line_and_key(
        tmp_path, text, key, fragment):
    path = tmp_path / "root.yaml"
    path.write_text(text)
    with pytest.raises(AirspaceError) as caught:
        load_root(path)
    assert (caught.value.line, caught.value.key) == (2, key)
    assert fragment in caught.value.problem
