#!/usr/bin/env python3
"""What one parked claim costs the server, and where that memory is.

    python bench/parked.py [--claims N] [--top K] [--json]

Runs the real app (the same uvicorn protocol and routes as ``gg server``) in this process
under ``tracemalloc``, registers N runners, parks one heartbeat claim for each from a separate
simulator process (one connection each, as runners do), and reports the Python memory per
parked claim grouped by the line that allocated it, with RSS per parked claim beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx  # noqa: E402
import psutil  # noqa: E402

from gg.launch import free_port  # noqa: E402

SIM = r'''
import asyncio, json, sys
sys.path.insert(0, sys.argv[3])
from checkins import Wire
async def main(port, creds):
    wires = [Wire("127.0.0.1", port, c) for c in creds]
    async def park(w):
        while True:
            try:
                await w.post("/v1/runner/claim", {"free_slots": 1, "wait": 600,
                                                  "readings": {"cpu_percent": 1.0}})
            except (OSError, asyncio.IncompleteReadError, IndexError, ValueError) as exc:
                print(f"claim failed, again in a second: {exc!r}", file=sys.stderr)
                await asyncio.sleep(1.0)  # ten thousand connecting at once: the backlog fills
    await asyncio.gather(*(park(w) for w in wires))
asyncio.run(main(int(sys.argv[1]), json.load(open(sys.argv[2]))))
'''


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--claims", type=int, default=2000)
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--rss-only", action="store_true",
                    help="no tracemalloc (its own bookkeeping inflates RSS): RSS per claim only")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    from checkins import register  # noqa: E402

    from gg.server.ahead import front
    from gg.server.app import create_app
    from gg.server.connections import serve
    from gg.settings import Settings
    from gg.store import open_store

    tmp = Path(tempfile.mkdtemp(prefix="gg-bench-parked-"))
    os.environ["GG_CLAIM_WAIT"] = "600"
    os.environ["GG_KEY_NONCE_RATE"] = "0"  # registering N runners at once is not an attack here
    settings = Settings.from_env(dev=True)
    store = open_store(tmp)
    app = create_app(settings, store, data_dir=tmp)
    port = free_port()
    threading.Thread(target=serve, args=(front(app), "127.0.0.1", port, settings, lambda: None, print),
                     daemon=True).start()
    url = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            httpx.get(url + "/v1/health", timeout=1)
            break
        except httpx.HTTPError:
            time.sleep(0.1)
    token = (tmp / "owner-token").read_text().strip()
    creds = asyncio.run(register(url, token, args.claims))
    caps = {"isolation": ["none", "sandbox"]}
    with httpx.Client(base_url=url, timeout=60) as http:
        for c in creds:  # a capability report on file: the claims park rather than being told
            http.post("/v1/runner/check-in", json={"free_slots": 1, "capabilities": caps},
                      headers={"authorization": f"Bearer {c}"}).raise_for_status()
    creds_file = tmp / "creds.json"
    creds_file.write_text(json.dumps(creds))
    proc = psutil.Process()
    time.sleep(1.0)
    if not args.rss_only:
        tracemalloc.start(10)
    before = tracemalloc.take_snapshot() if not args.rss_only else None
    rss_before = proc.memory_info().rss
    sim = subprocess.Popen([sys.executable, "-c", SIM, str(port), str(creds_file),
                            str(Path(__file__).resolve().parent)])
    try:
        deadline = time.monotonic() + 300
        dispatcher = app.state.dispatcher
        while dispatcher.parked_count < args.claims and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(2.0)
        parked = dispatcher.parked_count
        rss_after = proc.memory_info().rss
        after = tracemalloc.take_snapshot() if not args.rss_only else None
    finally:
        sim.kill()
    stats = after.compare_to(before, "traceback") if after is not None else []
    total = sum(s.size_diff for s in stats)
    top = []
    for s in stats[:args.top]:
        # a traceback runs from the oldest frame to the newest: the allocating line is last
        frames = [f"{Path(f.filename).name}:{f.lineno}" for f in reversed(s.traceback[-4:])]
        top.append({"bytes_per_claim": round(s.size_diff / parked), "where": " < ".join(frames)})
    result = {"parked": parked, "python_kb_per_claim": round(total / 1024 / parked, 1),
              "rss_kb_per_claim": round((rss_after - rss_before) / 1024 / parked, 1),
              "top": top}
    print(f"{parked} parked claims: {result['python_kb_per_claim']} KB of Python objects each "
          f"(tracemalloc), {result['rss_kb_per_claim']} KB RSS each", file=sys.stderr)
    for t in top:
        print(f"  {t['bytes_per_claim']:>6} B  {t['where']}", file=sys.stderr)
    if args.json:
        print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
