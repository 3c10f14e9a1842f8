#!/usr/bin/env python3
"""Run every benchmark in turn and write their sections of docs/performance.md.

    python bench/run.py [--quick]
        [--only dispatch,throughput,checkins,listing,startup,tokens,side-by-side,claim-plan,
                lease-calls,long-answers,requests]

Each part is also a script of its own (``python bench/NAME.py --help``); this one only runs
them in sequence with the same ``--quick``. The side-by-side part installs the pinned peer
(Prefect) into ``bench/.peer-venv`` on first use, which takes about a minute, and Debian's
``slurm-wlm`` and ``munge`` with apt-get when they are absent (as root).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PARTS = {"startup": "startup.py", "tokens": "tokens.py", "dispatch": "dispatch.py",
         "throughput": "throughput.py", "checkins": "checkins.py", "listing": "listing.py",
         "side-by-side": "side_by_side.py", "claim-plan": "claim_plan.py",
         "lease-calls": "lease_calls.py", "long-answers": "long_answers.py",
         "requests": "requests.py"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller runs (a few minutes in all)")
    ap.add_argument("--only", default=",".join(PARTS), help="comma list of parts")
    args = ap.parse_args()
    failed = []
    for name in [p.strip() for p in args.only.split(",") if p.strip()]:
        argv = [sys.executable, str(HERE / PARTS[name])] + (["--quick"] if args.quick else [])
        print(f"== {name}: {' '.join(argv[1:])}", flush=True)
        started = time.monotonic()
        if subprocess.run(argv).returncode != 0:
            failed.append(name)
        print(f"== {name}: {time.monotonic() - started:.0f}s", flush=True)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
