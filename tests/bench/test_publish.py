"""A benchmark ends through ``common.publish``: under ``--json`` its standard output is the
JSON alone (its text goes to stderr), and its section of docs/performance.md is written
unless ``--no-write`` (bench/common.py)."""

from __future__ import annotations

import argparse
import importlib.util
import json
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
