"""The gg trees of this host: where gg processes keep state, config and data, recorded by them.

A runner hides every gg tree on its host from its flights' sandboxes (docs/isolation.md,
"What is masked"). The roots platformdirs gives each home are known without asking anyone;
a directory named by a flag or a variable (``gg server --data-dir``, ``GG_STATE_DIR=state``)
is known only to the process given it. So every gg process that makes or uses such a
directory records its absolute real path here, in a **registry** of its own user: a text
file, one path a line, at ``<home>/.local/state/gg/trees`` (the home from the password
database, not ``$HOME``; ``GG_TREES`` names another file, the same for every process that
must agree, as the test suite does).

A runner reads the registries of root and of its own user only, and only when the file is
owned by one of them and nobody else may write it: nothing another user, or any process's
environment, supplies decides what a flight sees. A registry lies inside the platformdirs
state root of its home, which every sandbox masks, so a flight can neither read nor write it.

Recording is best-effort (a read-only home records nothing, and says nothing): it rewrites
the file under an exclusive lock, dropping the paths that no longer exist.
"""

from __future__ import annotations

import fcntl
import os
import pwd
import stat
from collections.abc import Iterable
from pathlib import Path

ENV_TREES = "GG_TREES"
REGISTRY = Path(".local/state/gg/trees")  # under a home


def registry(uid: int | None = None) -> Path | None:
    """The registry of ``uid`` (default: this process's user), or None when it has no home."""
    if os.environ.get(ENV_TREES):
        return Path(os.path.abspath(os.environ[ENV_TREES]))
    try:
        home = pwd.getpwuid(os.geteuid() if uid is None else uid).pw_dir
    except KeyError:
        return None
    if not home or home == "/":
        return None
    return Path(home) / REGISTRY


def record(*paths: Path | str) -> bool:
    """Add ``paths`` (made absolute and real) to this user's registry; False when it could
    not be written."""
    where = registry()
    if where is None:
        return False
    wanted = [os.path.realpath(os.path.abspath(p)) for p in paths]
    try:
        where.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(where, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with os.fdopen(os.dup(fd), "r", encoding="utf-8", errors="replace") as fh:
            known = [line for line in fh.read().splitlines() if line.startswith("/")]
        kept = [p for p in dict.fromkeys(known) if os.path.isdir(p)]
        new = list(dict.fromkeys([*kept, *wanted]))
        if new != known:
            tmp = where.with_name(f".{where.name}.{os.getpid()}")
            out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(out, "w", encoding="utf-8") as fh:
                fh.write("".join(f"{p}\n" for p in new))
            os.replace(tmp, where)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # the lock goes with it


def recorded(uids: Iterable[int] | None = None) -> list[Path]:
    """Every path recorded in the trusted registries: root's and this process's user's."""
    trusted = {0, os.geteuid()}
    found: list[Path] = []
    for uid in (sorted(trusted) if uids is None else uids):
        where = registry(uid)
        if where is None:
            continue
        try:
            fd = os.open(where, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            info = os.fstat(fd)
            if info.st_uid not in trusted or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) \
                    or not stat.S_ISREG(info.st_mode):
                continue  # written by someone a runner does not take orders from
            with os.fdopen(os.dup(fd), "r", encoding="utf-8", errors="replace") as fh:
                text = fh.read()
        except OSError:
            continue
        finally:
            os.close(fd)
        found += [Path(line) for line in text.splitlines() if line.startswith("/")]
    return list(dict.fromkeys(found))
