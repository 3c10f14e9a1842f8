"""A runner's first probe may take the engine's and runsc's answers another runner on this
machine measured (GG_PROBE_CACHE), only while nothing they depend on changed; every other
probe measures. The engine here is a stand-in on a PATH of the test's own that counts how
often it is asked."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from gg.runner.capabilities import probe
from gg.runner.probe_cache import ENV_PROBE_CACHE

ANSWERS = '[ "$1" = info ] || exit 3; echo asked >> "{asked}"; exit {status}'


def _engine(tmp_path: Path, status: int = 0) -> tuple[Path, Path]:
    """(a PATH directory with python3 and a podman that counts its ``info`` calls, the file
    it counts in)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    if not (bin_dir / "python3").exists():
        (bin_dir / "python3").symlink_to(sys.executable)
    asked = tmp_path / "asked"
    podman = bin_dir / "podman"
    podman.write_text("#!/bin/sh\n" + ANSWERS.format(asked=asked, status=status) + "\n")
    podman.chmod(podman.stat().st_mode | stat.S_IXUSR)
    return bin_dir, asked


def _times(asked: Path) -> int:
    return len(asked.read_text().splitlines()) if asked.exists() else 0


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "probes"
    monkeypatch.setenv(ENV_PROBE_CACHE, str(folder))
    return folder


def test_a_runners_first_probe_takes_the_engines_answer_another_runner_measured(tmp_path, cache):
    bin_dir, asked = _engine(tmp_path)
    first = probe(path=str(bin_dir), reuse=True)
    second = probe(path=str(bin_dir), reuse=True)
    assert _times(asked) == 1
    assert first == second
    assert second["container_engine"] == "podman" and "container" in second["isolation_levels"]


def test_a_later_probe_asks_the_engine_again(tmp_path, cache):
    bin_dir, asked = _engine(tmp_path)
    probe(path=str(bin_dir), reuse=True)
    probe(path=str(bin_dir))
    assert _times(asked) == 2


def test_an_engine_that_did_not_answer_is_asked_again_at_the_next_start(tmp_path, cache):
    bin_dir, asked = _engine(tmp_path, status=1)
    probe(path=str(bin_dir), reuse=True)
    report = probe(path=str(bin_dir), reuse=True)
    assert _times(asked) == 2
    assert report["container_engine"] is None


def test_a_changed_engine_binary_is_asked_again(tmp_path, cache):
    bin_dir, asked = _engine(tmp_path)
    probe(path=str(bin_dir), reuse=True)
    (bin_dir / "podman").write_text((bin_dir / "podman").read_text() + "# upgraded\n")
    probe(path=str(bin_dir), reuse=True)
    assert _times(asked) == 2


def test_another_engine_configuration_is_asked_again(tmp_path, cache, monkeypatch):
    bin_dir, asked = _engine(tmp_path)
    probe(path=str(bin_dir), reuse=True)
    monkeypatch.setenv("CONTAINERS_CONF", str(tmp_path / "containers.conf"))
    probe(path=str(bin_dir), reuse=True)
    assert _times(asked) == 2


def test_without_a_cache_folder_every_probe_asks_the_engine(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV_PROBE_CACHE, raising=False)
    bin_dir, asked = _engine(tmp_path)
    probe(path=str(bin_dir), reuse=True)
    probe(path=str(bin_dir), reuse=True)
    assert _times(asked) == 2


def test_a_cache_folder_others_may_write_is_not_used(tmp_path, cache):
    bin_dir, asked = _engine(tmp_path)
    cache.mkdir(mode=0o700)
    os.chmod(cache, 0o777)  # anyone could plant a report there
    probe(path=str(bin_dir), reuse=True)
    probe(path=str(bin_dir), reuse=True)
    assert _times(asked) == 2
    assert not any(cache.iterdir())


def test_a_kept_answer_others_may_write_is_not_taken(tmp_path, cache):
    bin_dir, asked = _engine(tmp_path)
    probe(path=str(bin_dir), reuse=True)
    for kept in cache.iterdir():
        os.chmod(kept, 0o666)
    probe(path=str(bin_dir), reuse=True)
    assert _times(asked) == 2
