#!/usr/bin/env python3
"""gg next to a Prefect process worker (``bench/peer.py``), same N trivial jobs.

    python bench/side_by_side.py [--quick] [--jobs N] [--repeats R] [--json] [--no-write]

Both sides are measured in one invocation, back to back, with the same definitions
(docs/peer-benchmark.md):

- **claim**: driver clock right after the submit call returned → the control plane's
  timestamp of the hand-over (gg: ``info:flight:claimed``; Prefect: first ``Pending``);
- **dispatch**: the same start → the job's first instruction (gg: the flight runs
  ``date +%s.%N`` and its output is that instant; Prefect: ``time.time()`` on the flow's
  first line);
- **throughput** at 1 and 4 concurrent slots (gg: one ``gg runner up --workers L``;
  Prefect: one worker ``--limit L``): N jobs submitted back to back, first submit → the
  last completion stamped by the control plane.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx  # noqa: E402

from common import ROOT, Bench, emit, summary, write_section  # noqa: E402
from dispatch import follow_until, wait_parked  # noqa: E402


def _auth(token: str) -> dict:
    return {"authorization": f"Bearer {token}"}


def gg_dispatch(bench: Bench, repeats: int) -> dict:
    token = bench.token
    claim, claim_sent, dispatch = [], [], []
    with httpx.Client(base_url=bench.url, timeout=60) as http:
        for i in range(repeats + 2):  # two warm-ups
            wait_parked(http)
            sent = time.time()
            flight = http.post("/v1/flights", json={"command": ["date +%s.%N"]},
                               headers=_auth(token)).json()
            accepted = time.time()
            follow_until(http, flight["id"], token, want_started=False)
            shown = http.get(f"/v1/flights/{flight['id']}", headers=_auth(token)).json()
            began = float("".join(f["body"]["text"] for f in shown["facts"] if f["kind"] == "output"))
            claimed = http.get("/v1/events", headers=_auth(token), params={
                "flight": flight["id"], "kind": "info:flight:claimed"}).json()[0]["at"]
            if i >= 2:
                claim.append((claimed - accepted) * 1000)
                claim_sent.append((claimed - sent) * 1000)
                dispatch.append((began - accepted) * 1000)
    return {"claim_ms": summary(claim, 1), "claim_from_sent_ms": summary(claim_sent, 1),
            "dispatch_ms": summary(dispatch, 1)}


def gg_throughput(bench: Bench, jobs: int) -> float:
    token = bench.token
    with httpx.Client(base_url=bench.url, timeout=60) as http:
        first = time.time()
        ids = {http.post("/v1/flights", json={"command": ["true"]}, headers=_auth(token)).json()["id"]
               for _ in range(jobs)}
        deadline = time.monotonic() + 120 + 10 * jobs
        while True:
            landed = [e for e in http.get("/v1/events", headers=_auth(token), params={
                "kind": "info:flight:landed", "limit": 10000}).json() if e["flight_id"] in ids]
            if len(landed) == len(ids):
                return jobs / (max(e["at"] for e in landed) - first)
            if time.monotonic() > deadline:
                raise RuntimeError("gg throughput run did not finish")
            time.sleep(0.05)


def gg_side(jobs: int, repeats: int, slots: list[int]) -> dict:
    out: dict = {"throughput": {}}
    for limit in slots:
        with tempfile.TemporaryDirectory(prefix=f"gg-bench-side{limit}-") as tmp:
            bench = Bench(Path(tmp)).start()
            try:
                bench.runner("side", workers=limit)
                bench.wait_online(1)
                if limit == 1:
                    out.update(gg_dispatch(bench, repeats))
                gg_throughput(bench, 2)  # warm-up
                out["throughput"][str(limit)] = round(gg_throughput(bench, jobs), 2)
            finally:
                bench.stop()
    return out


def peer_side(jobs: int, repeats: int, slots: list[int]) -> dict:
    argv = [sys.executable, str(ROOT / "bench" / "peer.py"), "--json", "--jobs", str(jobs),
            "--repeats", str(repeats), "--concurrency", ",".join(map(str, slots))]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"peer": "prefect", "error": f"peer.py exited {done.returncode}: {done.stderr[-500:]}"}


def ratio(a, b) -> float | None:
    return round(a / b, 1) if a and b else None


def run(jobs: int, repeats: int) -> dict:
    slots = [1, 4]
    gg = gg_side(jobs, repeats, slots)
    peer = peer_side(jobs, repeats, slots)
    result = {"jobs": jobs, "repeats": repeats, "gg": gg, "peer": peer}
    if "error" not in peer:
        result["ratios"] = {
            "claim_p50_peer_over_gg": ratio(peer["claim_ms"]["p50"], gg["claim_from_sent_ms"]["p50"]),
            "dispatch_p50_peer_over_gg": ratio(peer["dispatch_ms"]["p50"], gg["dispatch_ms"]["p50"]),
            **{f"throughput_{k}_gg_over_peer": ratio(gg["throughput"][k], peer["throughput"].get(k))
               for k in gg["throughput"]},
        }
    return result


def markdown(r: dict) -> str:
    gg, peer = r["gg"], r["peer"]
    lines = [f"gg next to {peer.get('peer', 'the peer')} (process worker, poll "
             f"{peer.get('setup', {}).get('poll_seconds', '?')} s), {r['repeats']} sequential "
             f"dispatches and {r['jobs']} jobs per throughput run on each side "
             "(definitions: docs/peer-benchmark.md).\n"]
    if "error" in peer:
        lines.append(f"The peer run failed: `{peer['error']}`.\n")
    lines += ["| figure | gg median | gg p99 | peer median | peer p99 | peer ÷ gg |",
              "|---|---|---|---|---|---|"]
    for key, peer_key, label in (
            ("claim_ms", "claim_ms", "claim: submit returned → hand-over stamped (ms)"),
            ("claim_from_sent_ms", "claim_ms", "claim, gg counted from submit *sent* (ms)"),
            ("dispatch_ms", "dispatch_ms", "dispatch: submit returned → job's first instruction (ms)")):
        p = peer.get(peer_key) or {}
        shown = ratio(p.get("p50"), gg[key]["p50"]) if gg[key]["p50"] and gg[key]["p50"] > 0 else None
        lines.append(f"| {label} | {gg[key]['p50']} | {gg[key]['p99']} | {p.get('p50', '–')} | "
                     f"{p.get('p99', '–')} | {shown or '–'} |")
    lines += ["", "| throughput, jobs/s | gg | peer | gg ÷ peer |", "|---|---|---|---|"]
    for k, v in gg["throughput"].items():
        pv = (peer.get("throughput") or {}).get(k)
        lines.append(f"| {k} concurrent slot(s) | {v} | {pv if pv is not None else '–'} | "
                     f"{ratio(v, pv) or '–'} |")
    lines.append("\nA negative gg claim means the parked runner held the lease before the "
                 "submitter had its answer; the ratio for the claim therefore uses gg's figure "
                 "counted from the moment the submit was *sent* (which favours the peer).")
    load = peer.get("setup", {}).get("loadavg_1m")
    if load:
        lines.append(f"\nLoad average during the peer run: {load[0]} → {load[1]}.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="8 dispatches, 8 jobs (the peer's defaults)")
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    jobs = args.jobs or (8 if args.quick else 20)
    repeats = args.repeats or (8 if args.quick else 20)
    result = run(jobs, repeats)
    text = markdown(result)
    print(text, file=sys.stderr if args.json else sys.stdout)
    if not args.no_write:
        write_section("side-by-side", text)
    emit(result, args.json)
    return result


if __name__ == "__main__":
    main()
