"""Pool strategies: how a pool is furnished and bounded (SPEC 12).

A strategy is written as YAML (read by ``gg.airspace.strategies``) and stored by the control
plane as ``Strategy.to_dict()``. The pool planner reads it; ``active_at`` is the one place that
says whether the pool may start machines at a given moment, so the planner, ``gg plan`` and the
waiting sentence agree about active hours.

Active hours are a daily window in a named time zone, start inclusive and end exclusive:
``08:00-20:00 Europe/Berlin`` is open from 08:00 up to (not including) 20:00 Berlin wall-clock
time, whatever the season. A window whose end is before its start crosses midnight:
``22:00-06:00 UTC`` is open late evening and early morning. No window means always open.
The window type and its parser are the pool planner's (``gg.domain.pool_planner``), so the
file, the stored strategy and the plan read active hours one way.

Only the standard library (``zoneinfo`` reads the system's or the tzdata package's zone files).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gg.domain.pool_planner import ActiveHours, PoolSpec, parse_active_hours
from gg.domain.pool_scaling import Scale

__all__ = [
    "DRIVERS",
    "ActiveHours",
    "Bounds",
    "Build",
    "Image",
    "Inventory",
    "Strategy",
    "active_at",
    "digest_problem",
    "parse_active_hours",
]

DRIVERS = ("process", "podman", "docker", "command")
# ``command.join-within``: how long a machine the create command made may take to check in
# (its one-use member code lives as long). A cloud machine may take minutes to boot; a code
# that stays spendable for more than an hour is a code left lying around.
JOIN_WITHIN_LEAST = 1.0
JOIN_WITHIN_MOST = 3600.0
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


def digest_problem(digest: str) -> str | None:
    """Why ``digest`` is not a pinned image digest (``sha256:`` + 64 lowercase hex), or None."""
    if _DIGEST.match(digest):
        return None
    shown = digest if len(digest) <= 24 else digest[:23] + "…"
    return f'must be sha256: followed by 64 lowercase hex digits (got "{shown}")'


def command_problem(name: str) -> str | None:
    """Why ``name`` may not name an executable in a maintainer's commands directory (None: it
    may): a plain file name, so the strategy picks one of the host's scripts, never a path."""
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        return f"must be a file name in the maintainer's commands directory (got {name!r})"
    return None


@dataclass(frozen=True)
class Inventory:
    """The pool's name and how many members it keeps (``size``) and keeps ready (``warm``)."""

    name: str
    size: int
    warm: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "size": self.size, "warm": self.warm}


@dataclass(frozen=True)
class Image:
    """What members start from; ``digest`` stays None until ``gg strategy build`` pins it."""

    ref: str
    digest: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"ref": self.ref, "digest": self.digest}


@dataclass(frozen=True)
class Bounds:
    """Limits the planner never crosses: running members and the hours it may start them."""

    pool_max: int
    active_hours: ActiveHours | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"pool_max": self.pool_max,
                "active_hours": str(self.active_hours) if self.active_hours else None}


@dataclass(frozen=True)
class Build:
    """Where ``gg strategy build`` finds the image's source, as written in the file."""

    context: str

    def to_dict(self) -> dict[str, Any]:
        return {"context": self.context}


@dataclass(frozen=True)
class Strategy:
    """One pool strategy as validated; ``name`` is the file stem or the name given to apply."""

    name: str
    environment: str
    inventory: Inventory
    image: Image
    bounds: Bounds
    build: Build | None = None
    driver: str = "process"
    group: str = "default"  # the runner group its members join (gg.domain.groups)
    scale: Scale | None = None  # grow and shrink from demand (gg.domain.pool_scaling)
    # driver command: the executables' names ({create, delete, list}) in the maintainer's
    # commands directory (gg.pool.drivers.command)
    command: dict[str, str] | None = None
    # driver command: seconds a machine it made has to check in (None: MEMBER_CODE_TTL)
    join_within: float | None = None

    def pool_spec(self) -> PoolSpec:
        """The numbers the pool planner needs, named as it names them."""
        return PoolSpec(name=self.inventory.name, environment=self.environment,
                        size=self.inventory.size, warm=self.inventory.warm,
                        pool_max=self.bounds.pool_max, active_hours=self.bounds.active_hours,
                        digest=self.image.digest, scale=self.scale)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able, with the YAML keys' ``-`` turned into ``_``."""
        return {
            "name": self.name,
            "environment": self.environment,
            "inventory": self.inventory.to_dict(),
            "image": self.image.to_dict(),
            "bounds": self.bounds.to_dict(),
            "build": self.build.to_dict() if self.build else None,
            "driver": self.driver,
            "group": self.group,
            "scale": self.scale.to_dict() if self.scale else None,
            "command": dict(self.command) if self.command else None,
            "join_within": self.join_within,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Strategy:
        """The inverse of ``to_dict`` for data gg stored itself (not a validator)."""
        inventory = data["inventory"]
        image = data["image"]
        bounds = data.get("bounds") or {}
        hours = bounds.get("active_hours")
        build = data.get("build")
        return cls(
            name=str(data["name"]),
            environment=str(data["environment"]),
            inventory=Inventory(name=str(inventory["name"]), size=int(inventory["size"]),
                                warm=int(inventory.get("warm", 0))),
            image=Image(ref=str(image["ref"]), digest=image.get("digest")),
            bounds=Bounds(pool_max=int(bounds.get("pool_max", inventory["size"])),
                          active_hours=parse_active_hours(hours) if hours else None),
            build=Build(context=str(build["context"])) if build else None,
            driver=str(data.get("driver", "process")),
            group=str(data.get("group", "default")),
            scale=Scale.from_dict(data["scale"]) if data.get("scale") else None,
            command={str(k): str(v) for k, v in data["command"].items()}
            if data.get("command") else None,
            join_within=(float(data["join_within"]) if data.get("join_within") is not None
                         else None),
        )


def active_at(bounds: Bounds, now_epoch_seconds: float) -> bool:
    """May the pool start machines at this moment? Always, when no active hours are set."""
    if bounds.active_hours is None:
        return True
    return bounds.active_hours.contains(now_epoch_seconds)
