#!/usr/bin/env python3
"""``gg`` itself, except that the ``process`` driver's members take a while to boot.

    python bench/booting_members.py LOW HIGH GG-ARGUMENTS...
    python bench/booting_members.py 3 5 --server URL runner maintain POOL --name keeper

A ``process`` member is a ``gg runner up --once`` process: it checks in a second or so after
the maintainer starts it. A real pool's member is a machine (a VM, a container pulling its
image) that takes minutes. Run as a pool's maintainer, this starts every member after a pause
drawn uniformly from [LOW, HIGH] seconds, so its warm-up (from the member's start to its
first check-in, as the control plane measures it) is long enough for flights to wait on.
Everything else is gg's own command line, maintainer loop and driver, unchanged.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the gg of this checkout

from gg.pool.drivers import process  # noqa: E402

USAGE = "usage: booting_members.py LOW HIGH GG-ARGUMENTS... (seconds a member takes to boot)"


def main() -> None:
    try:
        low, high = float(sys.argv[1]), float(sys.argv[2])
    except (IndexError, ValueError):
        raise SystemExit(USAGE) from None
    plain = process.gg_argv

    def booting(*args: str) -> list[str]:
        # the shell sleeps, then becomes the member: the pid the driver records stays its own
        pause = f"{random.uniform(low, high):.2f}"
        return ["sh", "-c", 'sleep "$0" && exec "$@"', pause, *plain(*args)]

    process.gg_argv = booting
    from gg.cli.app import main as gg_main

    gg_main(sys.argv[3:])


if __name__ == "__main__":
    main()
