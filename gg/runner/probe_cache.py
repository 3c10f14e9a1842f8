"""The dearer answers of a runner's capability probe, kept between starts on one machine.

Asking the container engine (``podman info`` runs its own package queries) and running a
flight-shaped sandbox under runsc cost about 0.8 s of CPU together, on every runner's start.
A machine that starts runners by the hundred (the test suite, a pool's members on one host)
names a folder in ``GG_PROBE_CACHE``; a runner's *first* probe then takes an answer another
runner measured there, when nothing it depends on changed. Unset, every probe measures.

What may be kept, and when it is used:

- only an answer that found the thing usable (an engine that answered, a gvisor flight that
  ran confined): a failure is measured again at every start, so an engine that was only slow
  gets its second chance as before (``gg.runner.loop``), and nothing is kept that a fix of
  the host would have to wait out;
- the key holds what the answer depends on: each executable's path, inode, size and mtime,
  the runner's uid, the flight identity it probed as, and the environment an engine reads
  (``CONTAINERS_*``, ``DOCKER_*``, ``XDG_RUNTIME_DIR``, ``HOME``), with the probe's own
  modules' mtimes; a new binary or another configuration measures again;
- every later probe (the periodic one, the one after a flight could not meet its policy)
  measures and refreshes the folder: a runner never goes on trusting a kept answer;
- the folder must be the runner's own, closed to others (mode 0700, its owner the runner's
  uid), and so must each file: anything else is ignored, so nobody else can plant a report.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Any, Callable, TypeVar

ENV_PROBE_CACHE = "GG_PROBE_CACHE"
# The environment a container engine's answer depends on.
ENGINE_ENV_PREFIXES = ("CONTAINERS_", "DOCKER_", "CONTAINER_")
ENGINE_ENV_NAMES = ("XDG_RUNTIME_DIR", "HOME")
# The modules whose code decides what a probe measures: a change of them measures again.
PROBE_MODULES = ("capabilities.py", "gvisor.py", "isolation.py")

T = TypeVar("T")


def folder() -> Path | None:
    """The probe cache folder, when one is named and is this process's own alone."""
    named = os.environ.get(ENV_PROBE_CACHE)
    if not named:
        return None
    path = Path(named)
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        held = path.lstat()
    except OSError:
        return None
    return path if _own_alone(held) and stat.S_ISDIR(held.st_mode) else None


def _own_alone(held: os.stat_result) -> bool:
    return held.st_uid == os.getuid() and not held.st_mode & 0o077


def _binary(name: str, path: str | None) -> list[Any]:
    found = shutil.which(name, path=path)
    if found is None:
        return [name, None]
    try:
        held = os.stat(found)
    except OSError:
        return [name, found]
    return [name, found, held.st_ino, held.st_size, held.st_mtime_ns]


def key(part: str, binaries: tuple[str, ...], path: str | None, identity: Any) -> str:
    """The name an answer is kept under: everything it depends on, hashed."""
    here = Path(__file__).parent
    modules = []
    for name in PROBE_MODULES:
        try:
            modules.append([name, (here / name).stat().st_mtime_ns])
        except OSError:
            modules.append([name, None])
    env = sorted((k, v) for k, v in os.environ.items()
                 if k.startswith(ENGINE_ENV_PREFIXES) or k in ENGINE_ENV_NAMES)
    described = json.dumps({"part": part, "uid": os.getuid(), "path": path,
                            "identity": repr(identity), "env": env, "modules": modules,
                            "binaries": [_binary(b, path) for b in binaries]}, sort_keys=True)
    return part + "-" + hashlib.sha256(described.encode()).hexdigest()[:32]


def kept(name: str, measure: Callable[[], T], *, usable: Callable[[T], bool],
         fresh: bool) -> T:
    """``measure()``'s answer, or the one kept under ``name`` (unless ``fresh``); a usable
    answer just measured is kept for the next runner's start."""
    where = folder()
    if where is None:
        return measure()
    file = where / (name + ".json")
    if not fresh:
        found = _read(file)
        if found is not None:
            return found
    answer = measure()
    if usable(answer):
        _write(where, file, answer)
    return answer


def _read(file: Path) -> Any:
    try:
        with open(file, "rb") as f:
            if not _own_alone(os.fstat(f.fileno())):
                return None
            return json.loads(f.read())["answer"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write(where: Path, file: Path, answer: Any) -> None:
    try:
        handle, scratch = tempfile.mkstemp(dir=where, prefix=".probe-")
        with os.fdopen(handle, "w") as f:
            json.dump({"answer": answer}, f)
        os.replace(scratch, file)  # whole or not at all, for a runner starting beside us
    except OSError:
        pass  # a cache that cannot be written only costs the next start its probe
