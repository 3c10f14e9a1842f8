"""The registry of gg trees (gg.trees): what gg processes record, and whose record a runner
believes."""

from __future__ import annotations

import os

import pytest

from gg import config, trees

NOBODY = 65534


@pytest.fixture
def registry(tmp_path, monkeypatch):
    path = tmp_path / "registry" / "trees"
    monkeypatch.setenv(trees.ENV_TREES, str(path))
    return path


def test_a_recorded_tree_is_kept_absolute_and_real_once_and_dropped_when_gone(
        registry, tmp_path, monkeypatch):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(tmp_path)
    assert trees.record("link", gone) and trees.record(real)
    assert trees.recorded() == [real, gone]
    gone.rmdir()
    assert trees.record(real)
    assert trees.recorded() == [real]
    assert oct(registry.stat().st_mode & 0o777) == "0o600"


def test_a_registry_others_may_write_is_not_believed(registry, tmp_path):
    trees.record(tmp_path)
    os.chmod(registry, 0o622)
    assert trees.recorded() == []
    os.chmod(registry, 0o600)
    assert trees.recorded() == [tmp_path]


def test_a_registry_of_another_user_is_not_believed(registry, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root to hand the registry to another user")
    trees.record(tmp_path)
    os.chown(registry, NOBODY, NOBODY)
    assert trees.recorded() == []


def test_a_registry_that_cannot_be_written_records_nothing_and_says_so(tmp_path, monkeypatch):
    blocked = tmp_path / "file"
    blocked.write_text("")
    monkeypatch.setenv(trees.ENV_TREES, str(blocked / "trees"))  # under a file: never a dir
    assert trees.record(tmp_path) is False


def test_a_relative_state_config_or_data_dir_is_made_absolute_where_it_was_given(
        tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(config.ENV_STATE_DIR, "state")
    monkeypatch.setenv(config.ENV_CONFIG_DIR, "conf")
    monkeypatch.setenv(config.ENV_DATA_DIR, "./data")
    assert config.state_dir() == tmp_path / "state"
    assert config.config_dir() == tmp_path / "conf"
    assert config.data_dir() == tmp_path / "data"
