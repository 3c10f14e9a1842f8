"""The ``podman`` and ``docker`` drivers: each member is a container of the pinned image.

The same contract as the ``process`` driver, through the engine's command line:

- the image is ``REF@DIGEST`` (``image.ref`` pinned by ``image.digest``), and it must hold
  gg: the container runs ``gg runner up --once --name NAME`` with its state inside it, so
  a reset (remove, then run again) starts from the image and nothing else;
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
from collections.abc import Callable

from gg import config
from gg.pool.drivers import DriverError, MemberLaunch, check_member_id

Run = Callable[[list[str], "dict[str, str] | None", float], "tuple[int, str, str]"]
QUICK = 10.0  # info, inspect, ps, rm
SLOW = 600.0  # pull, run (may pull)
STOP_GRACE = 10


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
    def __init__(self, engine: str, pool: str, *, run: Run = run_engine,
                 which: Callable[[str], str | None] = shutil.which):
        if engine not in ("podman", "docker"):
            raise DriverError(f"no container engine {engine!r}; use podman or docker")
        self.name = engine
        self.pool = pool
        self._run = run
        self._which = which

    def problem(self) -> str | None:
        if self._which(self.name) is None:
            return f"{self.name} is not installed on this host"
        code, _, err = self._run([self.name, "info"], None, QUICK)
        if code != 0:
            return f"{self.name} does not answer on this host: {_last_line(err) or f'exit {code}'}"
        return None

    def image(self, ref: str, digest: str) -> str:
        return f"{ref}@{digest}"

    def prepare(self, digest: str, ref: str) -> None:
        image = self.image(ref, digest)
        if self._run([self.name, "image", "inspect", image], None, QUICK)[0] == 0:
            return
        code, _, err = self._run([self.name, "pull", image], None, SLOW)
        if code != 0:
            raise DriverError(f"{self.name} cannot pull {image}: {_last_line(err) or f'exit {code}'}")

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
                self.image(launch.image_ref, launch.digest),
                "gg", "--server", launch.server, "runner", "up", "--once",
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
                                    '{{.Label "gg.member"}}'], None, QUICK)
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


def _last_line(text: str) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""
