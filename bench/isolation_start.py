#!/usr/bin/env python3
"""What starting a flight costs under each isolation level: ``true`` built by
``gg.runner.isolation.build`` and started through the runner's launcher (its cgroups, as a
flight's start), timed from the start to its end, in milliseconds.

    sudo python bench/isolation_start.py [STARTS]      (default 10 of each)

Levels: none, sandbox (bubblewrap), container (when an engine answers; its image must be
there already: a pull is not a start) and gvisor (when runsc runs a flight here). Prints the
median and the slowest start of each level, and the load. docs/isolation.md has the figures.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the gg of this checkout

from gg.runner import isolation  # noqa: E402
from gg.runner.capabilities import probe  # noqa: E402
from gg.runner.flight_identity import hand_over, runs_as_root, shared  # noqa: E402
from gg.runner.launching import LAUNCHER  # noqa: E402


def start_ms(level: str, caps: dict, workspace: Path, state: Path) -> float | None:
    """The start's milliseconds; None when it failed (a container without its image)."""
    launch = isolation.build(["true"], policy={"isolation": level, "egress": "all"},
                             workspace=workspace, env={"PATH": "/usr/bin:/bin"},
                             state_dir=state, capabilities=caps)
    began = time.monotonic()
    proc = LAUNCHER.start(launch.argv, env=launch.env, cwd=launch.cwd, handed=launch.handed,
                          cleanup=launch.cleanup)
    code = proc.wait(120)
    took = (time.monotonic() - began) * 1000
    if launch.cleanup:
        subprocess.run(launch.cleanup, capture_output=True, check=False)
    launch.discard()
    return took if code == 0 else None


def main() -> None:
    starts = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    caps = probe()
    scratch = Path(tempfile.mkdtemp(prefix="gg-bench-"))
    workspace, state = scratch / "ws", scratch / "state"
    workspace.mkdir()
    state.mkdir()
    if runs_as_root():
        hand_over(workspace, shared().first())
    print(f"load {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores, {starts} starts each")
    print("| level | median ms | slowest ms |")
    print("|---|---|---|")
    for level in ("none", "sandbox", "container", "gvisor"):
        if level not in caps["isolation_levels"]:
            print(f"| {level} | not usable here | |")
            continue
        if start_ms(level, caps, workspace, state) is None:  # the first start warms caches
            print(f"| {level} | fails here (the image {isolation.DEFAULT_IMAGE}?) | |")
            continue
        took = [t for t in (start_ms(level, caps, workspace, state) for _ in range(starts))
                if t is not None]
        print(f"| {level} | {statistics.median(took):.0f} | {max(took):.0f} |", flush=True)
    print(f"load {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
