#!/usr/bin/env python3
"""The share of a core a busy loop gets under ``gg fly --cpus N``, by its cgroup's own count.

    sudo python bench/limits.py [SECONDS] [CPUS...]       (defaults: 3 s; 0.5 1 and no limit)

Each run starts a busy loop through the runner's launcher (the same start a flight gets:
its cgroups, its limits) for SECONDS of wall time and reads the CPU seconds its cgroup
counted (``cpu_seconds`` of gg.runner.cgroups.usage, the figure ``gg show`` prints): the
share is those over the wall time. Under ``--cpus 0.5`` it should read about 0.5 whatever
else the machine does (the quota is a ceiling); with no limit it is what the machine gave
it, at most one core (the loop is one thread). Also prints what a start costs with the
accounting cgroups (a flight's peak memory and CPU seconds) and with every limit.
Needs root (v1 hierarchies are root's) and the cpu controller; docs/isolation.md has the
figures.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the gg of this checkout

from gg.runner import cgroups  # noqa: E402
from gg.runner.launching import LAUNCHER  # noqa: E402

BUSY = "import time\nend = time.monotonic() + {s}\nwhile time.monotonic() < end:\n    pass\n"
STARTS = 50


def share(seconds: float, cpus: float | None) -> float:
    limits = {"cpus": cpus} if cpus is not None else None
    began = time.monotonic()
    proc = LAUNCHER.start([sys.executable, "-c", BUSY.format(s=seconds)], env=None, cwd="/",
                          limits=limits)
    proc.wait(seconds * 20 + 30)
    wall = time.monotonic() - began
    return proc.usage.get("cpu_seconds", float("nan")) / wall


def start_cost(limits: dict | None) -> float:
    began = time.monotonic()
    for _ in range(STARTS):
        LAUNCHER.start(["true"], env=None, cwd="/", limits=limits).wait(30)
    return (time.monotonic() - began) / STARTS * 1000


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
    asked = [float(a) for a in sys.argv[2:]] or [0.5, 1.0]
    usable = cgroups.limits_usable()
    if "cpu" not in usable:
        sys.exit(f"no cpu controller for flights here ({usable or 'none'}): run as root")
    print(f"controllers {usable}; load {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    for cpus in [*asked, None]:
        label = f"--cpus {cpus:g}" if cpus is not None else "no limit"
        print(f"{label:>12}: {share(seconds, cpus):.3f} of a core over {seconds:g} s")
    start_cost(None)  # the launcher is started once, not counted
    print(f"a start: {start_cost(None):.1f} ms with accounting, "
          f"{start_cost({'cpus': 1, 'memory': 1 << 30, 'pids': 1000}):.1f} ms with every limit "
          f"(mean of {STARTS})")


if __name__ == "__main__":
    main()
