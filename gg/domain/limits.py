"""Resource limits: how much CPU, memory and how many processes one flight may use.

A flight asks for limits at ``gg fly --cpus 1.5 --memory 512M --pids 256``; its runner's
policy (``gg runner policy R --cpus/--memory/--pids`` for defaults, ``--max-cpus/
--max-memory/--max-pids`` for maximums, or its fleet profile's ``policy:`` block) fills in
what it did not ask and caps what it did. The runner enforces the settled limits with
cgroups (:mod:`gg.runner.cgroups`): ``cpu`` (a quota of ``cpus`` cores per period),
``memory`` (a hard limit; past it the kernel kills the flight, and it fails with
:func:`oom_reason`) and ``pids`` (forks past it fail).

Where the limits come from, lowest first (each later layer decides only what it sets)::

    1. nothing                       no limit: the flight may use the whole machine
    2. the runner's policy defaults  cpus / memory / pids
    3. what the flight asked         gg fly --cpus --memory --pids
    and over everything, the runner policy's maximums (max_cpus / max_memory / max_pids):
    a flight that asks for more is refused, never cut down quietly.

Pure: no I/O; sizes are bytes, cpus are cores (1.5 = one and a half).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

NAMES = ("cpus", "memory", "pids")
MAX_CPUS = 1024.0
MAX_PIDS = 4_194_304  # the kernel's own pid_max ceiling
MIN_MEMORY = 1024 * 1024  # below a megabyte not even a shell starts
MAX_MEMORY = 2 ** 50
# The cgroup controller each limit needs (cpu seconds are read from cpuacct on v1).
CONTROLLER = {"cpus": "cpu", "memory": "memory", "pids": "pids"}

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1024 ** 2, "mb": 1024 ** 2,
          "mib": 1024 ** 2, "g": 1024 ** 3, "gb": 1024 ** 3, "gib": 1024 ** 3,
          "t": 1024 ** 4, "tb": 1024 ** 4, "tib": 1024 ** 4}


def parse_memory(text: str | int) -> int:
    """Bytes of ``--memory`` (``512M``, ``2G``, ``1.5g``: units of 1024); ValueError (one
    sentence) when it is not a size a flight can have."""
    if isinstance(text, bool):
        raise ValueError(f"memory must be a size like 512M or 2G, not {text!r}")
    if isinstance(text, int):
        size = text
    else:
        match = _SIZE.match(str(text))
        unit = match.group(2).lower() if match else None
        if match is None or unit not in _UNITS:
            raise ValueError(f"memory must be a size like 512M or 2G, not {text!r}")
        size = int(float(match.group(1)) * _UNITS[unit])
    if not MIN_MEMORY <= size <= MAX_MEMORY:
        raise ValueError(f"memory must be between 1M and {memory_text(MAX_MEMORY)}, "
                         f"not {memory_text(size) if size > 0 else size}")
    return size


def parse_cpus(text: str | float) -> float:
    """Cores of ``--cpus`` (``0.5``, ``1.5``, ``4``); ValueError (one sentence) otherwise."""
    try:
        if isinstance(text, bool):
            raise ValueError
        cpus = float(text)
    except (TypeError, ValueError):
        raise ValueError(f"cpus must be a number of cores like 0.5 or 2, not {text!r}") from None
    if not 0.01 <= cpus <= MAX_CPUS:  # NaN fails this too
        raise ValueError(f"cpus must be between 0.01 and {MAX_CPUS:g}, not {text}")
    return round(cpus, 3)


def parse_pids(text: str | int) -> int:
    """Processes of ``--pids`` (a whole number, at least 1)."""
    if isinstance(text, bool):
        raise ValueError(f"pids must be a whole number of processes, not {text!r}")
    if isinstance(text, int):
        pids = text
    elif re.fullmatch(r"\s*[+-]?\d+\s*", str(text)):
        pids = int(str(text))
    else:
        raise ValueError(f"pids must be a whole number of processes, not {text!r}")
    if not 1 <= pids <= MAX_PIDS:
        raise ValueError(f"pids must be between 1 and {MAX_PIDS}, not {pids}")
    return pids


_PARSE: dict[str, Callable[[Any], Any]] = {"cpus": parse_cpus, "memory": parse_memory,
                                           "pids": parse_pids}


def memory_text(n: int) -> str:
    """Bytes as ``--memory`` takes them: 512M, 2G, 1536K, or bytes."""
    for unit, size in (("T", 1024 ** 4), ("G", 1024 ** 3), ("M", 1024 ** 2), ("K", 1024)):
        if n >= size and n % size == 0:
            return f"{n // size}{unit}"
    if n >= 1024 ** 2:
        return f"{n / 1024 ** 2:.1f}M"
    return f"{n}B"


def value_text(name: str, value: float | int) -> str:
    if name == "memory":
        return memory_text(int(value))
    if name == "cpus":
        return f"{value:g}"
    return str(value)


@dataclass(frozen=True)
class Limits:
    """A flight's limits (None: no limit of that kind)."""

    cpus: float | None = None
    memory: int | None = None
    pids: int | None = None

    def __bool__(self) -> bool:
        return any(getattr(self, n) is not None for n in NAMES)

    def to_dict(self) -> dict[str, Any]:
        """Only the limits set: ``{}`` for none."""
        return {n: getattr(self, n) for n in NAMES if getattr(self, n) is not None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Limits:
        """Read limits (numbers, or ``memory`` as ``512M``); ValueError (one sentence)."""
        if not data:
            return cls()
        if not isinstance(data, Mapping):
            raise ValueError("limits must be a mapping of cpus, memory and pids")
        unknown = sorted(str(k) for k in data if k not in NAMES)
        if unknown:
            raise ValueError(f"limits are cpus, memory and pids, not {', '.join(unknown)}")
        return cls(**{n: _PARSE[n](data[n]) for n in NAMES if data.get(n) is not None})

    def controllers(self) -> tuple[str, ...]:
        """The cgroup controllers enforcing these limits takes."""
        return tuple(CONTROLLER[n] for n in NAMES if getattr(self, n) is not None)

    def text(self) -> str:
        """``cpus 1.5, memory 512M, pids 256`` (``no limits`` when none is set)."""
        parts = [f"{n} {value_text(n, getattr(self, n))}" for n in NAMES
                 if getattr(self, n) is not None]
        return ", ".join(parts) or "no limits"


def policy_limits(policy: Mapping[str, Any] | None) -> tuple[Limits, Limits]:
    """(defaults, maximums) of a runner's policy as a dict (its ``cpus``/``memory``/``pids``
    and ``max_cpus``/``max_memory``/``max_pids`` keys)."""
    policy = policy or {}
    defaults = Limits.from_dict({n: policy.get(n) for n in NAMES})
    maximums = Limits.from_dict({n: policy.get(f"max_{n}") for n in NAMES})
    return defaults, maximums


def over_maximum(asked: Limits, maximums: Limits, whose: str = "the runner's policy") -> str | None:
    """Why ``asked`` is refused (one sentence), or None: a limit over its maximum."""
    for name in NAMES:
        want, most = getattr(asked, name), getattr(maximums, name)
        if want is not None and most is not None and want > most:
            return (f"--{name} {value_text(name, want)} is more than {whose} allows "
                    f"(at most {value_text(name, most)})")
    return None


def settle(asked: Limits, policy: Mapping[str, Any] | None) -> Limits:
    """The limits a flight runs with on a runner of ``policy``: what it asked, else the
    policy's defaults, each default held under its maximum. ValueError (one sentence) when
    it asked for more than a maximum, or the policy's limits cannot be read."""
    defaults, maximums = policy_limits(policy)
    refusal = over_maximum(asked, maximums)
    if refusal:
        raise ValueError(refusal)
    values = {}
    for name in NAMES:
        value = getattr(asked, name)
        if value is None:
            value = getattr(defaults, name)
            most = getattr(maximums, name)
            if value is not None and most is not None:
                value = min(value, most)
        values[name] = value
    return Limits(**values)


def check_policy(policy: Mapping[str, Any]) -> None:
    """ValueError (one sentence) when a policy's limits cannot be read or a default is over
    its own maximum."""
    defaults, maximums = policy_limits(policy)
    refusal = over_maximum(defaults, maximums, "its maximum")
    if refusal:
        raise ValueError("the policy's default " + refusal.lstrip("-"))


def missing_controller(limits: Limits, available: Mapping[str, Any] | None) -> str | None:
    """The one missing piece when ``limits`` cannot be enforced on a runner whose capability
    report lists ``available`` controllers (``{"memory": "v1", ...}``), else None."""
    available = available or {}
    for controller in limits.controllers():
        if not available.get(controller):
            return f"cgroup controller {controller} not available"
    return None


def oom_reason(memory: int) -> str:
    """The reason a flight killed over its memory limit fails with."""
    return f"killed: out of memory (limit {memory_text(memory)})"


def usage_note(usage: Mapping[str, Any]) -> dict[str, Any] | None:
    """The body of the note a flight's usage is reported in (its cgroups' count: bytes of
    ``peak_memory``, ``cpu_seconds``), shown by ``gg show``; None when nothing was counted."""
    peak, cpu = usage.get("peak_memory"), usage.get("cpu_seconds")
    body: dict[str, Any] = {}
    words = []
    if isinstance(peak, int) and not isinstance(peak, bool):
        body.update(peak_memory=memory_text(peak), peak_memory_bytes=peak)
        words.append(f"peak memory {memory_text(peak)}")
    if isinstance(cpu, (int, float)) and not isinstance(cpu, bool):
        body["cpu_seconds"] = round(float(cpu), 3)
        words.append(f"{float(cpu):.2f} CPU seconds")
    if not words:
        return None
    return {"text": "used " + ", ".join(words), **body}
