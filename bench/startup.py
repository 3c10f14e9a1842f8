#!/usr/bin/env python3
"""``gg --help`` start-up time (target ≤ 150 ms).

    python bench/startup.py [--quick] [--runs N] [--json] [--no-write]

Uses hyperfine when it is installed (``apt-get install hyperfine``), else times the same
command with repeated subprocess runs. Either way the command runs with this checkout's gg
first on PYTHONPATH, after warm-up runs so the figures are for a warm file cache.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import TABLE_HEAD, publish, row, summary  # noqa: E402

COMMANDS = {"python -c pass (the interpreter alone)": [sys.executable, "-c", "pass"],
            "gg --help": ["gg", "--help"],
            "python -m gg --help": [sys.executable, "-m", "gg", "--help"],
            "gg fly --help": [sys.executable, "-m", "gg", "fly", "--help"]}
FLY = [sys.executable, "-m", "gg", "fly", "--", "true"]  # against a real control plane


def with_hyperfine(argv: list[str], runs: int) -> list[float]:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run(["hyperfine", "--warmup", "3", "--runs", str(runs), "--shell=none",
                        "--style", "none", "--export-json", out.name, " ".join(argv)],
                       check=True, stdout=subprocess.DEVNULL)
        data = json.loads(Path(out.name).read_text())
    return [t * 1000 for t in data["results"][0]["times"]]


def with_subprocess(argv: list[str], runs: int, env: dict | None = None) -> list[float]:
    for _ in range(3):
        subprocess.run(argv, stdout=subprocess.DEVNULL, check=True, env=env)
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, check=True, env=env)
        times.append((time.perf_counter() - started) * 1000)
    return times


def cpu_times(argv: list[str], runs: int, env: dict | None = None) -> list[float]:
    """User+system CPU of each run: what start-up costs, whatever else loads the machine."""
    import resource

    out = []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(argv, stdout=subprocess.DEVNULL, check=True, env=env)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        out.append(((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)) * 1000)
    return out


def run(runs: int) -> dict:
    tool = "hyperfine" if shutil.which("hyperfine") else "subprocess"
    result = {"tool": tool, "runs": runs, "commands": {}}
    for label, argv in COMMANDS.items():
        if shutil.which(argv[0]) is None and argv[0] != sys.executable:
            continue
        times = (with_hyperfine if tool == "hyperfine" else with_subprocess)(argv, runs)
        result["commands"][label] = summary(times, 1)
        result["commands"][label + " (CPU)"] = summary(cpu_times(argv, runs), 1)
    from common import Bench

    with tempfile.TemporaryDirectory(prefix="gg-bench-startup-") as tmp:
        bench = Bench(Path(tmp)).start()
        try:
            env = {**os.environ, "GG_CONFIG_DIR": str(bench.config), "GG_SERVER": bench.url}
            label = "gg fly -- true (opens a flight on a real control plane)"
            result["commands"][label] = summary(with_subprocess(FLY, runs, env), 1)
            result["commands"][label + " (CPU)"] = summary(cpu_times(FLY, runs, env), 1)
        finally:
            bench.stop()
    result["load_average"] = round(os.getloadavg()[0], 2)
    return result


def markdown(r: dict) -> str:
    lines = [f"Start-up, {r['runs']} runs after 3 warm-up runs, timed with "
             f"{r['tool']}; load average {r.get('load_average')} at the end (targets: "
             "`gg --help` ≤ 100 ms CPU, `gg fly` ≤ 150 ms CPU). CPU time is shown too: it is what start-up costs "
             "whatever else runs on the machine, while wall clock on a shared 2-core machine "
             "includes waiting for a core.\n", TABLE_HEAD]
    for label, s in r["commands"].items():
        if label.endswith(" (CPU)"):
            lines.append(row(f"`{label[:-6]}`, CPU time (user + system)", s))
        else:
            lines.append(row(f"`{label}`, wall clock", s))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="10 runs instead of 40")
    ap.add_argument("--runs", type=int, default=None)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    result = run(args.runs or (10 if args.quick else 40))
    text = markdown(result)
    publish("startup", text, result, args)
    return result


if __name__ == "__main__":
    main()
