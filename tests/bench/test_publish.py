"""A benchmark ends through ``common.publish``: under ``--json`` its standard output is the
JSON alone (its text goes to stderr), and its section of docs/performance.md is written
unless ``--no-write`` (bench/common.py), its first line saying the load at the bench's start
and whether noise ran beside it; every section of docs/performance.md says both."""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
from pathlib import Path

_BENCH = Path(__file__).resolve().parents[2] / "bench"


def _common():
    sys.path.insert(0, str(_BENCH))
    try:
        spec = importlib.util.spec_from_file_location("bench_common", _BENCH / "common.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(_BENCH))


def test_json_alone_on_stdout_the_text_on_stderr_and_the_section_written_unless_told_not(
        tmp_path, capsys, monkeypatch):
    common = _common()
    doc = tmp_path / "performance.md"
    doc.write_text("# Performance\n")
    monkeypatch.setattr(common, "DOC", doc)
    result = {"flights_per_second": 163.1}

    common.publish("a-bench", "| figure | value |", result, argparse.Namespace(
        json=True, no_write=True))
    out, err = capsys.readouterr()
    assert json.loads(out) == result and "| figure | value |" in err
    assert "bench:a-bench" not in doc.read_text()

    common.publish("a-bench", "| figure | value |", result, argparse.Namespace(
        json=False, no_write=False))
    out, err = capsys.readouterr()
    assert out.strip() == "| figure | value |" and err == ""
    written = doc.read_text()
    assert "<!-- bench:a-bench -->" in written and "| figure | value |" in written


def test_a_section_says_whether_the_bench_s_noise_ran_beside_its_load(tmp_path, monkeypatch):
    common = _common()
    doc = tmp_path / "performance.md"
    doc.write_text("# Performance\n")
    monkeypatch.setattr(common, "DOC", doc)
    monkeypatch.setattr(common, "yardstick", lambda: 33.0)  # not five interpreters a section

    common.publish("quiet", "| a |", {}, argparse.Namespace(json=False, no_write=False))
    common.publish("noisy", "| b |", {}, argparse.Namespace(json=False, no_write=False, noise=True))
    common.write_section("direct", "| c |")  # the benches that write without publish
    sections = {name: text.splitlines()[0] for name, text in _sections(doc.read_text()).items()}

    # the words docs/performance.md quotes
    assert common.NO_NOISE == "no noise (nothing else started by the benchmark)"
    assert common.NOISE_RAN == "noise ran (bench/noise.py)"
    assert common.NO_NOISE in sections["quiet"] and common.NOISE_RAN not in sections["quiet"]
    assert common.NOISE_RAN in sections["noisy"] and common.NO_NOISE not in sections["noisy"]
    assert common.NO_NOISE in sections["direct"]
    assert all("load average" in first for first in sections.values())


def _sections(text: str) -> dict[str, str]:
    """Each bench section of a performance document: its name, its text."""
    return {m.group(1): m.group(2).strip()
            for m in re.finditer(r"<!-- bench:([\w-]+) -->(.*?)<!-- /bench:\1 -->", text, re.S)}


def test_every_figure_of_docs_performance_says_its_load_and_whether_noise_ran():
    """Issue 30: every section a bench wrote states the load at its start and whether the
    bench's noise ran beside it (bench/common.py writes both in its first line; the noise
    benches wrote it in their text before that)."""
    sections = _sections((_BENCH.parent / "docs" / "performance.md").read_text())
    assert len(sections) > 20
    unsaid = [name for name, text in sections.items()
              if "load average" not in text
              or not ("noise ran" in text.lower() or "no noise" in text.lower())]
    assert unsaid == [], f"sections that do not say their load and noise: {unsaid}"
