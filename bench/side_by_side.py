#!/usr/bin/env python3
"""gg next to a Prefect process worker (``bench/peer.py``) and Slurm (``bench/slurm.py``).

    python bench/side_by_side.py [--quick] [--jobs N] [--repeats R] [--rounds K]
                                 [--without prefect,slurm] [--json] [--no-write]

All sides are measured in one invocation with the same definitions (docs/peer-benchmark.md).
gg and Slurm are interleaved: one dispatch of each in turn, the order alternating, and the
throughput runs likewise, so a drift of the machine's load falls on both alike. Prefect, a
server and workers of its own in a separate interpreter, runs whole between the 1-slot and the
4-slot blocks.

- **claim**: driver clock right after the submit call returned → the control plane's
  timestamp of the hand-over (gg: ``info:flight:claimed``; Prefect: first ``Pending``);
- **dispatch**: the same start → the job's first instruction (gg: the flight runs
  ``date +%s.%N`` and its output is that instant; Prefect: ``time.time()`` on the flow's
  first line);
- **throughput** at 1 and 4 concurrent slots (gg: one ``gg runner up --workers L``;
  Prefect: one worker ``--limit L``): N jobs submitted back to back, first submit → the
  last completion stamped by the control plane; Slurm: a node of ``CPUs=L``, one CPU a
  job, N jobs by a loop of ``sbatch`` calls and by one ``--array``, first submit → the last
  job's instruction).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx  # noqa: E402
import slurm  # noqa: E402
from common import ROOT, Bench, publish, summary  # noqa: E402
from dispatch import follow_until, wait_parked  # noqa: E402

SIDES = ("prefect", "slurm")


def _auth(token: str) -> dict:
    return {"authorization": f"Bearer {token}"}


def gg_dispatch_once(http: httpx.Client, token: str) -> tuple[float, float, float]:
    """(claim, claim counted from sent, dispatch) in ms, for one flight on a parked runner."""
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
    return (claimed - accepted) * 1000, (claimed - sent) * 1000, (began - accepted) * 1000


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


def interleaved(measures: list, turn: int) -> list:
    """Run each measure once, the order turned by ``turn`` (so no side always goes first)."""
    order = list(range(len(measures)))
    k = turn % len(order)
    order = order[k:] + order[:k]
    results: list = [None] * len(measures)
    for i in order:
        results[i] = measures[i]()
    return results


def block(limit: int, jobs: int, repeats: int, rounds: int, configs: list[str],
          gg: dict, slurms: dict) -> None:
    """One gg runner of ``limit`` workers beside each Slurm configuration with CPUs=limit."""
    with tempfile.TemporaryDirectory(prefix=f"gg-bench-side{limit}-") as tmp:
        bench = Bench(Path(tmp)).start()
        try:
            bench.runner("side", workers=limit)
            bench.wait_online(1)
            token = bench.token
            with httpx.Client(base_url=bench.url, timeout=60) as http:
                for _ in range(2):
                    gg_dispatch_once(http, token)  # warm-ups
                gg_throughput(bench, 2)
                if not configs:
                    configs = [None]  # gg alone
                for config in configs:
                    try:
                        slurm_block(http, token, bench, limit, jobs, repeats, rounds, config,
                                    gg, slurms)
                    except RuntimeError as e:  # Slurm failed: gg's and the peer's figures stay
                        slurms.setdefault(config, {"dispatch": [], "throughput": {}})[
                            "error"] = str(e)
        finally:
            bench.stop()


def slurm_block(http, token, bench, limit, jobs, repeats, rounds, config, gg, slurms) -> None:
    ctx = slurm.cluster(config, limit) if config else _nothing()
    with ctx as c:
        side = slurms.setdefault(config, {"dispatch": [], "throughput": {}})
        if c:
            c.dispatch_once()  # warm-ups
            c.throughput(2, "loop")
        if limit == 1:
            for i in range(repeats):
                pair = interleaved([lambda: gg_dispatch_once(http, token),
                                    (lambda: c.dispatch_once()) if c
                                    else (lambda: None)], i)
                gg["dispatch"].append(pair[0])
                if c:
                    side["dispatch"].append(pair[1])
        for r in range(rounds):
            runs = interleaved([
                lambda: gg_throughput(bench, jobs),
                (lambda: c.throughput(jobs, "loop")) if c else (lambda: None),
                (lambda: c.throughput(jobs, "array")) if c else (lambda: None),
            ], r)
            gg["throughput"].setdefault(str(limit), []).append(runs[0])
            if c:
                side["throughput"].setdefault(str(limit), []).append(
                    {"loop": runs[1], "array": runs[2]})


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def gg_summary(gg: dict) -> dict:
    claim, claim_sent, dispatch = zip(*gg["dispatch"], strict=True) if gg["dispatch"] else ((), (), ())
    return {"claim_ms": summary(list(claim), 1), "claim_from_sent_ms": summary(list(claim_sent), 1),
            "dispatch_ms": summary(list(dispatch), 1),
            "throughput": {k: round(statistics.median(v), 2) for k, v in gg["throughput"].items()},
            "throughput_runs": {k: [round(x, 2) for x in v] for k, v in gg["throughput"].items()}}


def slurm_summary(side: dict) -> dict:
    out: dict = {"dispatch_ms": summary(side["dispatch"], 1), "throughput": {},
                 "throughput_runs": side["throughput"]}
    if "error" in side:
        out["error"] = side["error"]
    for k, runs in side["throughput"].items():
        out["throughput"][k] = {how: round(statistics.median(r[how]["jobs_per_s"] for r in runs), 2)
                                for how in ("loop", "array")}
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


def run(jobs: int, repeats: int, rounds: int, without: set[str]) -> dict:
    slots = [1, 4]
    load_start = os.getloadavg()[0]
    configs = [] if "slurm" in without else ["default", "high-throughput"]
    if configs:
        slurm.ensure_installed()
    gg: dict = {"dispatch": [], "throughput": {}}
    slurms: dict = {}
    peer: dict | None = None
    for limit in slots:
        if limit == slots[-1] and "prefect" not in without:
            peer = peer_side(jobs, repeats, slots)
        block(limit, jobs, repeats, rounds, configs, gg, slurms)
    ggs = gg_summary(gg)
    result: dict = {"jobs": jobs, "repeats": repeats, "rounds": rounds, "gg": ggs,
                    "loadavg_1m": [round(load_start, 2), round(os.getloadavg()[0], 2)],
                    "noise": False}
    if peer is not None:
        result["peer"] = peer
        if "error" not in peer:
            result["ratios"] = {
                "claim_p50_peer_over_gg": ratio(peer["claim_ms"]["p50"],
                                                ggs["claim_from_sent_ms"]["p50"]),
                "dispatch_p50_peer_over_gg": ratio(peer["dispatch_ms"]["p50"],
                                                   ggs["dispatch_ms"]["p50"]),
                **{f"throughput_{k}_gg_over_peer": ratio(ggs["throughput"][k],
                                                         peer["throughput"].get(k))
                   for k in ggs["throughput"]},
            }
    if configs:
        result["slurm"] = {"version": slurm.version(),
                           **{c: slurm_summary(slurms[c]) for c in configs}}
        result["slurm_ratios"] = {c: {
            "dispatch_p50_slurm_over_gg": ratio(result["slurm"][c]["dispatch_ms"]["p50"],
                                                ggs["dispatch_ms"]["p50"]),
            **{f"throughput_{k}_{how}_gg_over_slurm": ratio(ggs["throughput"][k], v[how])
               for k, v in result["slurm"][c]["throughput"].items() for how in v}}
            for c in configs}
    return result


def markdown(r: dict) -> str:
    gg = r["gg"]
    load = r["loadavg_1m"]
    lines = [f"{r['repeats']} sequential dispatches and {r['jobs']} jobs per throughput run "
             f"({r['rounds']} run(s) per side and setting, the median shown); definitions: "
             "docs/peer-benchmark.md. Load average (1 min) {0} at the start, {1} at the end; "
             "no noise load was started beside it (the machine was shared with other work "
             "all the same).\n".format(*load)]
    peer = r.get("peer")
    if peer is not None:
        lines.append(f"**Prefect** ({peer.get('peer', 'the peer')}, process worker, poll "
                     f"{peer.get('setup', {}).get('poll_seconds', '?')} s), run whole between "
                     "the 1-slot and the 4-slot blocks:\n")
        if "error" in peer:
            lines.append(f"The peer run failed: `{peer['error']}`.\n")
        lines += ["| figure | gg median | gg p99 | peer median | peer p99 | peer ÷ gg |",
                  "|---|---|---|---|---|---|"]
        for key, peer_key, label in (
                ("claim_ms", "claim_ms", "claim: submit returned → hand-over stamped (ms)"),
                ("claim_from_sent_ms", "claim_ms", "claim, gg counted from submit *sent* (ms)"),
                ("dispatch_ms", "dispatch_ms",
                 "dispatch: submit returned → job's first instruction (ms)")):
            p = peer.get(peer_key) or {}
            shown = (ratio(p.get("p50"), gg[key]["p50"])
                     if gg[key]["p50"] and gg[key]["p50"] > 0 else None)
            lines.append(f"| {label} | {gg[key]['p50']} | {gg[key]['p99']} | "
                         f"{p.get('p50', '–')} | {p.get('p99', '–')} | {shown or '–'} |")
        lines += ["", "| throughput, jobs/s | gg | peer | gg ÷ peer |", "|---|---|---|---|"]
        for k, v in gg["throughput"].items():
            pv = (peer.get("throughput") or {}).get(k)
            lines.append(f"| {k} concurrent slot(s) | {v} | {pv if pv is not None else '–'} | "
                         f"{ratio(v, pv) or '–'} |")
        lines.append("\nA negative gg claim means the parked runner held the lease before the "
                     "submitter had its answer; the ratio for the claim therefore uses gg's "
                     "figure counted from the moment the submit was *sent* (which favours the "
                     "peer).")
        pl = peer.get("setup", {}).get("loadavg_1m")
        if pl:
            lines.append(f"Load average during the peer run: {pl[0]} → {pl[1]}.")
    sl = r.get("slurm")
    if sl:
        configs = [c for c in sl if c != "version"]
        lines += ["", f"**Slurm** ({sl['version']}, one slurmctld and one slurmd on loopback, "
                  "a node of CPUs=1 or CPUs=4 and one CPU a job for 1 or 4 slots), interleaved "
                  "with gg one measurement at a time:\n",
                  "| figure | gg | " + " | ".join(f"Slurm {c}" for c in configs) + " | "
                  + " | ".join(f"{c} vs gg" for c in configs) + " |",
                  "|---|---|" + "---|" * (2 * len(configs))]
        d = [sl[c]["dispatch_ms"] for c in configs]
        lines.append(f"| dispatch p50 / p99 (ms) | {gg['dispatch_ms']['p50']} / "
                     f"{gg['dispatch_ms']['p99']} | "
                     + " | ".join(f"{x['p50']} / {x['p99']}" for x in d) + " | "
                     + " | ".join(f"{ratio(x['p50'], gg['dispatch_ms']['p50']) or '–'}× slower"
                                  for x in d) + " |")
        for k, v in gg["throughput"].items():
            for how, label in (("loop", "sbatch loop"), ("array", "job array")):
                vals = [(sl[c]["throughput"].get(k) or {}).get(how) for c in configs]
                lines.append(f"| {k} slot(s), jobs/s ({label}) | {v} | "
                             + " | ".join(str(x) if x is not None else "–" for x in vals) + " | "
                             + " | ".join(f"gg {ratio(v, x)}×" if x else "–" for x in vals)
                             + " |")
        for c in configs:
            if "error" in sl[c]:
                lines.append(f"\nSlurm {c} failed: `{sl[c]['error']}`.")
        lines.append("\nSlurm's throughput ends at the last job's own instruction (its "
                     "completion reaching the controller comes later), gg's at the control "
                     "plane's `landed` stamp: the definition favours Slurm.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="8 dispatches, 8 jobs, 1 round")
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--rounds", type=int, default=None,
                    help="throughput runs per side and setting (median shown; default 3)")
    ap.add_argument("--without", default="", help="sides left out: prefect, slurm (comma list)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    without = {w.strip() for w in args.without.split(",") if w.strip()}
    if without - set(SIDES):
        ap.error(f"--without takes {', '.join(SIDES)}")
    jobs = args.jobs or (8 if args.quick else 20)
    repeats = args.repeats or (8 if args.quick else 20)
    rounds = args.rounds or (1 if args.quick else 3)
    if not (1 <= jobs <= 1000 and 1 <= repeats <= 500 and 1 <= rounds <= 20):
        ap.error("--jobs must be within 1..1000, --repeats 1..500, --rounds 1..20")
    result = run(jobs, repeats, rounds, without)
    text = markdown(result)
    publish("side-by-side", text, result, args)
    return result


if __name__ == "__main__":
    main()
