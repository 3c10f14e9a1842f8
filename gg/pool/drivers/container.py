"""The ``podman`` and ``docker`` drivers: each member is a container of the pinned image.

The same contract as the ``process`` driver, through the engine's command line:

- an image built on this host (``gg strategy build``: the canonical tarball of its context in
  the images dir, named by its digest, as for the ``process`` driver) is imported into the
  engine as ``localhost/gg-pool-image:<hex>`` from a copy checked against the digest; the
  engine's one layer of it then has that same digest (an uncompressed layer is named by the
  SHA-256 of its tar), which ``prepare`` checks before any member starts from it. Such an
  image holds files, not a system: the member gets the host's system directories, the Python
  the maintainer runs on and gg itself, bound read-only at their own paths, and runs
  ``PYTHON -m gg runner up --once`` (the maintainer's own gg: members speak its version);
- any other image is ``REF@DIGEST`` (``image.ref`` pinned by ``image.digest``), pulled where
  it is missing, and it must hold gg: the container runs ``gg runner up --once``;
- either way the member's state is inside the container, so a reset (remove, then run again)
  starts from the image and nothing else;
- containers are named ``gg-POOL-MEMBER`` and labelled ``gg.pool`` / ``gg.member``, which is
  how a restarted maintainer finds (adopts) them;
- the member code reaches the container as ``--env GG_MEMBER_CODE`` with the value in the
  engine client's environment, never on a command line;
- ``--network host`` so a member reaches a control plane on the host's loopback as well as
  anywhere else the host can.

Every engine call goes through ``run`` (argv, extra environment, timeout) -> (exit code,
stdout, stderr), so the argv contract is tested without an engine.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from gg import config
from gg.pool.drivers.contract import DriverError, MemberLaunch, check_member_id
from gg.pool.image import ImageError, image_path, verified_copy

Run = Callable[[list[str], "dict[str, str] | None", float], "tuple[int, str, str]"]
QUICK = 10.0  # info, inspect, ps, rm
SLOW = 600.0  # pull, run (may pull)
STOP_GRACE = 10
# A container's gg.member label in ``ps --format``: podman's .Labels is a map (it has no
# .Label), docker's a text with a .Label function.
_MEMBER_LABEL = {"podman": '{{index .Labels "gg.member"}}', "docker": '{{.Label "gg.member"}}'}
LOCAL = "localhost/gg-pool-image"  # an image built on this host, tagged with its digest's hex
# What a member of a locally built image gets from the host, read-only (those present; a
# symbolic link such as /bin -> usr/bin is bound as what it leads to). Not /etc: it holds
# what only root may read, and a member is root in its container.
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


def run_engine(argv: list[str], env: dict[str, str] | None, timeout: float) -> tuple[int, str, str]:
    """Run the engine's client; (exit code, stdout, stderr). Never raises for a failure."""
    full = {**os.environ, **(env or {})}
    try:
        done = subprocess.run(argv, env=full, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        return 127, "", f"{argv[0]}: not found"
    except subprocess.TimeoutExpired:
        return 124, "", f"{' '.join(argv[:2])} timed out after {timeout:g} s"
    return done.returncode, done.stdout, done.stderr


class ContainerDriver:
    def __init__(self, engine: str, pool: str, *, images_dir: Path | None = None,
                 run: Run = run_engine, which: Callable[[str], str | None] = shutil.which):
        if engine not in ("podman", "docker"):
            raise DriverError(f"no container engine {engine!r}; use podman or docker")
        self.name = engine
        self.pool = pool
        self.images_dir = images_dir
        self._run = run
        self._which = which
        self._built: set[str] = set()  # digests the engine holds as a locally built image

    def problem(self) -> str | None:
        if self._which(self.name) is None:
            return f"{self.name} is not installed on this host"
        code, _, err = self._run([self.name, "info"], None, QUICK)
        if code != 0:
            return f"{self.name} does not answer on this host: {_last_line(err) or f'exit {code}'}"
        return None

    def image(self, ref: str, digest: str) -> str:
        """What a member of ``digest`` runs: the locally built image, else ``REF@DIGEST``."""
        return self.local(digest) if self.built_here(digest) else f"{ref}@{digest}"

    def local(self, digest: str) -> str:
        return f"{LOCAL}:{digest.removeprefix('sha256:')}"

    def built_here(self, digest: str) -> bool:
        """The engine holds ``digest`` as an image built on this host: its one layer is it."""
        if digest in self._built:
            return True
        code, out, _ = self._run([self.name, "image", "inspect", "--format",
                                  "{{json .RootFS.Layers}}", self.local(digest)], None, QUICK)
        if code == 0 and out.strip() == f'["{digest}"]':
            self._built.add(digest)
            return True
        return False

    def prepare(self, digest: str, ref: str) -> None:
        if self.built_here(digest):
            return
        if self.images_dir is not None and _is_file(image_path(digest, self.images_dir)):
            self._import(digest)
            return
        image = f"{ref}@{digest}"
        if self._run([self.name, "image", "inspect", image], None, QUICK)[0] == 0:
            return
        code, _, err = self._run([self.name, "pull", image], None, SLOW)
        if code != 0:
            raise DriverError(f"{self.name} cannot pull {image}: {_last_line(err) or f'exit {code}'}")

    def host_gg(self, digest: str) -> list[str]:
        """A member of a locally built image: the host's system, Python and gg bound in
        read-only, then the image and the command that starts that gg."""
        return [*host_binds(), self.local(digest), os.path.realpath(sys.executable), "-m", "gg"]

    def _import(self, digest: str) -> None:
        """The tarball of ``digest`` (checked against it) imported as the local image."""
        assert self.images_dir is not None, "prepare imports only from an images dir"
        with tempfile.NamedTemporaryFile(prefix=".importing-", suffix=".tar",
                                         dir=self.images_dir) as copy:
            try:
                verified_copy(digest, self.images_dir, copy)
            except ImageError as exc:
                raise DriverError(exc.message) from None
            code, _, err = self._run([self.name, "import", copy.name, self.local(digest)], None,
                                     SLOW)
        if code != 0:
            raise DriverError(f"{self.name} cannot import image {digest}: "
                              f"{_last_line(err) or f'exit {code}'}")
        if not self.built_here(digest):
            raise DriverError(f"{self.name} imported image {digest} as another layer; "
                              "it will not be run")

    def container(self, member_id: str) -> str:
        return f"gg-{self.pool}-{check_member_id(member_id)}"

    def run_argv(self, launch: MemberLaunch) -> list[str]:
        """The engine command that brings a member up (the code travels in the environment)."""
        state = "/var/lib/gg"
        return [self.name, "run", "--detach", "--name", self.container(launch.member_id),
                "--label", f"gg.pool={self.pool}", "--label", f"gg.member={launch.member_id}",
                "--label", f"gg.digest={launch.digest}", "--network", "host",
                "--security-opt", "no-new-privileges",
                "--env", config.ENV_MEMBER_CODE,
                "--env", f"{config.ENV_STATE_DIR}={state}/state",
                "--env", f"{config.ENV_CONFIG_DIR}={state}/config",
                "--env", "GG_IMAGE_ROOT=/",
                *(self.host_gg(launch.digest) if self.built_here(launch.digest) else [
                    self.image(launch.image_ref, launch.digest), "gg"]),
                "--server", launch.server, "runner", "up", "--once",
                "--name", launch.name, "--grace", str(STOP_GRACE)]

    def start(self, launch: MemberLaunch) -> None:
        code, _, err = self._run(self.run_argv(launch), {config.ENV_MEMBER_CODE: launch.code},
                                 SLOW)
        if code != 0:
            raise DriverError(f"{self.name} could not start member {launch.member_id}: "
                              f"{_last_line(err) or f'exit {code}'}")

    def reset(self, launch: MemberLaunch) -> None:
        self.remove(launch.member_id)
        self.start(launch)

    def remove(self, member_id: str) -> None:
        name = self.container(member_id)
        self._run([self.name, "stop", "--time", str(STOP_GRACE), name], None, QUICK + STOP_GRACE)
        code, _, err = self._run([self.name, "rm", "--force", name], None, QUICK)
        if code != 0 and self._exists(name):  # a container that is not there is removed
            raise DriverError(f"{self.name} could not remove {name}: {_last_line(err)}")

    def _exists(self, name: str) -> bool:
        return self._run([self.name, "container", "inspect", name], None, QUICK)[0] == 0

    def running(self, member_id: str) -> bool:
        code, out, _ = self._run([self.name, "inspect", "--format", "{{.State.Running}}",
                                  self.container(member_id)], None, QUICK)
        return code == 0 and out.strip() == "true"

    def members(self) -> list[str]:
        code, out, err = self._run([self.name, "ps", "--all", "--filter",
                                    f"label=gg.pool={self.pool}", "--format",
                                    _MEMBER_LABEL[self.name]], None, QUICK)
        if code != 0:
            raise DriverError(f"{self.name} cannot list this pool's containers: "
                              f"{_last_line(err) or f'exit {code}'}")
        ids = []
        for line in out.splitlines():
            try:
                ids.append(check_member_id(line.strip()))
            except DriverError:
                continue
        return sorted(set(ids))


def host_binds() -> list[str]:
    """The engine's flags that give a member the host's system directories, the Python the
    maintainer runs on and gg itself, read-only at their own paths (one bind for a path
    inside another), and gg's directory first on the member's Python path."""
    import gg
    from gg.runner.isolation import install_paths

    paths: list[str] = []
    for path in [*SYSTEM, *map(str, install_paths())]:
        if os.path.exists(path) and not any(path == p or path.startswith(p.rstrip("/") + "/")
                                            for p in paths):
            paths.append(path)
    flags: list[str] = []
    for path in paths:
        flags += ["--volume", f"{path}:{path}:ro"]
    source = os.path.dirname(os.path.dirname(os.path.realpath(gg.__file__)))
    return [*flags, "--env", f"PYTHONPATH={source}"]


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:
        return False


def _last_line(text: str) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""
