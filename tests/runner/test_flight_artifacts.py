"""Reading ``$GG_ARTIFACTS`` on the runner (gg.runner.flight_artifacts.collect): every regular
file under its path there, directories kept; a link, or anything but a file or a directory,
refused with one sentence and never followed."""

from __future__ import annotations

import hashlib
import os

import pytest

from gg.runner.flight_artifacts import Refused, collect


def test_every_file_is_named_by_its_path_under_the_directory_with_its_digest_and_size(tmp_path):
    root = tmp_path / "artifacts"
    (root / "dist" / "deep").mkdir(parents=True)
    (root / "dist" / "deep" / "app.bin").write_bytes(b"\x00" * 3000)
    (root / "report.txt").write_text("ok\n")
    (root / "empty").mkdir()
    assert collect(root) == [
        {"name": "dist/deep/app.bin", "sha256": hashlib.sha256(b"\x00" * 3000).hexdigest(),
         "size": 3000},
        {"name": "report.txt", "sha256": hashlib.sha256(b"ok\n").hexdigest(), "size": 3}]
    assert collect(tmp_path / "never-made") == []


@pytest.mark.parametrize("target, outside", [("/etc/passwd", True), ("/", True),
                                             ("../../secret", True), ("report.txt", False)])
def test_a_link_is_refused_and_never_followed(tmp_path, target, outside):
    root = tmp_path / "artifacts"
    (root / "sub").mkdir(parents=True)
    (root / "report.txt").write_text("ok\n")
    (tmp_path / "secret").write_text("the host's\n")
    os.symlink(target, root / "sub" / "link")
    with pytest.raises(Refused) as refused:
        collect(root)
    assert str(refused.value) == (f"artifact sub/link is a symbolic link to {target}"
                                  + (", outside $GG_ARTIFACTS" if outside else "")
                                  + ": links are never followed; nothing was uploaded")


def test_the_directory_itself_swapped_for_a_link_is_refused(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "host.txt").write_text("not the flight's\n")
    os.symlink(tmp_path / "elsewhere", tmp_path / "artifacts")
    with pytest.raises(Refused, match=r"^\$GG_ARTIFACTS is not a directory \(a symbolic link "
                                      r"is never followed\): nothing was uploaded$"):
        collect(tmp_path / "artifacts")


def test_a_fifo_is_refused_without_blocking(tmp_path):
    root = tmp_path / "artifacts"
    root.mkdir()
    os.mkfifo(root / "pipe")
    with pytest.raises(Refused, match="^artifact pipe is not a regular file: nothing was "
                                      "uploaded$"):
        collect(root)
