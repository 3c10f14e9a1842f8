"""Service flights: a command its runner keeps running (SPEC 18, docs/services.md).

A service is a flight of kind ``service`` whose ``service`` field is its **spec**::

    {"generation": 1, "command": [...], "env": {K: V}, "port": P | None,
     "ready_cmd": CMD | None, "socket_activation": bool, "backoff": s, "backoff_cap": s, "ready_timeout": s,
     "stop_grace": s, "degraded_after": n}

The control plane owns the spec (``gg service update`` raises its generation); the runner
learns it when it takes the flight and with every lease renewal, and reconciles: it keeps the
newest generation it has seen running, restarting it on exit after :func:`restart_delay`.
What happened is reported as facts of kind ``note`` with a ``service`` word in their body
(``started``, ``ready``, ``exited``, ``switched``, ``update_failed``, ``port_busy``
while its runner cannot listen on its ``--port`` and waits to, and ``port_taken`` when something
else listened on a generation's ``$PORT`` first and it was started again on another), and
:func:`status` reads a service's state back from them, for ``gg services``.

A service never lands: it runs until it is cancelled (or its lease is lost, when it is
re-placed like any flight). The control plane keeps in the spec what its placements reported
(:func:`remember`): ``last_ready`` (the generation, command and environment that last got
ready) and ``failed`` (generations that never did), so a service re-placed after a failed
update starts from the generation that served, not the one that never got ready
(:func:`to_start`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

STARTED, READY, EXITED, SWITCHED, UPDATE_FAILED, PORT_BUSY, PORT_TAKEN = (
    "started", "ready", "exited", "switched", "update_failed", "port_busy", "port_taken")
KIND = "service"
# A generation whose $PORT something else took first is started again at once on another
# port this many times in a row; after that each start waits the restart backoff.
REPICKS_AT_ONCE = 3

# The runner's own setting (its environment): where each generation's $PORT is drawn from.
ENV_SERVICE_PORTS = "GG_SERVICE_PORTS"
# Above Linux's default ephemeral range (32768-60999), so a port the kernel hands out (a
# connection's, a bind to port 0) never tells what a generation gets, and below Kubernetes'
# node ports (30000-32767) and the registered ports of common servers.
DEFAULT_SERVICE_PORTS = (61000, 65535)


def port_range(value: str | None) -> tuple[int, int]:
    """``GG_SERVICE_PORTS`` (``LOW-HIGH``) as (low, high); the default when unset; ValueError
    with a sentence when it is not a range of ports."""
    if value is None or not value.strip():
        return DEFAULT_SERVICE_PORTS
    low, sep, high = value.strip().partition("-")
    try:
        first, last = int(low), int(high)
    except ValueError:
        first = last = 0
    if not sep or not 1024 <= first <= last <= 65535:
        raise ValueError(f"{ENV_SERVICE_PORTS} must be LOW-HIGH, ports from 1024 to 65535 "
                         f"with LOW <= HIGH (got {value!r})")
    return first, last


def draw_from(wanted: tuple[int, int], ephemeral: tuple[int, int] | None) -> list[range]:
    """The ports of ``wanted`` that the kernel never hands out by itself (outside its
    ``ephemeral`` range, ``ip_local_port_range``); ``wanted`` whole when all of it lies inside
    (a host that gave the kernel every port: a taken port is then only re-picked)."""
    low, high = wanted
    if ephemeral is None:
        return [range(low, high + 1)]
    outside = [range(low, min(high, ephemeral[0] - 1) + 1),
               range(max(low, ephemeral[1] + 1), high + 1)]
    outside = [r for r in outside if len(r)]
    return outside or [range(low, high + 1)]


def spec_problem(port: int | None, ready_cmd: str | None) -> str | None:
    """Why a service's options are refused, or None."""
    if port is not None and not 1 <= port <= 65535:
        return f"--port must be from 1 to 65535 (got {port})"
    if ready_cmd is not None and not ready_cmd.strip():
        return "--ready-cmd must not be empty"
    return None


def env_problem(env: dict[str, str]) -> str | None:
    for key in env:
        if not key or not (key[0].isalpha() or key[0] == "_") or \
                not all(c.isalnum() or c == "_" for c in key):
            return f"--set {key}=…: a variable name is letters, digits and _, not starting with a digit"
        if key in ("PORT",) or key.startswith("GG_"):
            return f"--set {key}=…: {key} is set by the runner"
    return None


def restart_delay(consecutive: int, base: float, cap: float) -> float:
    """Seconds to wait before restart number ``consecutive`` (1, 2, …) of a service that keeps
    exiting: ``base`` doubled each time, never more than ``cap``."""
    if consecutive <= 0:
        return 0.0
    return min(cap, base * 2.0 ** (consecutive - 1))


@dataclass(frozen=True)
class Status:
    generation: int | None  # the generation serving (or last started) on its runner
    restarts: int  # restarts since it was placed on its runner
    ready: bool
    started_at: float | None  # when the serving generation started (uptime counts from here)
    last_exit: int | None
    health: str  # "ok", "starting", "degraded: …", "waiting: port P cannot be listened on …"
    update: str | None  # "failed: …" when the latest update never got ready


def status(facts: list[dict[str, Any]], *, epoch: int, wanted: int, degraded_after: int) -> Status:
    """A service's state from its facts of lease ``epoch`` (older placements are history)."""
    generation = None
    restarts = consecutive = 0
    ready = False
    started_at = last_exit = None
    update = busy = None
    for fact in facts:
        body = fact.get("body") or {}
        word = body.get("service")
        if fact.get("epoch") != epoch or word is None:
            continue
        if word == PORT_BUSY:
            busy = body.get("reason") or "its port is in use"
        elif word == STARTED and (generation is None or body.get("generation") == generation):
            generation, busy = body.get("generation"), None
            started_at, ready = fact.get("at"), False
        elif word == READY and body.get("generation") == generation:
            ready, consecutive = True, 0
        elif word == EXITED and body.get("generation") == generation:
            restarts += 1
            consecutive = body.get("consecutive", consecutive + 1)
            last_exit, ready = body.get("exit_code"), False
        elif word == SWITCHED:
            generation, started_at = body.get("generation"), body.get("started_at", fact.get("at"))
            ready, consecutive, update = body.get("ready", True), 0, None
        elif word == UPDATE_FAILED:
            update = f"failed: generation {body.get('generation')} {body.get('reason')}"
    if wanted and generation is not None and wanted > generation and update is None:
        update = f"pending: generation {wanted}"
    if consecutive >= degraded_after:
        health = (f"degraded: exited {consecutive} times in a row, last exit "
                  f"{'signal' if last_exit is not None and last_exit < 0 else 'code'} "
                  f"{abs(last_exit) if last_exit is not None else '?'}")
    elif busy is not None:
        health = f"waiting: {busy}"
    elif ready:
        health = "ok"
    else:
        health = "starting"
    return Status(generation, restarts, ready, started_at, last_exit, health, update)


# What the spec keeps of its history: records of what ran, not settings of what runs.
HISTORY = ("last_ready", "failed")


def remember(spec: dict[str, Any], facts: list[dict[str, Any]]) -> dict[str, Any] | None:
    """``spec`` with what a placement reported (a generation ready, an update that never got
    ready), or None when nothing of it changed."""
    new = dict(spec)
    for fact in facts:
        body = fact.get("body") or {}
        word, generation = body.get("service"), body.get("generation")
        if not isinstance(generation, int):
            continue
        if word == READY and generation == new["generation"] and \
                (new.get("last_ready") or {}).get("generation") != generation:
            new["last_ready"] = {"generation": generation, "command": list(new["command"]),
                                 "env": dict(new.get("env") or {})}
        elif word == UPDATE_FAILED and generation not in new.get("failed", []):
            new["failed"] = sorted([*new.get("failed", []), generation])
    return new if new != spec else None


def to_start(spec: dict[str, Any]) -> dict[str, Any]:
    """What a placement starts first: the newest generation, unless it never got ready and an
    older one did; then that one (the newest stays wanted, and is not tried again)."""
    last = spec.get("last_ready")
    if spec["generation"] in spec.get("failed", []) and last \
            and last.get("generation", spec["generation"]) < spec["generation"]:
        return {**spec, "generation": last["generation"], "command": list(last["command"]),
                "env": dict(last.get("env") or {})}
    return spec
