"""A flight's artifacts on the runner: ``$GG_ARTIFACTS`` made, uploaded, and ``$GG_INPUTS``.

Both are directories inside the workspace (``.gg/artifacts``, ``.gg/inputs``), made before
the workspace is handed to the flight's identity, so that the flight owns them whatever its
isolation (a container sees them under its /workspace). When the command ends (landed or
failed) every regular file under ``$GG_ARTIFACTS`` is uploaded under its path there.

The runner reads that directory, which the flight wrote, without following a link: each
directory is opened with ``O_NOFOLLOW`` relative to its parent's descriptor and each file
likewise, so a link swapped in cannot take the runner outside it. A symbolic link there (or
anything but a directory or a regular file) is refused with one sentence and nothing is
uploaded; the flight fails with that sentence. Each file is read, hashed and sent a chunk at
a time. docs/work-graphs.md, "Artifacts".
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path
from typing import Any, Iterator

from gg.client import ApiError, ServerFault, Unreachable
from gg.domain.artifacts import CHUNK, name_problem

FlightRun = Any  # gg.runner.flight.FlightRun, which imports this module

HOME = ".gg"  # inside the workspace
ARTIFACTS = "artifacts"
INPUTS = "inputs"
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class Refused(Exception):
    """What cannot be uploaded or fetched, in one sentence."""


def environment(seen: Path) -> dict[str, str]:
    """The flight's variables, ``seen``: the workspace as the flight sees it."""
    return {"GG_ARTIFACTS": str(seen / HOME / ARTIFACTS), "GG_INPUTS": str(seen / HOME / INPUTS)}


def prepare(run: FlightRun, workspace: Path) -> str | None:
    """Before the hand-over: the two directories, and the inputs fetched into the second
    (None), or why the flight cannot start (its inputs could not be fetched whole)."""
    home = workspace / HOME
    home.mkdir(mode=0o700, exist_ok=True)
    (home / ARTIFACTS).mkdir(mode=0o700, exist_ok=True)
    (home / INPUTS).mkdir(mode=0o700, exist_ok=True)
    try:
        for given in run.flight.inputs:
            _fetch(run, home / INPUTS, given)
    except Refused as exc:
        return str(exc)
    except (ApiError, Unreachable) as exc:
        return f"the inputs could not be fetched: {exc}"
    return None


def remove_home(workspace: Path) -> None:
    """``.gg`` and its two directories, when nothing else is in them (OSError otherwise):
    a few ``rmdir`` calls relative to directories opened without following a link, so a
    link the flight put in place of one never takes the runner outside the workspace. A
    workspace without ``.gg`` (a flight refused before :func:`prepare`) has nothing to do."""
    top = os.open(workspace, _DIR)
    try:
        try:
            home = os.open(HOME, _DIR, dir_fd=top)
        except FileNotFoundError:
            return
        try:
            os.rmdir(ARTIFACTS, dir_fd=home)
            os.rmdir(INPUTS, dir_fd=home)
        finally:
            os.close(home)
        os.rmdir(HOME, dir_fd=top)
    finally:
        os.close(top)


def _fetch(run: FlightRun, inputs: Path, given) -> None:
    if name_problem(given.name) or name_problem(given.dir) or "/" in given.dir:
        raise Refused(f"input {given.dir}/{given.name}: not a name to put under $GG_INPUTS")
    target = inputs / given.dir / given.name
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    counted = hashlib.sha256()
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as handle:
        def sink(block: bytes) -> None:
            counted.update(block)
            handle.write(block)

        run.client.download_input(run.id, run.lease.epoch, given.flight, given.name, sink)
    if counted.hexdigest() != given.sha256:
        raise Refused(f"input {given.dir}/{given.name} arrived with SHA-256 "
                      f"{counted.hexdigest()}, not {given.sha256}: the flight was not started")


def collect(root: Path) -> list[dict]:
    """Every regular file under ``root``: name (its path there), sha256, size, in name order;
    Refused at the first entry that is not a directory or a regular file."""
    try:
        fd = os.open(root, _DIR)
    except FileNotFoundError:
        return []
    except OSError:
        raise Refused("$GG_ARTIFACTS is not a directory (a symbolic link is never followed): "
                      "nothing was uploaded") from None
    try:
        return sorted(_walk(fd, root, ""), key=lambda a: a["name"])
    finally:
        os.close(fd)


def _walk(dir_fd: int, root: Path, prefix: str) -> Iterator[dict]:
    with os.scandir(dir_fd) as entries:
        for entry in entries:
            name = prefix + entry.name
            if entry.is_symlink():
                raise Refused(_link_sentence(root, name, entry.name, dir_fd))
            if entry.is_dir(follow_symlinks=False):
                child = os.open(entry.name, _DIR, dir_fd=dir_fd)
                try:
                    yield from _walk(child, root, name + "/")
                finally:
                    os.close(child)
            elif entry.is_file(follow_symlinks=False):
                if problem := name_problem(name):
                    raise Refused(f"{problem}: nothing was uploaded")
                digest, size = _hash(dir_fd, entry.name)
                yield {"name": name, "sha256": digest, "size": size}
            else:
                raise Refused(f"artifact {name} is not a regular file: nothing was uploaded")


def _link_sentence(root: Path, name: str, base: str, dir_fd: int) -> str:
    try:
        target = os.readlink(base, dir_fd=dir_fd)
    except OSError:
        target = "?"
    where = os.path.normpath(os.path.join(root, os.path.dirname(name), target))
    leaves = os.path.commonpath([where, str(root)]) != str(root)
    return (f"artifact {name} is a symbolic link to {target}"
            + (", outside $GG_ARTIFACTS" if leaves else "")
            + ": links are never followed; nothing was uploaded")


def _open(dir_fd: int, base: str) -> int:
    fd = os.open(base, _FILE, dir_fd=dir_fd)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise Refused(f"artifact {base} is not a regular file: nothing was uploaded")
    return fd


def _hash(dir_fd: int, base: str) -> tuple[str, int]:
    counted = hashlib.sha256()
    size = 0
    with os.fdopen(_open(dir_fd, base), "rb") as handle:
        while block := handle.read(CHUNK):
            counted.update(block)
            size += len(block)
    return counted.hexdigest(), size


def _open_beneath(root: Path, name: str) -> int:
    """``name`` under ``root``, each part opened without following a link."""
    fd = os.open(root, _DIR)
    try:
        parts = name.split("/")
        for part in parts[:-1]:
            child = os.open(part, _DIR, dir_fd=fd)
            os.close(fd)
            fd = child
        return _open(fd, parts[-1])
    finally:
        os.close(fd)


def upload(run: FlightRun, workspace: Path) -> str | None:
    """Upload what the flight left (None), or why not, in one sentence (the flight then
    fails with it). A refusal of the lease ends the flight as every report's does."""
    root = workspace / HOME / ARTIFACTS
    try:
        found = collect(root)
        if not found:
            return None
        needed = run.client.offer_artifacts(run.id, run.lease.epoch, found,
                                            retry_for=run._patience()).needed
        sizes = {a["name"]: a for a in found}
        for name in needed:
            with os.fdopen(_open_beneath(root, name), "rb") as body:
                run.client.upload_artifact(run.id, run.lease.epoch, name, body,
                                           sha256=sizes[name]["sha256"],
                                           size=sizes[name]["size"])
    except Refused as exc:
        return str(exc)
    except OSError as exc:
        return f"the artifacts could not be read: {exc.strerror or exc}"
    except (Unreachable, ServerFault) as exc:
        return f"the artifacts could not be uploaded: {exc}"
    except ApiError as exc:
        if exc.status in (404, 409, 410, 401, 403):
            run._refused(exc)  # the lease is gone: the flight ends here, nothing more sent
        return exc.message
    run.say(f"{run.id}: {len(found)} artifact(s) uploaded, {len(needed)} sent")
    return None
