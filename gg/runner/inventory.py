"""What the host is (inventory, sent when it changes) and how it is doing (readings)."""

from __future__ import annotations

import os
import platform
import socket
import sys
import time

import psutil

from gg import __version__, build_commit
from gg.domain.machine_console import FEATURE as CONSOLE

_STARTED_AT = time.time()


def inventory(state_dir: str, size: dict | None = None) -> dict:
    """``size``: the cores and memory this runner offers its flights when its operator set
    them (``gg runner up --cpus --memory``, placement by size: gg.domain.sizes); without it
    the host's ``cpu_count`` and ``memory_total`` are its size."""
    addresses = sorted({
        a.address for addrs in psutil.net_if_addrs().values() for a in addrs
        if a.family in (socket.AF_INET, socket.AF_INET6)
    })
    return {
        "hostname": socket.gethostname(),
        "os": platform.system().lower(),
        "arch": platform.machine(),
        "cpu_count": os.cpu_count() or 1,
        "memory_total": psutil.virtual_memory().total,
        "python": platform.python_version(),
        "gg_version": __version__,
        "gg_commit": build_commit(),
        "executable": sys.executable,
        "addresses": addresses,
        "pid": os.getpid(),
        "started_at": _STARTED_AT,
        "state_dir": state_dir,
        "features": [CONSOLE],  # what this gg serves beyond flights (docs/console.md)
        **({"size": dict(size)} if size else {}),
    }


def readings() -> dict:
    memory = psutil.virtual_memory()
    return {"cpu_percent": psutil.cpu_percent(interval=None), "memory_percent": memory.percent,
            "memory_available": memory.available}


READINGS_EVERY = 1.0  # seconds: a busy runner claims many times a second


class Readings:
    """The host's readings, taken at most once every ``every`` seconds: a claim carries them
    each time, and a runner flying many short flights claims far more often than the readings
    change (``cpu_percent`` is then also measured over a second, not since the last claim)."""

    def __init__(self, every: float = READINGS_EVERY, take=readings,
                 clock=time.monotonic) -> None:
        self.every = every
        self._take, self._clock = take, clock
        self._last: tuple[float, dict] | None = None

    def __call__(self) -> dict:
        now = self._clock()
        last = self._last
        if last is None or now - last[0] >= self.every or now < last[0]:
            last = self._last = (now, self._take())
        return dict(last[1])
