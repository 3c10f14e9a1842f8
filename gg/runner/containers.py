"""What the runner asks a container engine once a flight's container ended.

A container flight's container is started without ``--rm`` (gg.runner.isolation): once its
engine client returned, the runner reads whether the kernel killed it over its memory limit,
then removes it (``Launch.discard``). The engine says so in ``inspect``'s ``.State.OOMKilled``
(docker; podman from 5.0). podman 4 never sets it there: its conmon, told of the kill through
the container's memory cgroup, writes an ``oom`` file into its own working directory, which
is the client's, which is the launch's private directory (the runner's own, 0700); that mark
counts too. Either way the flight reads ``killed: out of memory (limit 256M)``, as on every
other level (gg.domain.limits.oom_reason).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Protocol


class Launch(Protocol):
    """What is read of a ``gg.runner.isolation.Launch`` (which calls this module: it is not
    imported back)."""

    @property
    def argv(self) -> list[str]: ...

    @property
    def env(self) -> dict[str, str]: ...

    @property
    def private(self) -> Path | None: ...

    @property
    def container_name(self) -> str | None: ...

    @property
    def cleanup(self) -> list[str] | None: ...

ASK_TIMEOUT = 30.0  # seconds an engine's inspect or rm may take on a busy host
OOM_MARK = "oom"  # conmon's file, in its working directory


def out_of_memory(launch: Launch) -> bool:
    """The container of ``launch`` (ended, not removed yet) was killed over its memory limit."""
    if launch.private is not None and (launch.private / OOM_MARK).exists():
        return True
    if launch.container_name is None:
        return False
    try:
        done = subprocess.run([launch.argv[0], "inspect", "--format", "{{.State.OOMKilled}}",
                               launch.container_name], env=launch.env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=ASK_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and done.stdout.strip() == "true"


def remove(launch: Launch) -> None:
    """The container of ``launch`` gone (its cleanup: ``ENGINE rm --force NAME``); nothing
    happens when it is gone already or the engine is not there."""
    if not launch.cleanup:
        return
    try:
        subprocess.run(launch.cleanup, env=launch.env, stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=ASK_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired):
        pass
