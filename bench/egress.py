#!/usr/bin/env python3
"""What a flight's network namespace under ``egress: allowlist`` costs: set up and tear down.

    sudo python bench/egress.py [COUNT]          (default 30)

Each round makes a flight's namespace as the runner does (gg.runner.egress: the veth pair,
the addresses and route, the nftables rules inside; entries given as addresses, so no name
is resolved) and deletes it. Prints the median and the slowest of each, in milliseconds,
and the load average. Needs root, nft and ip; docs/isolation.md has the figures.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the gg of this checkout

from gg.runner import egress  # noqa: E402

ALLOW = ["10.0.0.0/8", "192.0.2.7:443", "198.51.100.0/24:22"]


def main() -> int:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    state = tempfile.mkdtemp(prefix="gg-bench-egress-")
    links = egress.Links(state)
    opened, closed = [], []
    try:
        links.open(ALLOW).close()  # the host table, once per runner: not a flight's cost
        for _ in range(count):
            start = time.perf_counter()
            network = links.open(ALLOW)
            made = time.perf_counter()
            network.close()
            opened.append((made - start) * 1000)
            closed.append((time.perf_counter() - made) * 1000)
    finally:
        egress.clear(state)
        os.rmdir(state)
    for name, values in (("set up", opened), ("tear down", closed)):
        print(f"{name}: median {statistics.median(values):.1f} ms, slowest {max(values):.1f} ms")
    print("load average: " + " ".join(f"{x:.1f}" for x in os.getloadavg()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
