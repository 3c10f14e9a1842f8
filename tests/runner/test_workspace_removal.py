"""A flight's workspace, removed when the flight is over: the usual one (nothing but the
empty ``.gg/artifacts`` and ``.gg/inputs``) by a few ``rmdir`` calls, without a tree walk;
anything else walked and removed; a link the flight left in place of ``.gg`` never followed."""

from __future__ import annotations

import os

from gg.runner import flight as flight_module
from gg.runner import flight_artifacts


def _workspace(tmp_path):
    workspace = tmp_path / "f_1-1"
    for name in (flight_artifacts.ARTIFACTS, flight_artifacts.INPUTS):
        (workspace / flight_artifacts.HOME / name).mkdir(parents=True)
    return workspace


def _walks(monkeypatch) -> list:
    walked: list = []
    real = flight_module.shutil.rmtree

    def rmtree(path, *args, **kwargs):
        walked.append(path)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(flight_module.shutil, "rmtree", rmtree)
    return walked


def test_a_workspace_left_as_it_was_made_is_removed_without_a_tree_walk(tmp_path, monkeypatch):
    walked = _walks(monkeypatch)
    workspace = _workspace(tmp_path)
    flight_module._remove(workspace)
    assert not workspace.exists()
    assert walked == []


def test_a_workspace_refused_before_its_directories_were_made_is_removed_too(tmp_path, monkeypatch):
    walked = _walks(monkeypatch)
    workspace = tmp_path / "f_1-1"
    workspace.mkdir()
    flight_module._remove(workspace)
    assert not workspace.exists() and walked == []


def test_a_workspace_with_files_in_it_is_walked_and_removed_whole(tmp_path, monkeypatch):
    walked = _walks(monkeypatch)
    workspace = _workspace(tmp_path)
    (workspace / flight_artifacts.HOME / flight_artifacts.ARTIFACTS / "report.txt").write_text("x")
    (workspace / "build").mkdir()
    flight_module._remove(workspace)
    assert not workspace.exists()
    assert walked == [workspace]


def test_a_link_left_in_place_of_gg_is_removed_and_never_followed(tmp_path, monkeypatch):
    walked = _walks(monkeypatch)
    outside = tmp_path / "outside"
    for name in (flight_artifacts.ARTIFACTS, flight_artifacts.INPUTS):
        (outside / name).mkdir(parents=True)
    workspace = tmp_path / "f_1-1"
    workspace.mkdir()
    os.symlink(outside, workspace / flight_artifacts.HOME)
    flight_module._remove(workspace)
    assert not workspace.exists()
    assert (outside / flight_artifacts.ARTIFACTS).is_dir()
    assert (outside / flight_artifacts.INPUTS).is_dir()
    assert walked == [workspace]
