"""The flight's environment reaches only its command (docs/isolation.md, "The flight's
environment").

What builds a sandbox (bubblewrap) runs with the runner's own environment (:func:`runner_env`);
the command's is handed over on fd ``HANDED_FD`` (``Launch.handed``), never on a command line
(``/proc/PID/cmdline`` is readable by every process of the host) nor in bubblewrap's own
``/proc/PID/environ``. Who applies it depends on who starts the command:

- A runner that is not root: bwrap reads it as ``--args`` (:func:`handed_env`: ``--clearenv``,
  one ``--setenv`` a variable) and applies it as it execs the command, which runs as the
  runner's own uid, with nothing more than the runner has.
- A root runner: what bwrap execs is ``setpriv``, still uid 0 and holding CAP_SETUID, SETGID
  and SETPCAP until it takes the flight identity; a flight's ``LD_PRELOAD`` applied there
  would load into host root. So bwrap gives setpriv ``TRUSTED_PATH`` and nothing else
  (:func:`before_drop`), and puts the handed bytes, ``export K='v'`` lines
  (:func:`environment_file`), read-only at ``ENVIRONMENT_FILE`` inside the sandbox
  (``--ro-bind-data``). Once setpriv took the flight identity, ``/bin/sh`` sources that file
  and execs the command (:func:`after_drop`): the first program that sees any of the flight's
  variables already runs as the flight. A console joining such a flight (nsenter, setpriv)
  gets the same: its shell sources the lines from fd ``HANDED_FD`` itself (``Launch.sourced``).

A container (isolation ``container``) is the same: the engine's client (podman, docker) runs
with the runner's own environment, as bwrap does, so a flight's ``LD_PRELOAD`` or ``PATH``
never steers it. The flight's variables are the same ``export K='v'`` lines, written to a
file in a private directory (:func:`write_private`), bound read-only at ``ENVIRONMENT_FILE``
in the container, and sourced by the container's ``/bin/sh`` before it execs the command
(:func:`sourcing`). An engine's own ``--env-file`` cannot carry them: docker's format has no
multi-line values, and podman's changed between releases (from 4.7 it cut a value at ``#``).

A name the shell cannot export (``BASH_FUNC_f%%``, inherited from a runner's own environment)
is left out of the file: a flight's and a service's own names are shell names already
(``gg.domain.services.env_problem``).
"""

from __future__ import annotations

import os
import re
import shlex
import tempfile
from collections.abc import Mapping
from pathlib import Path

HANDED_FD = 3  # where bwrap reads the command's environment: see Launch.handed
# All that setpriv (uid 0, before the drop) and the sourcing shell start with.
TRUSTED_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
# Inside a root runner's sandbox: the command's environment, read-only, as the flight may read it.
ENVIRONMENT_FILE = "/.gg-environment"
SHELL = "/bin/sh"  # bound read-only in every sandbox (the system directories)
# A console joining a root runner's flight sources its own, still on fd 3 (nsenter and setpriv
# leave it open), and closes it for the command.
HANDED_SOURCE = f"/proc/self/fd/{HANDED_FD}"
_SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def runner_env(keeping: tuple[str, ...] = ()) -> dict[str, str]:
    """What bwrap runs with: the runner's own environment, without gg's variables (a token),
    but for those named in ``keeping`` (a flight's keeps ``GG_IMAGE_ROOT``)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("GG_") or k in keeping}


def handed_env(env: Mapping[str, str]) -> bytes:
    """``env`` as bwrap's ``--args`` (NUL-separated): the command starts with exactly it."""
    args = ["--clearenv"]
    for key, value in env.items():
        if key and "=" not in key and "\0" not in key and "\0" not in value:
            args += ["--setenv", key, value]
    return b"".join(os.fsencode(arg) + b"\0" for arg in args)


def environment_file(env: Mapping[str, str], *, unset_path: bool = True) -> bytes:
    """``env`` as the lines a shell sources (every value single-quoted, so a newline or a
    ``$(…)`` in it is only text): the command starts with it, the shell's own ``PATH``
    unset when ``env`` has none (unless not ``unset_path``: a container keeps its image's)."""
    lines = [] if "PATH" in env or not unset_path else ["unset PATH"]
    for key, value in env.items():
        if _SHELL_NAME.match(key) and "\0" not in value:
            lines.append(f"export {key}={shlex.quote(value)}")
    return os.fsencode("\n".join(lines) + "\n")


def before_drop() -> list[str]:
    """bwrap's options for a root runner's sandbox: what it execs (setpriv) gets only
    ``TRUSTED_PATH``."""
    return ["--clearenv", "--setenv", "PATH", TRUSTED_PATH]


def bound_file() -> list[str]:
    """bwrap's options that put the handed bytes at ``ENVIRONMENT_FILE``, read-only; before
    the root is made read-only (``--remount-ro /``)."""
    return ["--perms", "0444", "--ro-bind-data", str(HANDED_FD), ENVIRONMENT_FILE]


def after_drop(command: list[str], source: str = ENVIRONMENT_FILE) -> list[str]:
    """``command`` started, after setpriv, by a shell that first takes its environment from
    ``source``."""
    return [SHELL, "-c", f'. {source} && exec "$@" {HANDED_FD}<&-', "sh", *command]


def sourcing(command: list[str], source: str = ENVIRONMENT_FILE) -> list[str]:
    """``command`` started by a shell that first takes its environment from ``source`` (a
    container's bound file)."""
    return [SHELL, "-c", f'. {source} && exec "$@"', "sh", *command]


PRIVATE_NAME = "environment"


def write_private(data: bytes, parent: Path | None = None) -> Path:
    """``data`` in a file of a new directory only its owner may enter (0700), under
    ``parent`` (the system's temporary directory when None); the file's path. The file itself
    is 0444: bound into a container it must be readable by whoever the container runs as,
    and the directory keeps everyone else on the host out. Remove the directory (the file's
    parent) once the container ended."""
    if parent is not None:
        parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    folder = Path(tempfile.mkdtemp(prefix="gg-env-", dir=parent))
    path = folder / PRIVATE_NAME
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
        os.fchmod(fh.fileno(), 0o444)
    return path
