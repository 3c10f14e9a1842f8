"""The ``command`` driver: members are machines somewhere else, made by the operator's own
executables, in the spirit of GitLab's fleeting plugins and Nomad's autoscaler targets.

The strategy names three executables (``command: {create, delete, list}``); the maintainer
runs them from ITS OWN commands directory (``--commands DIR``, env ``GG_POOL_COMMANDS_DIR``)
and nowhere else, so the control plane picks which of the host's scripts runs, never what
runs. Each gets one JSON object on stdin and answers one on stdout (docs/pools.md, "The
command driver", has the schema):

- ``create``  ``{"pool", "member_id", "name", "server", "code", "image": {"ref", "digest"}}``
  -> ``{"machine": "..."}`` (optional): make a machine that runs
  ``GG_MEMBER_CODE=<code> gg --server <server> runner up --once --name <name>``. The code is
  a one-use member code: the machine enrols with it and checks in like any member;
- ``delete``  ``{"pool", "member_id"}`` -> ``{}``: remove it (a machine already gone is not an
  error);
- ``list``    ``{"pool"}`` -> ``{"machines": [{"member_id", "running": true|false}]}``: every
  machine of the pool the provider holds.

A non-zero exit, an answer that is not that JSON, or no answer within ``COMMAND_TIMEOUT``
is a :class:`DriverError` whose sentence ends with the executable's last stderr line, which
the maintainer attests and ``gg pools`` shows (with its backoff). No cloud SDK is part of gg:
a cloud is reached by the operator's script.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from gg.domain.strategies import command_problem
from gg.pool.drivers.contract import DriverError, MemberLaunch, check_member_id

COMMAND_TIMEOUT = 300.0  # a cloud may take minutes to make a machine
VERBS = ("create", "delete", "list")
ENV_COMMANDS_DIR = "GG_POOL_COMMANDS_DIR"


class CommandDriver:
    name = "command"

    def __init__(self, pool: str, commands: dict[str, str], commands_dir: Path | None, *,
                 timeout: float = COMMAND_TIMEOUT):
        self.pool = pool
        self.commands = dict(commands)
        self.commands_dir = Path(commands_dir) if commands_dir else None
        self.timeout = timeout

    def problem(self) -> str | None:
        if self.commands_dir is None:
            return (f"no commands directory on this host: run the maintainer with --commands "
                    f"DIR (or {ENV_COMMANDS_DIR}) holding the strategy's executables")
        for verb in VERBS:
            name = self.commands.get(verb)
            if name is None:
                return f"the strategy names no {verb} command"
            bad = command_problem(name)
            if bad:
                return f"command.{verb} {bad}"
            path = self.commands_dir / name
            if not path.is_file() or not os.access(path, os.X_OK):
                return f"{path} is not an executable file on this host ({verb})"
        return None

    def prepare(self, digest: str, ref: str) -> None:
        """The image is the provider's business (the create script is handed ref and digest)."""

    def start(self, launch: MemberLaunch) -> None:
        self._run("create", {"pool": self.pool, "member_id": check_member_id(launch.member_id),
                             "name": launch.name, "server": launch.server, "code": launch.code,
                             "image": {"ref": launch.image_ref, "digest": launch.digest}})

    def reset(self, launch: MemberLaunch) -> None:
        self.remove(launch.member_id)
        self.start(launch)

    def remove(self, member_id: str) -> None:
        self._run("delete", {"pool": self.pool, "member_id": check_member_id(member_id)})

    def running(self, member_id: str) -> bool:
        return self._machines().get(member_id, False)

    def members(self) -> list[str]:
        return sorted(self._machines())

    # -- the executables -------------------------------------------------------------------

    def _machines(self) -> dict[str, bool]:
        answer = self._run("list", {"pool": self.pool})
        machines = answer.get("machines")
        if not isinstance(machines, list):
            raise DriverError("the list command answered no \"machines\" list")
        out: dict[str, bool] = {}
        for m in machines:
            if not isinstance(m, dict) or not isinstance(m.get("member_id"), str):
                raise DriverError("the list command answered a machine without a member_id")
            out[check_member_id(m["member_id"])] = bool(m.get("running", True))
        return out

    def _run(self, verb: str, body: dict[str, Any]) -> dict[str, Any]:
        problem = self.problem()
        if problem:
            raise DriverError(problem)
        assert self.commands_dir is not None, "problem() said there is one"
        path = self.commands_dir / self.commands[verb]
        env = {k: v for k, v in os.environ.items()
               if k not in ("GG_TOKEN", "GG_ENROL_TOKEN", "GG_STATE_DIR", "GG_CONFIG_DIR")}
        try:
            done = subprocess.run([str(path)], input=json.dumps(body), capture_output=True,
                                  text=True, timeout=self.timeout, env=env,
                                  cwd=str(self.commands_dir))
        except subprocess.TimeoutExpired:
            raise DriverError(f"the {verb} command did not answer within "
                              f"{self.timeout:g}s") from None
        except OSError as exc:
            raise DriverError(f"the {verb} command could not run: {exc.strerror}") from None
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no reason given"])[-1]
            raise DriverError(f"the {verb} command failed (exit {done.returncode}): {last}")
        text = done.stdout.strip() or "{}"
        try:
            answer = json.loads(text)
        except json.JSONDecodeError:
            raise DriverError(f"the {verb} command answered something that is not JSON") \
                from None
        if not isinstance(answer, dict):
            raise DriverError(f"the {verb} command answered JSON that is not an object")
        return answer
