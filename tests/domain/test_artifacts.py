"""The pure rules of artifacts (gg.domain.artifacts): names, caps and input directories."""

from __future__ import annotations

import pytest

from gg.domain.artifacts import input_dir, name_problem, over_limit, over_quota


@pytest.mark.parametrize("name", ["a.txt", "dist/app.bin", "a/b/c/d.tar.gz", ".hidden/x"])
def test_a_relative_path_of_plain_parts_names_an_artifact(name):
    assert name_problem(name) is None


@pytest.mark.parametrize("name, sentence", [
    ("", "an artifact's name is its path under $GG_ARTIFACTS; it cannot be empty"),
    ("/etc/passwd", "artifact '/etc/passwd': a name is a path relative to $GG_ARTIFACTS"),
    ("a/../../x", "artifact 'a/../../x': a name's parts may not be empty, '.' or '..'"),
    ("a//b", "artifact 'a//b': a name's parts may not be empty, '.' or '..'"),
    ("a\nb", "artifact 'a\\nb': a name may not hold control characters"),
])
def test_a_name_that_could_leave_the_directory_is_refused_in_one_sentence(name, sentence):
    assert name_problem(name) == sentence


def test_the_caps_count_what_is_stored_and_what_is_added():
    assert over_limit("f_1", 600, 400, 1000) is None
    assert over_limit("f_1", 600, 401, 1000) == (
        "the artifacts of f_1 would take 1001 bytes, over its limit of 1000 bytes "
        "(gg fly --artifact-limit SIZE)")
    assert over_quota(10 ** 12, 10 ** 12, 0) is None  # 0: no quota
    assert over_quota(1024 ** 3, 1, 1024 ** 3) == (
        "the server's artifacts would take 1.0GB, over its quota of 1GB "
        "(gg server --artifact-quota)")


def test_a_dependencys_inputs_go_under_its_name_in_the_file_else_its_id():
    assert input_dir("f_1", {"f_1": "build"}) == "build"
    assert input_dir("f_2", {"f_1": "build"}) == "f_2"
    assert input_dir("f_1", {"f_1": ".."}) == "f_1"
