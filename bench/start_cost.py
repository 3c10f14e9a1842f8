#!/usr/bin/env python3
"""What one control plane's start costs in CPU: a real ``gg server`` on SQLite in a fresh
folder, started until healthy and signed in to (``gg.launch.sign_in``, as every test fleet
and ``gg demo`` do).

    python bench/start_cost.py [--runs N] [--json] [--no-write]

The figure is CPU seconds (user + system) of every process started for it (the server, its
meaning workers, a ``gg login`` where sign-in runs one) and of this one while it signs in,
not wall time (which is given too, until signed in): the test suite starts hundreds of
control planes on two cores, so what a start costs in CPU is what the suite's length is made
of. Compare two checkouts by running this script with each one first on PYTHONPATH, on a
quiet machine: under load the CPU a start takes varies by a third from run to run.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import psutil  # noqa: E402
from common import TABLE_HEAD, cpu_of, publish, row, summary  # noqa: E402

from gg.launch import LocalServer, free_port, sign_in  # noqa: E402


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _tree_cpu(pid: int) -> float:
    """CPU of a living process and its descendants (the server and its meaning workers)."""
    process = psutil.Process(pid)
    return cpu_of([process, *process.children(recursive=True)])


def one_start(root: Path) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one start and sign-in: of the server and everything it
    started, of a ``gg login`` where sign-in runs one, and of this process while it signs in;
    read while the server still runs, one second after sign-in (what a test fleet pays before
    its first request)."""
    wall = time.monotonic()
    server = LocalServer(root / "data", free_port()).start(timeout=120)
    assert server.proc is not None
    try:
        reaped, mine = _children_cpu(), time.process_time()
        sign_in(root / "config", server.url, server.owner_token())
        signing = _children_cpu() - reaped + time.process_time() - mine
        wall = time.monotonic() - wall
        time.sleep(1.0)  # a meaning worker warmed at start has started by now
        return _tree_cpu(server.proc.pid) + signing, wall
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    if args.runs < 1:
        raise SystemExit("--runs takes a number of starts, 1 or more")
    cpu, wall = [], []
    with tempfile.TemporaryDirectory(prefix="gg-bench-start-") as tmp:
        for n in range(args.runs):
            c, w = one_start(Path(tmp) / str(n))
            cpu.append(c * 1000)
            wall.append(w * 1000)
    load = round(os.getloadavg()[0], 2)
    result = {"cpu_ms": summary(cpu), "wall_ms": summary(wall), "load": load}
    text = ("A control plane started until healthy and signed in to, on SQLite in a "
            f"fresh folder; load average {load} at the end.\n\n" + "\n".join([
                TABLE_HEAD,
                row("CPU of one start and sign-in (user + system)", result["cpu_ms"]),
                row("wall time from start to signed in", result["wall_ms"])]))
    publish("start-cost", text, result, args)
    return result


if __name__ == "__main__":
    main()
