"""Starting real gg processes on this machine: a control plane and runners on loopback.

Used by ``gg demo``, the integration tests, the chaos suite and the benchmarks, so all of
them exercise the same processes a user starts by hand.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlsplit


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def gg_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "gg", *args]


@dataclass
class LocalServer:
    data_dir: Path
    port: int
    env: dict[str, str] = field(default_factory=dict)
    dev: bool = True
    log: Path | None = None
    file_limit: int | tuple[int, int] | None = None  # open-file limit: both, or (soft, hard)
    proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> "LocalServer":
        """Start the server and wait until it, not another process, answers its health.

        A port from ``free_port()`` is free only when chosen: another process (a test beside
        this one) may take it before the server binds it. The server then refuses to start
        (exit 6, having made nothing). On its first start this one starts it again on a new
        port, up to ``PORT_TRIES`` times, so ``url`` is only final once ``start`` returns; a
        server started again keeps its port (runners were told it), and a taken one is
        ``PortTaken``."""
        tries = PORT_TRIES if self.proc is None else 1
        for attempt in range(tries):
            self.proc = self._spawn()
            try:
                wait_healthy(self.url, timeout, self.proc)
                return self
            except PortTaken:
                if attempt + 1 == tries:
                    raise
                self.port = free_port()
            except RuntimeError:  # never leave a server behind that nobody will stop
                stop_process(self.proc, 15, 5.0)
                raise
        return self

    def _spawn(self) -> subprocess.Popen:
        args = ["server", "--data-dir", str(self.data_dir), "--listen", f"127.0.0.1:{self.port}"]
        if self.dev:
            args.append("--dev")
        return starter(args, {**os.environ, **self.env}, self.log, self.file_limit)

    def owner_token(self) -> str:
        return (self.data_dir / "owner-token").read_text().strip()

    def stop(self, sig: int = 15, timeout: float = 10.0) -> None:
        stop_process(self.proc, sig, timeout)


def popen_gg(args: list[str], env: dict[str, str], log: Path | None,
             file_limit: int | tuple[int, int] | None) -> subprocess.Popen:
    """``python -m gg ARGS`` in its own session, with ``env``, its output appended to
    ``log`` (or dropped) and, when given, that open-file limit."""
    def popen(out: Any) -> subprocess.Popen:
        return subprocess.Popen(gg_argv(*args), env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True,
                                preexec_fn=(lambda: _limit_files(file_limit)) if file_limit
                                else None)

    if log is None:
        return popen(subprocess.DEVNULL)
    with open(log, "ab") as out:  # the child has its own copy once started
        return popen(out)


Starter = Callable[[list[str], dict[str, str], "Path | None", "int | tuple[int, int] | None"],
                   Any]
# How LocalServer and LocalRunner start gg: popen_gg, unless a caller starting many of them
# forks them from an interpreter that has gg imported (the test suite: tests/zygote.py).
starter: Starter = popen_gg


def stop_process(proc: subprocess.Popen | None, sig: int = 15,
                 timeout: float = 10.0) -> int | None:
    """Stop ``proc`` (a no-op when it already ended): ``sig``, then SIGKILL after ``timeout``
    seconds; its exit status."""
    if proc is None:
        return None
    stop_processes([proc], sig, timeout)
    return proc.returncode


def stop_processes(procs: list[subprocess.Popen], sig: int = 15, timeout: float = 10.0) -> None:
    """Stop every one of ``procs`` at once: ``sig`` to each still running, then SIGKILL to
    those still running ``timeout`` seconds later (one deadline for all, not one each)."""
    live = [proc for proc in procs if proc.poll() is None]
    for proc in live:
        try:
            proc.send_signal(sig)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    for proc in live:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _limit_files(limit: int | tuple[int, int]) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_NOFILE, limit if isinstance(limit, tuple) else (limit, limit))


PORT_TRIES = 3
# gg server's exit when it refuses to start because its port or its data folder is another
# process's (gg.cli.exits.Exit.CONFLICT); which of them, the port is looked at to tell
REFUSED_TO_START = 6


class PortTaken(RuntimeError):
    """The server exited because another process listens on its port."""


def wait_healthy(url: str, timeout: float, proc: subprocess.Popen | None = None) -> None:
    """Look at ``url``'s health every 50 ms until it answers 200. Each look is one plain
    request (http.client): ``httpx.get`` built a client with its TLS context per look, about
    50 ms of CPU, so that waiting for a server to start cost the starter about as much CPU
    as a third of the server's own start.

    With ``proc``, an answer counts only once ``proc`` is the process listening on the port:
    another server that took the port first answers health too, and that answer is not
    ``proc``'s. ``PortTaken`` when ``proc`` refused to start and another process listens
    on the port (a data folder held by another server is a plain ``RuntimeError``)."""
    port = urlsplit(url).port
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            if proc.returncode == REFUSED_TO_START and port is not None and listens(None, port):
                raise PortTaken(f"the control plane's port {port} was taken by another process")
            raise RuntimeError(f"the control plane exited with code {proc.returncode} while starting")
        if _health_status(url, timeout=1.0) == 200 and (
                proc is None or port is None or listens(proc.pid, port)):
            return
        time.sleep(0.05)
    raise RuntimeError(f"the control plane at {url} did not answer within {timeout:g}s")


def listens(pid: int | None, port: int) -> bool:
    """Whether the process ``pid`` (or a process it started) listens on TCP ``port``; with
    ``pid`` None, whether any process of this machine does."""
    import psutil

    try:
        if pid is None:
            held = psutil.net_connections("tcp")
        else:
            process = psutil.Process(pid)
            held = [c for p in (process, *process.children(recursive=True))
                    for c in p.net_connections("tcp")]
        return any(c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port
                   for c in held)
    except psutil.Error:
        return False


def _health_status(url: str, timeout: float) -> int | None:
    """The status ``url``'s ``/v1/health`` answers with (a server started here: plain HTTP);
    None when it cannot be reached."""
    import http.client

    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=timeout)
    try:
        conn.request("GET", "/v1/health")
        return conn.getresponse().status
    except (OSError, http.client.HTTPException):
        return None
    finally:
        conn.close()


@dataclass
class LocalRunner:
    name: str
    server: str
    state_dir: Path
    config_dir: Path
    labels: str | None = None
    workers: int | None = 1  # None: no --workers (the policy's, as a unit without the flag)
    extra: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    log: Path | None = None
    proc: subprocess.Popen | None = None

    def start(self) -> "LocalRunner":
        args = ["--server", self.server, "runner", "up", "--name", self.name,
                *(["--workers", str(self.workers)] if self.workers is not None else []),
                *self.extra]
        if self.labels:
            args += ["--labels", self.labels]
        env = {**os.environ, "GG_STATE_DIR": str(self.state_dir),
               "GG_CONFIG_DIR": str(self.config_dir), **self.env}
        self.proc = starter(args, env, self.log, None)
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, sig: int = 15, timeout: float = 30.0) -> int | None:
        return stop_process(self.proc, sig, timeout)


def sign_in(config_dir: Path, server: str, token: str) -> None:
    """Write a signed-in config for ``config_dir``: what ``gg login --server URL`` writes,
    the token checked by the same ``whoami`` call, without starting another process."""
    from gg import config
    from gg.client import Client

    client = Client(server, token)
    try:
        person = client.whoami().person.name
    finally:
        client.close()
    config.save(config.Config(server=server, token=token, person=person),
                config_dir / "config.json")
