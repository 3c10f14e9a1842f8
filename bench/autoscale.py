#!/usr/bin/env python3
"""A pool that scales from demand against a fixed pool of the same maximum.

    python bench/autoscale.py [--flights 60] [--max 6] [--fly 2] [--idle-after 10]
                              [--boot LOW HIGH] [--json]

Each run drives a real ``gg server`` and a real ``gg runner maintain`` with the ``process``
driver (each member a ``gg runner up --once`` process that flies one flight and is reset),
optionally through bench/booting_members.py so members boot for LOW..HIGH seconds:

- **scaled**: ``scale: {min: 0, max: MAX, idle-after: IDLE}``, empty before the burst;
- **fixed**: ``inventory.warm: MAX`` (the pool keeps MAX members up), all ready before the burst.

FLIGHTS flights of ``sleep FLY`` open at once. It reports the time from the burst to every
flight started and to every flight landed, the time the scaled pool takes to reach MAX
members and to shrink back to 0, and the machine-seconds its members spend alive and idle
(alive, not flying) from the burst until the scaled pool is empty again, with the same
window for the fixed pool. Between bursts a fixed pool idles MAX machines and a scaled one
``min`` (0): that difference, per hour, is the rest of the story.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import Bench, write_section  # noqa: E402

# planner and check-ins every second: a real fleet's 5 s, shortened
ENV = {"GG_CHECK_IN_INTERVAL": "1", "GG_OFFLINE_AFTER": "6", "GG_CLAIM_WAIT": "5",
       "GG_LEASE_TTL": "10", "GG_LEASE_RENEW_AT": "3"}
POOL, POOL_ENV = "ui-pool", "ui"


class Run:
    """One control plane, its pool and maintainer; samples of the pool's members."""

    def __init__(self, args, scaled: bool):
        self.args, self.scaled = args, scaled
        self.bench = Bench(Path(tempfile.mkdtemp(prefix="gg-bench-autoscale-")), env=ENV)
        self.images = self.bench.root / "images"
        self.state = self.bench.root / "keeper"
        self.proc: subprocess.Popen | None = None
        self.api = None

    def start(self) -> "Run":
        from gg.client import Client
        from gg.pool.image import build_image

        self.bench.start()
        self.api = api = Client(self.bench.url, self.bench.token)
        charted = api.chart_environment(POOL_ENV, "true")
        if charted.gate is not None and charted.gate_status == "open":
            api.clear_gate(charted.gate)
        context = self.bench.root / "image"
        context.mkdir()
        (context / "README").write_text("what every member of the pool starts from\n")
        digest = build_image(context, self.images).digest
        top = self.args.max
        strategy: dict = {"environment": POOL_ENV, "image": {"ref": "ui-image"},
                          "bounds": {"pool-max": top}}
        if self.scaled:
            strategy["inventory"] = {"name": POOL, "size": top}
            strategy["scale"] = {"min": 0, "max": top, "idle-after": self.args.idle_after}
        else:
            strategy["inventory"] = {"name": POOL, "size": top, "warm": top}
        applied = api.apply_strategy(POOL_ENV, strategy)
        api.clear_gate(applied.gate.id)
        api.pin_strategy_digest(POOL_ENV, digest)
        if self._maintain().wait(timeout=120) != 4:  # refused until allowed: registers it
            raise RuntimeError(f"the maintainer was not refused as expected: {self._log()}")
        api.allow_maintainer(POOL, "keeper")
        self._maintain()
        return self

    def _maintain(self) -> subprocess.Popen:
        env = {**os.environ, **self.bench.env, "GG_STATE_DIR": str(self.state),
               "GG_CONFIG_DIR": str(self.bench.config), "GG_IMAGES_DIR": str(self.images)}
        low, high = self.args.boot
        argv = [sys.executable, str(HERE / "booting_members.py"), f"{low:g}", f"{high:g}",
                "--server", self.bench.url, "runner", "maintain", POOL, "--name", "keeper"]
        with open(self.bench.root / "keeper.log", "ab") as log:
            self.proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
        return self.proc

    def _log(self) -> str:
        path = self.bench.root / "keeper.log"
        return path.read_text()[-2000:] if path.exists() else ""

    def members(self) -> list[dict]:
        return [m.model_dump() for m in self.api.pool(POOL).members]

    def wait(self, what: str, check, timeout: float = 300.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = check()
            if got:
                return got
            time.sleep(0.25)
        raise RuntimeError(f"{what}: not within {timeout:g}s ({self._log()})")

    def burst(self) -> dict:
        """Open the flights at once; sample the pool until the window closes."""
        api, args = self.api, self.args
        t0 = time.time()
        ids = [api.open_flight({"environment": POOL_ENV, "command": [f"sleep {args.fly:g}"]}).id
               for _ in range(args.flights)]
        samples: list[tuple[float, int, int]] = []  # (at, alive, flying)
        started = landed = peak_at = empty_at = None
        peak = 0
        window = args.window
        while True:
            now = time.time()
            members = self.members()
            alive = sum(1 for m in members if m["state"] != "stopped")
            flying = sum(1 for m in members if m["flight"])
            samples.append((now, alive, flying))
            if alive > peak:
                peak, peak_at = alive, now
            if started is None or landed is None:
                flights = [api.flight(i) for i in ids]
                if started is None and all(f.attempt >= 1 for f in flights):
                    started = max(f.lease_granted_at or now for f in flights)
                if landed is None and all(f.stage == "landed" for f in flights):
                    landed = max(f.ended_at or now for f in flights)
            if (self.scaled and landed is not None and empty_at is None and alive == 0
                    and now - landed > 0):
                empty_at = now
            if window is not None and now - t0 >= window:
                break
            if window is None and empty_at is not None:
                break
            if now - t0 > args.timeout:
                raise RuntimeError(f"the burst did not finish within {args.timeout:g}s")
            time.sleep(0.5)
        alive_s = idle_s = 0.0
        for (a, alive, flying), (b, _, _) in zip(samples, samples[1:], strict=False):
            alive_s += alive * (b - a)
            idle_s += max(0, alive - flying) * (b - a)
        return {"all_started_s": (started or t0) - t0, "all_landed_s": (landed or t0) - t0,
                "peak_members": peak, "peak_at_s": (peak_at or t0) - t0,
                "empty_at_s": None if empty_at is None else empty_at - t0,
                "window_s": samples[-1][0] - t0, "machine_s": alive_s, "idle_machine_s": idle_s}

    def stop(self) -> None:
        from gg.launch import stop_process
        from gg.pool.drivers.process import ProcessDriver

        stop_process(self.proc, timeout=15)
        driver = ProcessDriver(self.state / "members", self.images, stop_grace=5.0)
        for member_id in driver.members():  # members outlive their maintainer by design
            driver.remove(member_id)
        self.bench.stop()


def run(args, scaled: bool) -> dict:
    r = Run(args, scaled).start()
    try:
        if scaled:
            r.wait("a first attestation", lambda: r.api.pool(POOL).last_attested_at)
        else:
            r.wait(f"{args.max} ready members",
                   lambda: sum(1 for m in r.members() if m["state"] == "ready") >= args.max)
        return r.burst()
    finally:
        r.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--flights", type=int, default=60)
    ap.add_argument("--max", type=int, default=6)
    ap.add_argument("--fly", type=float, default=2.0, help="seconds each flight sleeps")
    ap.add_argument("--idle-after", type=float, default=10.0)
    ap.add_argument("--boot", type=float, nargs=2, default=(0.0, 0.0), metavar=("LOW", "HIGH"))
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--no-doc", action="store_true", help="do not rewrite docs/performance.md")
    args = ap.parse_args(argv)
    args.window = None
    scaled = run(args, scaled=True)
    args.window = scaled["window_s"]  # the fixed pool is measured over the same window
    fixed = run(args, scaled=False)
    result = {"flights": args.flights, "max": args.max, "fly_s": args.fly,
              "idle_after_s": args.idle_after, "boot_s": list(args.boot),
              "scaled": scaled, "fixed": fixed}
    if args.json:
        print(json.dumps(result))
    def shown(value: float | None) -> str:
        return "-" if value is None else f"{value:.1f} s"

    table = "\n".join([
        "| pool | burst → all started | burst → all landed | peak members (at) | "
        "back to 0 members | machine-s alive | machine-s idle |",
        "|---|---|---|---|---|---|---|",
        *(f"| {name} | {r['all_started_s']:.1f} s | {r['all_landed_s']:.1f} s | "
          f"{r['peak_members']} ({r['peak_at_s']:.1f} s) | "
          f"{shown(r['empty_at_s'])} | "
          f"{r['machine_s']:.0f} | {r['idle_machine_s']:.0f} |"
          for name, r in (("scaled 0-" + str(args.max), scaled),
                          (f"fixed {args.max} warm", fixed))),
    ])
    body = (f"{args.flights} flights of `sleep {args.fly:g}` opened at once on a pool of at "
            f"most {args.max} `process` members (planner every 1 s, idle-after "
            f"{args.idle_after:g} s, members booting {args.boot[0]:g}–{args.boot[1]:g} s "
            f"extra), over {scaled['window_s']:.0f} s from the burst until the scaled pool "
            f"was empty again:\n\n{table}\n\nBetween bursts the fixed pool idles "
            f"{args.max} machines ({args.max * 3600} machine-seconds an hour), the scaled one "
            f"none.")
    print(body)
    if not args.no_doc:
        write_section("autoscale", body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
