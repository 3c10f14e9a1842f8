"""What a flight runs, and its digest: the one exact thing an approval is given for.

A flight's **spec** is everything that decides what runs and where: the command (a service's
command as its spec holds it), the environment, the labels it requires, its placement (a
runner, a group, the attributes its group must have), the repository and agent, whether it
is attended, its time limit, and a service's spec (environment values as set, port, ready
command, its settings). What only orders or books it (priority, the output cap, a service's
generation number) is not in it: changing those runs nothing new
(``gg.domain.flight_spec.RUNS_NOTHING_NEW``); every other setting of the spec is.

The **digest** is SHA-256 over the canonical JSON of the spec (keys sorted, no spaces,
UTF-8), written ``sha256:<64 hex>``. An approval records the digest it was given for; a
spec that changed has another digest, so an approval never carries over to what it did not
see (docs/approvals.md).
"""

from __future__ import annotations

import hashlib
import json
import shlex
from dataclasses import fields
from typing import Any

from gg.domain.flight_spec import RUNS_NOTHING_NEW, FlightSpec
from gg.domain.flights import Flight

PREFIX = "sha256:"
SHORT = 19  # "sha256:" and 12 hex digits: what a table shows


def what_runs(flight: FlightSpec | Flight) -> dict[str, Any]:
    """The spec of ``flight`` (its settled :class:`FlightSpec`, or a :class:`Flight`, read
    as its spec), as plain JSON values: every setting but those that run nothing new
    (``RUNS_NOTHING_NEW``), so a setting added to the spec is approved with the rest."""
    spec = flight.spec if isinstance(flight, Flight) else flight
    out = {f.name: getattr(spec, f.name) for f in fields(spec)
           if f.name not in RUNS_NOTHING_NEW}
    del out["labels"]  # they are in ``requires``, with the environment's
    service = dict(spec.service) if spec.service else None
    if service is not None:
        service.pop("generation", None)
        service.pop("command", None)
        for kept in ("last_ready", "failed"):  # what ran, recorded; not what runs
            service.pop(kept, None)
    command = spec.service["command"] if spec.service and "command" in spec.service else spec.command
    out.update(command=list(command), requires=spec.requires, where=dict(spec.where),
               attended=bool(spec.attended), service=service)
    return out


def canonical(spec: dict[str, Any]) -> bytes:
    return json.dumps(spec, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


def digest(spec: dict[str, Any]) -> str:
    """``sha256:`` and the hex SHA-256 of the spec's canonical JSON."""
    return PREFIX + hashlib.sha256(canonical(spec)).hexdigest()


def short(value: str | None) -> str:
    """A digest as a table shows it (the full one is in --json)."""
    return value[:SHORT] if value else "-"


def _shown(value: Any) -> str:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "`" + shlex.join(value) + "`"
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in sorted(value.items())) or "nothing"
    return "none" if value is None else f"{value}"


def changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """What differs between two specs, one plain sentence each, in a fixed order (the command
    first; a service's environment values one by one, as they are set)."""
    out = []
    for key in ("command", "environment", "requires", "runner", "group", "where", "repo",
                "agent", "attended", "kind", "timeout"):
        if before.get(key) != after.get(key):
            out.append(f"{key}: {_shown(before.get(key))} -> {_shown(after.get(key))}")
    old, new = before.get("service") or {}, after.get("service") or {}
    old_env, new_env = old.get("env") or {}, new.get("env") or {}
    for name in sorted(set(old_env) | set(new_env)):
        if name not in new_env:
            out.append(f"env {name}: unset (was {old_env[name]!r})")
        elif old_env.get(name) != new_env[name]:
            was = f" (was {old_env[name]!r})" if name in old_env else ""
            out.append(f"env {name}: set to {new_env[name]!r}{was}")
    for key in sorted((set(old) | set(new)) - {"env"}):
        if old.get(key) != new.get(key):
            out.append(f"service {key}: {_shown(old.get(key))} -> {_shown(new.get(key))}")
    return out
