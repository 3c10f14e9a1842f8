#!/usr/bin/env python3
"""Token checks take the same time whether a guess is close or not (a timing sample).

    python bench/tokens.py [--quick] [--json] [--no-write]

In process, against a real SQLite store: authenticate a person token that is valid, one
that differs only in its last character, one of the same length that shares nothing, and
one with a wrong prefix — interleaved at random, many times each. Tokens are looked up by
their SHA-256 (so a near miss hashes to something unrelated) and compared with
``hmac.compare_digest``; the medians should agree within noise.
"""

from __future__ import annotations

import argparse
import random
import secrets
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import publish, summary  # noqa: E402

from gg.control.core import Core  # noqa: E402
from gg.control.people import authenticate_person, bootstrap  # noqa: E402
from gg.errors import Unauthorized  # noqa: E402
from gg.settings import Settings  # noqa: E402
from gg.store import open_store  # noqa: E402


def run(rounds: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="gg-bench-tokens-") as tmp:
        core = Core(store=open_store(tmp), settings=Settings())
        bootstrap(core, Path(tmp))
        valid = (Path(tmp) / "owner-token").read_text().strip()
        cases = {
            "valid": valid,
            "last character differs": valid[:-1] + ("A" if valid[-1] != "A" else "B"),
            "same length, unrelated": "ggp_" + secrets.token_urlsafe(24)[: len(valid) - 4],
            "wrong prefix": "ggx_" + valid[4:],
        }
        samples: dict[str, list[float]] = {k: [] for k in cases}
        order = [k for k in cases for _ in range(rounds)]
        random.Random(7).shuffle(order)
        for name in order[: len(cases) * 50]:  # warm up
            _check(core, cases[name])
        for name in order:
            started = time.perf_counter_ns()
            _check(core, cases[name])
            samples[name].append((time.perf_counter_ns() - started) / 1000)
        core.store.close()
    return {"rounds": rounds, "us": {k: summary(v, 2) for k, v in samples.items()}}


def _check(core: Core, token: str) -> None:
    try:
        authenticate_person(core, token)
    except Unauthorized:
        pass


def markdown(r: dict) -> str:
    lines = [f"Token check timing, {r['rounds']:,} interleaved checks per kind, in process "
             "(`authenticate_person` against a real SQLite store).\n",
             "| token presented | median µs | p99 µs | min µs | max µs |", "|---|---|---|---|---|"]
    for name, s in r["us"].items():
        lines.append(f"| {name} | {s['p50']} | {s['p99']} | {s['min']} | {s['max']} |")
    lines.append("\nA wrong prefix is refused before any look-up (it cannot be a person token at "
                 "all, so nothing about a real token is learnt); among tokens of the right "
                 "kind, a near miss costs the same as an unrelated guess: the store is asked "
                 "for the SHA-256, and an equal digest is confirmed with `hmac.compare_digest`.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="5,000 checks per kind instead of 50,000")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    result = run(5_000 if args.quick else 50_000)
    text = markdown(result)
    publish("tokens", text, result, args)
    return result


if __name__ == "__main__":
    main()
