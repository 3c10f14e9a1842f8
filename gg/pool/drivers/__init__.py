"""Drivers: how a maintainer makes, checks and removes members on its host.

Every driver keeps the same contract, so the maintainer loop never knows which one runs:

- ``problem()``: why the driver cannot work on this host (no engine answers), or None;
- ``prepare(digest, ref)``: make sure the pinned image is here, or raise :class:`DriverError`
  before the control plane is asked to start anything;
- ``start(launch)``: a member from the pinned image, given its one-time code, running
  ``gg runner up --once`` (it takes one flight and exits);
- ``reset(launch)``: stop it, throw away everything it held, start it fresh from the image
  with a new code (the same member, a new cycle);
- ``remove(member_id)``: stop it and throw away everything it held;
- ``running(member_id)``: whether its process (or container) runs;
- ``members()``: the member ids this driver holds on this host, running or not, so a
  restarted maintainer adopts them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gg.pool.drivers.contract import Driver, DriverError, MemberLaunch, check_member_id

__all__ = ["DRIVERS", "Driver", "DriverError", "MemberLaunch", "check_member_id", "make_driver"]

DRIVERS = ("process", "podman", "docker", "command")


def make_driver(name: str, *, pool: str, root: Path, images_dir: Path,
                hide: Sequence[Path] = (), command: dict[str, str] | None = None,
                commands_dir: Path | None = None) -> Driver:
    """The driver a strategy names, keeping its members under ``root`` (process) or labelled
    with the pool's name (podman, docker). ``hide``: the maintainer's own directories, which a
    process member's sandboxed flights must not see (a container member sees of the host's
    file system only its system directories, Python and gg, read-only, and only when its
    image was built here)."""
    if name == "process":
        from gg.pool.drivers.process import ProcessDriver

        return ProcessDriver(root, images_dir, hide=hide)
    if name in ("podman", "docker"):
        from gg.pool.drivers.container import ContainerDriver

        return ContainerDriver(name, pool, images_dir=images_dir)
    if name == "command":
        from gg.pool.drivers.command import CommandDriver

        return CommandDriver(pool, command or {}, commands_dir)
    raise DriverError(f"no driver {name!r}; a strategy's driver is one of {', '.join(DRIVERS)}")
