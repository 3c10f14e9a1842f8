"""Several real ``gg server`` replicas on one PostgreSQL database, and runners spread over them.

Each replica is a ``gg server --database URL`` process with a data dir of its own; the first
one started creates the organisation (its data dir gets the owner's token), the others find
it. A runner is given every replica's URL, starting with the one it should use first.
"""

from __future__ import annotations

import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from gg.client import Client
from gg.launch import LocalRunner, LocalServer, free_port, gg_argv, sign_in

from support import WireJson


@dataclass
class LocalMaintainer(LocalRunner):
    """A real ``gg runner maintain POOL`` process, started and stopped as a runner is."""

    pool: str = ""

    def start(self) -> "LocalMaintainer":
        env = {**os.environ, "GG_STATE_DIR": str(self.state_dir),
               "GG_CONFIG_DIR": str(self.config_dir), **self.env}
        out = open(self.log, "ab") if self.log else subprocess.DEVNULL
        self.proc = subprocess.Popen(
            gg_argv("--server", self.server, "runner", "maintain", self.pool, "--name", self.name),
            env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        return self


class ReplicaSet:
    def __init__(self, root: Path, database_url: str, count: int, env: dict[str, str]):
        root.mkdir(parents=True, exist_ok=True)
        self.root = root
        self.env = {**env, "GG_DATABASE_URL": database_url}
        self.database_url = database_url
        self.servers = [LocalServer(root / f"replica{i}", free_port(), env=self.env,
                                    log=root / f"replica{i}.log") for i in range(count)]
        self.config_dir = root / "config"
        self.runners: list[LocalRunner] = []

    def start(self) -> "ReplicaSet":
        for server in self.servers:  # the first makes the organisation, the rest find it
            server.start(timeout=60)
        sign_in(self.config_dir, self.servers[0].url, self.owner_token())
        return self

    @property
    def urls(self) -> list[str]:
        return [s.url for s in self.servers]

    def url_list(self, first: int = 0) -> str:
        """Every replica's URL, comma-separated, starting with replica ``first``."""
        urls = self.urls
        return ",".join(urls[first:] + urls[:first])

    def owner_token(self) -> str:
        return self.servers[0].owner_token()

    def api(self, i: int = 0) -> WireJson:
        """Replica ``i`` alone (no failover): what it answers, it answered."""
        return WireJson(Client(self.servers[i].url, self.owner_token()))

    def runner(self, name: str, *, first: int = 0, only: bool = False, workers: int = 1,
               labels: str | None = None, env: dict | None = None) -> LocalRunner:
        """A runner using replica ``first`` first (``only``: and no other)."""
        server = self.servers[first].url if only else self.url_list(first)
        runner = LocalRunner(name, server, self.root / f"state-{name}", self.config_dir,
                             labels=labels, workers=workers, env={**self.env, **(env or {})},
                             log=self.root / f"runner-{name}.log")
        self.runners.append(runner.start())
        return runner

    def maintainer(self, pool: str, name: str, *, first: int = 0) -> LocalRunner:
        """``gg runner maintain POOL`` using replica ``first`` first; its state dir is the same
        every time ``name`` is started, so a restarted maintainer keeps its registration."""
        maintainer = LocalMaintainer(name, self.url_list(first), self.root / f"state-{name}",
                                     self.config_dir, pool=pool,
                                     env={**self.env, "GG_IMAGES_DIR": str(self.root / "images")},
                                     log=self.root / f"runner-{name}.log")
        self.runners.append(maintainer.start())
        return maintainer

    def log(self, name: str) -> str:
        path = self.root / f"runner-{name}.log"
        return path.read_text() if path.exists() else ""

    def gg(self, *args: str, replica: int = 0, timeout: float = 60.0) -> subprocess.CompletedProcess:
        """The real CLI, signed in as the owner, talking to replica ``replica`` only."""
        env = {**os.environ, **self.env, "GG_CONFIG_DIR": str(self.config_dir),
               "GG_SERVER": self.servers[replica].url}
        return subprocess.run(gg_argv(*args), env=env, capture_output=True, text=True,
                              timeout=timeout)

    def kill(self, i: int) -> None:
        """SIGKILL replica ``i``: no goodbye, no released claims, nothing flushed."""
        proc = self.servers[i].proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()

    def restart(self, i: int) -> None:
        self.servers[i].start(timeout=60)

    def stop(self) -> None:
        for runner in self.runners:
            runner.stop(timeout=10)
        for server in self.servers:
            server.stop()
