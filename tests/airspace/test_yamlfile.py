"""The located YAML reader: lines for every key and value, duplicates and oddities refused."""

from __future__ import annotations

import pytest

from gg.airspace.errors import AirspaceError
from gg.airspace.yamlfile import MAX_DEPTH, parse_yaml, read_yaml
from gg.errors import BadRequest


def test_every_key_and_value_keeps_its_line():
    doc = parse_yaml("purpose: x\npolicy:\n  isolation: sandbox\nroles:\n  - runner\n", "f.yaml")
    assert doc.data == {"purpose": "x", "policy": {"isolation": "sandbox"}, "roles": ["runner"]}
    assert doc.key_lines["policy.isolation"] == 3
    assert doc.value_lines["roles[0]"] == 5


def test_a_duplicate_key_is_refused_with_both_lines():
    with pytest.raises(AirspaceError) as caught:
        parse_yaml("policy:\n  workers: 1\n  workers: 2\n", "f.yaml")
    assert str(caught.value) == "f.yaml:3: policy.workers: appears twice in one mapping (first on line 2)"


def test_malformed_yaml_names_the_line_yaml_reports():
    with pytest.raises(AirspaceError) as caught:
        parse_yaml("purpose: x\nroles: [runner\nenvironment: ui\n", "f.yaml")
    error = caught.value
    assert error.file == "f.yaml" and error.line == 3 and error.key is None
    assert str(error).startswith("f.yaml:3: malformed YAML: ")


def test_anchors_aliases_and_merge_keys_work_and_explicit_keys_win():
    doc = parse_yaml("base: &b {isolation: sandbox, workers: 2}\n"
                     "policy:\n  <<: *b\n  workers: 4\n", "f.yaml")
    assert doc.data["policy"] == {"isolation": "sandbox", "workers": 4}


def test_keys_are_taken_as_written_not_as_booleans():
    assert parse_yaml("yes: 1\n", "f.yaml").data == {"yes": 1}


def test_a_self_referencing_alias_is_refused():
    with pytest.raises(AirspaceError, match="refers to the value that contains it"):
        parse_yaml("a: &x [1, *x]\n", "f.yaml")


def test_an_alias_bomb_is_refused():
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 8)]
    with pytest.raises(AirspaceError, match="too many values"):
        parse_yaml("\n".join(lines) + "\n", "f.yaml")


def test_custom_tags_and_several_documents_are_refused():
    with pytest.raises(AirspaceError, match="f.yaml:1: malformed YAML"):
        parse_yaml("a: !!python/object:os.system x\n", "f.yaml")
    with pytest.raises(AirspaceError, match="more than one YAML document"):
        parse_yaml("a: 1\n---\nb: 2\n", "f.yaml")


def test_a_missing_or_undecodable_file_is_an_airspace_error(tmp_path):
    with pytest.raises(AirspaceError, match="cannot be read"):
        read_yaml(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"purpose: x\nroles: \xff\n")
    with pytest.raises(AirspaceError) as caught:
        read_yaml(bad)
    assert caught.value.line == 2 and "not UTF-8" in str(caught.value)


def test_an_airspace_error_is_a_bad_request_for_the_server():
    error = AirspaceError("must be text (got 3)", file="f.yaml", line=2, key="purpose")
    assert isinstance(error, BadRequest) and error.status == 400
    assert error.code == "invalid_airspace"
    assert error.message == str(error) == "f.yaml:2: purpose: must be text (got 3)"
    assert error.to_dict() == {"file": "f.yaml", "line": 2, "key": "purpose",
                               "message": "must be text (got 3)"}


def _too_deep(text: str) -> AirspaceError:
    with pytest.raises(AirspaceError) as caught:
        parse_yaml(text, "f.yaml")
    assert caught.value.problem == f"nests deeper than {MAX_DEPTH} levels; airspace files are shallow"
    return caught.value


@pytest.mark.parametrize("text,line", [
    ("[" * 10_000, 1),
    ("{a: " * 10_000, 1),
    ("- " * 10_000 + "x\n", 1),
    ("".join("  " * i + "a:\n" for i in range(200)), MAX_DEPTH),
])
def test_nesting_deeper_than_the_limit_is_a_located_error_not_a_recursion_error(text, line):
    assert _too_deep(text).line == line


def test_nesting_up_to_the_limit_is_read():
    assert parse_yaml("[" * (MAX_DEPTH - 1) + "x" + "]" * (MAX_DEPTH - 1), "f.yaml").data
    _too_deep("[" * MAX_DEPTH + "x" + "]" * MAX_DEPTH)


def test_aliases_and_merges_cannot_nest_past_the_limit_either():
    shallow = "[" * 20 + "]" * 20
    chain = [f"a0: &a0 {shallow}"] + [f"a{i}: &a{i} {'[' * 10}*a{i - 1}{']' * 10}"
                                      for i in range(1, 40)]
    error = _too_deep("\n".join(chain) + "\n")
    assert error.key == "a2" + "[0]" * (MAX_DEPTH - 1)  # each line alone is shallow
    merges = ["m0: &m0 {x: 1}"] + [f"m{i}: &m{i} {{<<: *m{i - 1}}}" for i in range(1, 5000)]
    assert _too_deep("\n".join(merges) + "\n").key == f"m{MAX_DEPTH - 1}"
