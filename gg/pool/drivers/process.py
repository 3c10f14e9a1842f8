"""The ``process`` driver: each member is a ``gg runner up --once`` process of its own.

A member lives in ``ROOT/<member id>/``::

    image/        the pinned image, unpacked fresh for every cycle (GG_IMAGE_ROOT)
    state/        the member runner's state dir: its key, credential and workspaces
    config/       an empty config dir, so no person's token is ever found
    runner.log    what the member runner printed
    member.json   pid and kernel start time of its process, so a restarted maintainer
                  adopts exactly that process (never another that reused the pid)

The process runs in a session of its own, so a maintainer that dies leaves it running; the
next maintainer finds it through ``member.json``. A reset removes the whole directory and
unpacks the image again: the next flight starts from the image, not from what the last one
left. The member runner applies its policy's isolation to each flight like any runner;
``GG_IMAGE_ROOT`` passes through to the flight's environment (and is bound read-write into a
sandboxed flight: it is the member's own machine, unpacked again at every reset).

A member's sandboxed flights must see nothing of its maintainer: the member is handed
``GG_HIDE``, listing the maintainer's state and config directories and the members root (every
other member's key), and the member runner masks each of them (``gg.runner.isolation``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from gg import config
from gg.launch import gg_argv
from gg.pool.drivers.contract import DriverError, MemberLaunch, check_member_id
from gg.pool.image import ImageError, image_path, unpack_image
from gg.runner.isolation import ENV_HIDE

STOP_GRACE = 10.0  # seconds a member gets to say goodbye before it is killed
# Never handed down to a member: a person's sign-in, and another runner's identity.
_WITHHELD = (config.ENV_TOKEN, config.ENV_STATE_DIR, config.ENV_CONFIG_DIR, "GG_ENROL_TOKEN")


class ProcessDriver:
    name = "process"

    def __init__(self, root: Path, images_dir: Path, *, stop_grace: float = STOP_GRACE,
                 hide: Sequence[Path] = ()):
        self.root = Path(root)
        self.images_dir = Path(images_dir)
        self.stop_grace = stop_grace
        self.hide = [Path(os.path.abspath(p)) for p in hide]
        self._children: dict[str, subprocess.Popen] = {}

    def problem(self) -> str | None:
        return None  # a process and a directory work on any Linux host

    def prepare(self, digest: str, ref: str) -> None:
        try:
            present = image_path(digest, self.images_dir).is_file()
        except ImageError as exc:
            raise DriverError(exc.message) from None
        if not present:
            raise DriverError(f"image {digest} is not in {self.images_dir} on this host: build "
                              "it here (gg strategy build STRATEGY) or copy it in")

    # -- members ------------------------------------------------------------------------

    def start(self, launch: MemberLaunch) -> None:
        home = self._home(launch.member_id)
        if home.exists():
            raise DriverError(f"member {launch.member_id} exists on this host already")
        home.mkdir(parents=True, mode=0o700)
        try:
            unpack_image(launch.digest, self.images_dir, home / "image")
        except ImageError as exc:
            shutil.rmtree(home, ignore_errors=True)
            raise DriverError(exc.message) from None
        (home / "config").mkdir(mode=0o700)
        env = {k: v for k, v in os.environ.items() if k not in _WITHHELD}
        env.update({config.ENV_STATE_DIR: str(home / "state"),
                    config.ENV_CONFIG_DIR: str(home / "config"),
                    "GG_IMAGE_ROOT": str(home / "image"),
                    config.ENV_MEMBER_CODE: launch.code,
                    ENV_HIDE: os.pathsep.join(str(p) for p in self.hidden_from_members())})
        argv = gg_argv("--server", launch.server, "runner", "up", "--once",
                       "--name", launch.name, "--grace", f"{self.stop_grace:g}")
        with open(home / "runner.log", "ab") as log:
            proc = subprocess.Popen(argv, env=env, cwd=home, stdin=subprocess.DEVNULL,
                                    stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        self._children[launch.member_id] = proc
        _write_json(home / "member.json", {"pid": proc.pid, "started": _start_ticks(proc.pid),
                                           "digest": launch.digest, "name": launch.name})

    def hidden_from_members(self) -> list[Path]:
        """What a member's flights must not see: the maintainer's directories, the members
        root, and whatever this maintainer was itself told to hide."""
        inherited = [Path(p) for p in os.environ.get(ENV_HIDE, "").split(os.pathsep) if p]
        return list(dict.fromkeys([*self.hide, Path(os.path.abspath(self.root)), *inherited]))

    def reset(self, launch: MemberLaunch) -> None:
        self.remove(launch.member_id)
        self.start(launch)

    def remove(self, member_id: str) -> None:
        self._stop(member_id)
        shutil.rmtree(self._home(member_id), ignore_errors=True)
        self._children.pop(member_id, None)

    def running(self, member_id: str) -> bool:
        proc = self._children.get(member_id)
        if proc is not None:
            return proc.poll() is None  # our child: poll also reaps it
        pid = self._pid(member_id)
        return pid is not None

    def members(self) -> list[str]:
        if not self.root.is_dir():
            return []
        out = []
        for path in sorted(self.root.iterdir()):
            try:
                out.append(check_member_id(path.name))
            except DriverError:
                continue
        return out

    def pid(self, member_id: str) -> int | None:
        """The member's live process id (adopted or ours), or None."""
        proc = self._children.get(member_id)
        if proc is not None:
            return proc.pid if proc.poll() is None else None
        return self._pid(member_id)

    # -- inside ---------------------------------------------------------------------------

    def _home(self, member_id: str) -> Path:
        return self.root / check_member_id(member_id)

    def _pid(self, member_id: str) -> int | None:
        """The pid recorded for the member, if that very process still runs."""
        try:
            info = json.loads((self._home(member_id) / "member.json").read_text())
            pid, started = int(info["pid"]), info.get("started")
        except (OSError, ValueError, KeyError, TypeError):
            return None
        ticks = _start_ticks(pid)
        if ticks is None or (started is not None and ticks != started):
            return None
        return pid

    def _stop(self, member_id: str) -> None:
        """SIGTERM the member's process group, then SIGKILL after the grace period."""
        pid = self.pid(member_id)
        if pid is None:
            return
        _signal_group(pid, signal.SIGTERM)
        deadline = time.monotonic() + self.stop_grace
        while time.monotonic() < deadline:
            if self.pid(member_id) is None:
                return
            time.sleep(0.05)
        _signal_group(pid, signal.SIGKILL)
        proc = self._children.get(member_id)
        if proc is not None:
            proc.wait(timeout=10)


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)  # the member leads its own session and group
    except (ProcessLookupError, PermissionError):
        pass


def _start_ticks(pid: int) -> int | None:
    """When the kernel started ``pid`` (clock ticks since boot), or None if it is gone or a
    zombie. Together with the pid this names one process for good."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()
    if not fields or fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)
