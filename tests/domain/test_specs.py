"""A flight's spec and its digest: what an approval is given for (pure rules)."""

from __future__ import annotations

import hashlib
from dataclasses import replace

from gg.domain import specs
from gg.domain.flights import Flight


def _service(command: list[str], env: dict | None = None, generation: int = 1) -> dict:
    return {"generation": generation, "command": command, "env": env or {}, "port": None,
            "ready_cmd": None, "backoff": 0.5, "backoff_cap": 30.0, "ready_timeout": 60.0,
            "stop_grace": 10.0, "degraded_after": 3}


def _flight(**fields) -> Flight:
    base = {"id": "f_1", "command": ["echo", "harmless"], "opened_by": "p_ada",
            "opened_at": 1.0}
    return Flight(**{**base, **fields})


def test_the_digest_is_sha256_over_the_canonical_json_of_the_spec():
    spec = specs.what_runs(_flight())
    canonical = specs.canonical(spec)
    assert canonical.startswith(b'{"agent":"shell","attended":false,"command":["echo","harmless"]')
    assert b" " not in canonical.replace(b"echo harmless", b"")
    assert specs.digest(spec) == "sha256:" + hashlib.sha256(canonical).hexdigest()
    assert specs.digest(dict(reversed(list(spec.items())))) == specs.digest(spec)  # key order


def test_every_part_of_what_runs_changes_the_digest():
    flight = _flight(kind="service", service=_service(["echo", "harmless"]))
    first = specs.digest(specs.what_runs(flight))
    changed = [
        replace(flight, service=_service(["echo", "pwned"])),
        replace(flight, service=_service(["echo", "harmless"], {"K": "v"})),
        replace(flight, environment="prod"),
        replace(flight, requires={"gpu": "yes"}),
        replace(flight, runner_target="r_x"),
        replace(flight, group="edge"),
        replace(flight, where={"zone": "b"}),
        replace(flight, repo="github.com/acme/app"),
        replace(flight, attended=True),
        replace(flight, timeout=60.0),
        replace(flight, service={**_service(["echo", "harmless"]), "port": 8080}),
    ]
    digests = {specs.digest(specs.what_runs(f)) for f in changed}
    assert first not in digests and len(digests) == len(changed)


def test_what_only_orders_or_books_a_flight_leaves_its_digest_alone():
    flight = _flight(kind="service", service=_service(["echo", "harmless"]))
    same = [replace(flight, priority="high"), replace(flight, output_limit=10),
            replace(flight, title="renamed"),
            replace(flight, service=_service(["echo", "harmless"], generation=7))]
    assert {specs.digest(specs.what_runs(f)) for f in same} == {
        specs.digest(specs.what_runs(flight))}


def test_a_service_runs_its_spec_s_command_not_the_one_it_was_opened_with():
    flight = _flight(kind="service", service=_service(["echo", "pwned"]))
    assert specs.what_runs(flight)["command"] == ["echo", "pwned"]


def test_changes_name_the_command_and_each_environment_value_as_set():
    before = specs.what_runs(_flight(kind="service",
                                     service=_service(["echo", "harmless"], {"A": "1", "B": "2"})))
    after = specs.what_runs(_flight(kind="service",
                                    service=_service(["sh", "-c", "rm -rf ~"], {"A": "1", "B": "3",
                                                                                "C": "x y"})))
    assert specs.changes(before, after) == [
        "command: `echo harmless` -> `sh -c 'rm -rf ~'`",
        "env B: set to '3' (was '2')",
        "env C: set to 'x y'",
    ]
    assert specs.changes(before, before) == []


def test_a_short_digest_keeps_its_prefix_and_twelve_hex_digits():
    full = specs.digest({})
    assert specs.short(full) == full[:19] and len(specs.short(full)) == 19
    assert specs.short(None) == "-"
