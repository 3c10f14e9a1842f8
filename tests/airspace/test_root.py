"""The root envelope file: the environments flights may use."""

from __future__ import annotations

import pytest

from gg.airspace import AirspaceError, Root, load_root, root_from_mapping


def write(tmp_path, text: str):
    path = tmp_path / "root.yaml"
    path.write_text(text)
    return path


def test_a_good_root_loads_in_the_order_written(tmp_path):
    root = load_root(write(tmp_path, "environments:\n  - ui\n  - api_2\n  - nightly-x\n"))
    assert root == Root(environments=("ui", "api_2", "nightly-x"))
    assert Root.from_dict(root.to_dict()) == root


def test_an_empty_list_is_allowed_and_means_no_environment_may_be_flown(tmp_path):
    assert load_root(write(tmp_path, "environments: []\n")).environments == ()


@pytest.mark.parametrize("text,line,key,fragment", [
    ("environments: [ui, Bad]\n", 1, "environments[1]", "lowercase"),
    ("environments: [ui, ui]\n", 1, "environments[1]", "repeats"),
    ("environments:\n  - ui\n  - 9lives\n", 3, "environments[1]", "starting with a letter"),
    ("environments: ui\n", 1, "environments", "must be a list"),
    ("environments: [ui]\npools: []\n", 2, "pools", "not a known key"),
    ("envs: [ui]\n", 1, "environments", "is required"),
])
def test_bad_roots_are_refused_with_line_and_key(tmp_path, text, line, key, fragment):
    with pytest.raises(AirspaceError) as caught:
        load_root(write(tmp_path, text))
    assert (caught.value.line, caught.value.key) == (line, key)
    assert fragment in caught.value.problem


def test_a_name_longer_than_63_characters_is_refused():
    with pytest.raises(AirspaceError, match="1-63"):
        root_from_mapping({"environments": ["a" * 64]})


def test_timeout_gives_each_listed_environment_a_default_limit(tmp_path):
    root = load_root(write(tmp_path, "environments: [ui, nightly, api]\n"
                                     "timeout:\n  ui: 30m\n  nightly: 12h\n  api: 90\n"))
    assert root.timeouts == {"ui": 1800.0, "nightly": 43200.0, "api": 90.0}
    assert Root.from_dict(root.to_dict()) == root
    assert root_from_mapping(root.to_dict()) == root  # what `gg airspace apply` posts


@pytest.mark.parametrize("text,line,key,fragment", [
    ("environments: [ui]\ntimeout:\n  api: 10m\n", 3, "timeout.api", "is not one of environments"),
    ("environments: [ui]\ntimeout:\n  ui: soon\n", 3, "timeout.ui", "is not a duration"),
    ("environments: [ui]\ntimeout:\n  ui: 0s\n", 3, "timeout.ui", "longer than 0s"),
    ("environments: [ui]\ntimeout: 10m\n", 2, "timeout", "must be a mapping"),
])
def test_bad_timeouts_are_refused_with_line_and_key(tmp_path, text, line, key, fragment):
    with pytest.raises(AirspaceError) as caught:
        load_root(write(tmp_path, text))
    assert (caught.value.line, caught.value.key) == (line, key)
    assert fragment in caught.value.problem


def test_retries_give_each_listed_environment_default_retry_settings(tmp_path):
    from gg.domain.retries import Retry

    root = load_root(write(tmp_path, "environments: [ui, nightly]\nretries:\n  ui: 2\n"
                                     "  nightly:\n    retries: 3\n    on: [failed, timed-out]\n"
                                     "    delay: 30s\n    elsewhere: true\n"))
    assert root.retries == {"ui": Retry(retries=2),
                            "nightly": Retry(retries=3, on=("failed", "timed-out"), delay=30.0,
                                             elsewhere=True)}
    assert Root.from_dict(root.to_dict()) == root
    assert root_from_mapping(root.to_dict()) == root  # what `gg airspace apply` posts


@pytest.mark.parametrize("text,line,key,fragment", [
    ("environments: [ui]\nretries:\n  api: 1\n", 3, "retries.api", "is not one of environments"),
    ("environments: [ui]\nretries:\n  ui: 11\n", 3, "retries.ui", "must be from 0 to 10"),
    ("environments: [ui]\nretries:\n  ui: many\n", 3, "retries.ui", "must be a whole number"),
    ("environments: [ui]\nretries:\n  ui:\n    on: [sometimes]\n", 4, "retries.ui.on[0]",
     "must be one of failed, timed-out"),
    ("environments: [ui]\nretries:\n  ui:\n    delay: 0s\n", 4, "retries.ui.delay",
     "must be longer than 0s"),
    ("environments: [ui]\nretries:\n  ui:\n    delay: 2d\n", 4, "retries.ui.delay",
     "at most one day"),
    ("environments: [ui]\nretries:\n  ui:\n    tries: 2\n", 4, "retries.ui.tries",
     "is not a known key"),
])
def test_bad_retries_are_refused_with_line_and_key(tmp_path, text, line, key, fragment):
    with pytest.raises(AirspaceError) as caught:
        load_root(write(tmp_path, text))
    assert (caught.value.line, caught.value.key) == (line, key)
    assert fragment in caught.value.problem


def test_images_give_each_listed_environment_the_image_its_container_flights_run_from(tmp_path):
    root = load_root(write(tmp_path, "environments: [ui, nightly]\nimages:\n"
                                     "  ui: registry.example.com/ci/node:22\n"))
    assert root.images == {"ui": "registry.example.com/ci/node:22"}
    assert Root.from_dict(root.to_dict()) == root
    assert root_from_mapping(root.to_dict()) == root  # what `gg airspace apply` posts


@pytest.mark.parametrize("text,line,key,fragment", [
    ("environments: [ui]\nimages:\n  api: busybox\n", 3, "images.api",
     "is not one of environments"),
    ("environments: [ui]\nimages:\n  ui: --privileged\n", 3, "images.ui",
     "must be an image reference"),
    ("environments: [ui]\nimages:\n  ui: Busy Box\n", 3, "images.ui",
     "must be an image reference"),
    ("environments: [ui]\nimages:\n  ui: 3\n", 3, "images.ui", "must be text"),
    ("environments: [ui]\nimages:\n  ui:\n", 3, "images.ui", "is required"),
    ("environments: [ui]\nimages: busybox\n", 2, "images", "must be a mapping"),
])
def test_bad_images_are_refused_with_line_and_key(tmp_path, text, line, key, fragment):
    with pytest.raises(AirspaceError) as caught:
        load_root(write(tmp_path, text))
    assert (caught.value.line, caught.value.key) == (line, key)
    assert fragment in caught.value.problem
