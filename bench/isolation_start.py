#!/usr/bin/env python3
"""What starting a flight costs under each isolation level: ``true`` built by
``gg.runner.isolation.build`` and started through the runner's launcher (its cgroups, as a
flight's start), timed from the start to its end, in milliseconds.

    sudo python bench/isolation_start.py [STARTS] [--image REF]   (default 10 of each)

Levels: none, sandbox (bubblewrap), container (when an engine answers; its image must be
there already: a pull is not a start; ``--image``, else the policy's default; the engine reads
the runner's own ``CONTAINERS_CONF`` as a runner does) and gvisor (when runsc runs a flight here). Prints the
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


def start_ms(level: str, caps: dict, workspace: Path, state: Path,
             image: str | None = None) -> float | None:
    """The start's milliseconds; None when it failed (a container without its image)."""
    launch = isolation.build(["true"], policy={"isolation": level, "egress": "all"},
                             workspace=workspace, env={"PATH": "/usr/bin:/bin"},
                             state_dir=state, capabilities=caps,
                             image=image if level == "container" else None)
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
    args = sys.argv[1:]
    image = None
    if "--image" in args:
        at = args.index("--image")
        image = args[at + 1]
        del args[at:at + 2]
    starts = int(args[0]) if args else 10
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
        if start_ms(level, caps, workspace, state, image) is None:  # the first warms caches
            print(f"| {level} | fails here (the image {image or isolation.DEFAULT_IMAGE}?) | |")
            continue
        took = [t for t in (start_ms(level, caps, workspace, state, image)
                            for _ in range(starts)) if t is not None]
        print(f"| {level} | {statistics.median(took):.0f} | {max(took):.0f} |", flush=True)
    print(f"load {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
