#!/usr/bin/env python3
"""An artifact of SIZE megabytes (default 200) uploaded, handed on and downloaded, with the
peak memory of the runner, the server and ``gg artifact get`` (docs/work-graphs.md).

    python bench/artifacts.py [--size MB] [--json]

A real control plane (SQLite in a temporary folder) and one real runner. Flight 1 writes
SIZE MB of random bytes under ``$GG_ARTIFACTS`` (the runner hashes it, then sends it a chunk
at a time; the server spools and hashes it as it arrives); flight 2, opened ``--after`` it
``--with-artifacts``, has it put under ``$GG_INPUTS`` before it starts and checks it; then
``gg artifact get`` downloads it. Memory is each process's peak resident set (``VmHWM``),
read before the first flight and after everything: flat memory means the peak does not move
by anything near SIZE. Rewrites its section of docs/performance.md.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import Bench, emit, write_section  # noqa: E402

from gg.launch import gg_argv  # noqa: E402


def peak_mb(pid: int) -> float:
    """The process's peak resident set so far, in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def wait_ended(http, flight_id: str, timeout: float = 900.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        flight = http.get(f"/v1/flights/{flight_id}").json()
        if flight["stage"] in ("landed", "failed", "cancelled"):
            return flight
        time.sleep(0.2)
    raise RuntimeError(f"{flight_id} did not end within {timeout:g}s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=200, help="the artifact's size in MB")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    import httpx

    with tempfile.TemporaryDirectory(prefix="gg-bench-artifacts-", dir="/var/tmp") as tmp:
        root = Path(tmp)
        bench = Bench(root).start()
        try:
            runner = bench.runner("r1")
            bench.wait_online(1)
            server_pid, runner_pid = bench.server.proc.pid, runner.proc.pid
            before = {"server": peak_mb(server_pid), "runner": peak_mb(runner_pid)}
            http = httpx.Client(base_url=bench.url, timeout=60,
                                headers={"authorization": f"Bearer {bench.token}"})
            write = (f'head -c {args.size}M /dev/urandom > "$GG_ARTIFACTS/big.bin" && '
                     f'sha256sum "$GG_ARTIFACTS/big.bin" > {root}/written.sha256')
            began = time.monotonic()
            first = http.post("/v1/flights", json={"command": [write]}).json()["id"]
            if wait_ended(http, first)["stage"] != "landed":
                raise SystemExit(f"the writing flight did not land: {http.get(f'/v1/flights/{first}').text}")
            uploaded_in = time.monotonic() - began
            digest = (root / "written.sha256").read_text().split()[0]
            check = (f'echo "{digest}  $GG_INPUTS/{first}/big.bin" | sha256sum -c')
            began = time.monotonic()
            second = http.post("/v1/flights", json={
                "command": [check], "after": [first], "artifacts": {"inputs": True}}).json()["id"]
            handed = wait_ended(http, second)
            if handed["stage"] != "landed":
                raise SystemExit(f"the reading flight did not land: {handed['ended_reason']}")
            handed_in = time.monotonic() - began
            target = root / "got.bin"
            env = {**os.environ, **bench.env, "GG_CONFIG_DIR": str(bench.config),
                   "GG_SERVER": bench.url}
            began = time.monotonic()
            subprocess.run(gg_argv("artifact", "get", first, "big.bin", "-o", str(target)),
                           env=env, check=True, capture_output=True)
            downloaded_in = time.monotonic() - began
            cli_peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
            counted = hashlib.sha256()
            with open(target, "rb") as handle:
                while block := handle.read(1 << 20):
                    counted.update(block)
            if counted.hexdigest() != digest:
                raise SystemExit("the download's digest differs from the written file's")
            after = {"server": peak_mb(server_pid), "runner": peak_mb(runner_pid)}
        finally:
            bench.stop()
    result = {"size_mb": args.size, "uploaded_s": round(uploaded_in, 1),
              "handed_s": round(handed_in, 1), "downloaded_s": round(downloaded_in, 1),
              "peak_mb_before": {k: round(v) for k, v in before.items()},
              "peak_mb_after": {k: round(v) for k, v in after.items()},
              "cli_peak_mb": round(cli_peak)}
    lines = [
        f"An artifact of {args.size} MB of random bytes, one runner, SQLite:",
        "",
        "| step | seconds |",
        "|---|---|",
        f"| written by a flight and uploaded (the flight's whole run) | {uploaded_in:.1f} |",
        f"| handed to a flight `--with-artifacts` (fetched, checked, the flight's run) "
        f"| {handed_in:.1f} |",
        f"| `gg artifact get` (downloaded, checked, renamed into place) | {downloaded_in:.1f} |",
        "",
        "| process | peak resident set before | after |",
        "|---|---|---|",
        f"| `gg server` | {before['server']:.0f} MB | {after['server']:.0f} MB |",
        f"| `gg runner up` | {before['runner']:.0f} MB | {after['runner']:.0f} MB |",
        f"| `gg artifact get` | | {cli_peak:.0f} MB (the largest process this bench waited "
        "for) |",
    ]
    print("\n".join(lines))
    write_section("artifacts", "\n".join(lines))
    emit(result, args.json)


if __name__ == "__main__":
    main()
