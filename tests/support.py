"""Helpers the tests share: a real fleet on loopback, and a bounded wait."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import gg.launch
from gg.client import Client
from gg.launch import LocalRunner, LocalServer, free_port, gg_argv, sign_in, stop_processes

# The real protocol, in seconds instead of minutes.
FAST = {
    "GG_CHECK_IN_INTERVAL": "0.5",
    "GG_OFFLINE_AFTER": "3",
    "GG_CLAIM_WAIT": "5",
    "GG_LEASE_TTL": "3",
    "GG_LEASE_RENEW_AT": "2",
    # every server the suite starts refuses a store call on its event loop (gg.store.loop_guard)
    "GG_LOOP_GUARD": "on",
}


class WireJson:
    """The one client, its answers read back as the JSON the server sent: the tests assert
    the wire contract field by field, and every answer still goes through its model."""

    def __init__(self, client: Client):
        self.client = client

    def __getattr__(self, name: str):
        attr = getattr(self.client, name)
        if not callable(attr):
            return attr

        def call(*args, **kwargs):
            return _json(attr(*args, **kwargs))

        return call


def _json(value):
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", by_alias=True)
    if isinstance(value, list):
        return [_json(v) for v in value]
    return value


def wait_until(condition, timeout: float = 20.0, interval: float = 0.05, what: str = "condition"):
    """Poll ``condition`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = condition()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what} (last: {last!r})")


class Fleet:
    """A real control plane plus helpers to start runners and run the CLI against it."""

    def __init__(self, root: Path, env: dict[str, str]):
        root.mkdir(parents=True, exist_ok=True)
        self.root = root
        self.env = env
        self.server = LocalServer(root / "data", free_port(), env=env, log=root / "server.log")
        self.config_dir = root / "config"
        self.runners: list[LocalRunner] = []

    def start(self) -> "Fleet":
        self.server.start(timeout=60)  # a loaded CI machine can take 20 s to import and start
        sign_in(self.config_dir, self.server.url, self.server.owner_token())
        return self

    @property
    def url(self) -> str:
        return self.server.url

    def api(self, token: str | None = None) -> WireJson:
        return WireJson(Client(self.url, token or self.server.owner_token()))

    def runner(self, name: str, labels: str | None = None, workers: int | None = 1,
               extra: list[str] | None = None, env: dict | None = None) -> LocalRunner:
        runner = LocalRunner(name, self.url, self.root / f"state-{name}", self.config_dir,
                             labels=labels, workers=workers, extra=extra or [],
                             env={**self.env, **(env or {})}, log=self.root / f"runner-{name}.log")
        self.runners.append(runner.start())
        return runner

    def runner_row(self, name: str) -> dict | None:
        """The runner's row in ``gg runners`` (None when it is not listed)."""
        return next((r for r in self.api().runners() if r["name"] == name), None)

    def wait_online(self, *names: str, timeout: float = 20.0) -> dict:
        def online():
            rows = {r["name"]: r for r in self.api().runners()}
            return rows if all(n in rows and rows[n]["online"] for n in names) else None
        return wait_until(online, timeout, what=f"runners {names} online")

    def gg(self, *args: str, check: bool = False, input: str | None = None,
           timeout: float = 60.0, token: str | None = None) -> subprocess.CompletedProcess:
        """Run the real CLI, signed in as the owner (or as the person whose ``token`` it is)."""
        env = {**os.environ, **self.env, "GG_CONFIG_DIR": str(self.config_dir),
               "GG_SERVER": self.url}
        if token is not None:
            env["GG_TOKEN"] = token
        forked = getattr(gg.launch.starter, "run", None)  # the suite's zygote: tests/zygote.py
        if forked is not None:
            return forked(list(args), env, input=input, timeout=timeout, check=check)
        return subprocess.run(gg_argv(*args), env=env, capture_output=True, text=True,
                              check=check, input=input, timeout=timeout)

    def chart(self, name: str, means: str = "true") -> str:
        """Chart an environment and clear its gate, so flights may use it (SPEC 6)."""
        api = self.api()
        gate = api.request("POST", "/v1/environments", json={"name": name, "means": means})["gate"]
        if gate is not None and api.gate(gate)["status"] == "open":
            api.clear_gate(gate)
        return gate

    def log(self, name: str) -> str:
        path = self.root / f"runner-{name}.log"
        return path.read_text() if path.exists() else ""

    def stop(self) -> None:
        """Every runner is told to stop at once (SIGCONT first, in case a test stopped it),
        all with one 10 s deadline before SIGKILL rather than 10 s each in turn; then the
        server."""
        live = [r.proc for r in self.runners if r.proc is not None and r.proc.poll() is None]
        for proc in live:
            try:
                proc.send_signal(signal.SIGCONT)
            except ProcessLookupError:
                pass
        stop_processes(live, signal.SIGTERM, timeout=10)
        self.server.stop()


class Clock:
    """A clock tests move by hand, for use cases and apps built with ``clock=``."""

    def __init__(self, now: float = 1_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def auth(token: str) -> dict[str, str]:
    """The header a request carries a token in."""
    return {"authorization": f"Bearer {token}"}


def new_key():
    """A fresh Ed25519 private key, as a runner makes on its first start."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    return Ed25519PrivateKey.generate()


def proof(core, purpose: str, key=None) -> dict:
    """``public_key``, ``nonce`` and ``signature`` for a use case that proves the key
    (``register``, ``enrol`` or ``join``): a nonce from the control layer, signed by ``key``
    (a fresh one when not given). Spread it into the call: ``register(..., **proof(core,
    "register"))``."""
    from gg import keys
    from gg.control import key_proof

    key = key or new_key()
    nonce = key_proof.issue(core, purpose, keys.public_text(key))["nonce"]
    return keys.prove(key, purpose, nonce)


def http_proof(http, purpose: str, key=None, base: str = "") -> dict:
    """The same over HTTP: ``http`` is anything with ``post(url, json=...)`` (a TestClient,
    an httpx client; ``base`` is prefixed to the path)."""
    from gg import keys

    key = key or new_key()
    answer = http.post(base + "/v1/key-nonces",
                       json={"purpose": purpose, "public_key": keys.public_text(key)})
    assert answer.status_code == 201, answer.text
    return keys.prove(key, purpose, answer.json()["nonce"])


def http_runner(http, name: str, token: str) -> str:
    """A runner registered over HTTP by ``token``'s person, with a capability report on file
    (so a heartbeat claim is not told to report): its credential. ``http``: a TestClient."""
    answer = http.post("/v1/runners", json={"name": name, **http_proof(http, "register")},
                       headers=auth(token)).json()
    caps = {"isolation": ["none", "sandbox"]}
    assert http.post("/v1/runner/check-in", json={"capabilities": caps},
                     headers=auth(answer["credential"])).status_code == 200
    return answer["credential"]


def make_runner(core, person, name: str = "r1", labels: dict | None = None, workers: int = 1):
    """Register a runner through the use case, check it in, and return its row."""
    from gg.control import runners

    runner, _ = runners.register(core, person, name=name, **proof(core, "register"),
                                 labels=labels or {}, workers=workers, inventory={}, version=None)
    check_in(core, runner)
    return core.store.runner(runner.id)


def check_in(core, runner, **report) -> dict:
    """Check ``runner`` in through the use case, as it is stored now, reporting only what is
    given (``inventory=``, ``capabilities=``, ``version=``, ``workers=``, ``labels=``…)."""
    from gg.control import runners

    quiet = {"readings": {}, "inventory": None, "capabilities": None, "version": None,
             "held": [], "peer_address": None}
    return runners.check_in(core, core.store.runner(runner.id), **{**quiet, **report})


def cli(fleet: Fleet, *args: str) -> tuple[int, str, str]:
    """Run the real CLI in this process against ``fleet`` (as ``fleet.gg`` does, without an
    interpreter's start-up per command): (exit code, stdout, stderr)."""
    import contextlib
    import io

    from gg.cli.app import run

    env = {**fleet.env, "GG_CONFIG_DIR": str(fleet.config_dir), "GG_SERVER": fleet.url}
    saved = {key: os.environ.get(key) for key in env}
    out, err = io.StringIO(), io.StringIO()
    try:
        os.environ.update(env)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = run(list(args))
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return code, out.getvalue(), err.getvalue()


def gone(pid: int) -> bool:
    """The process has exited (a zombie not yet reaped counts as gone)."""
    import psutil

    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def lay_out(base: Path, files: dict[str, str]) -> Path:
    """Write ``files`` (relative path -> text) under ``base``, making folders as needed;
    returns ``base``."""
    for rel, text in files.items():
        path = base / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return base


def refusal(response) -> tuple:
    """What a refused request is told: status, JSON body and ``WWW-Authenticate``, to
    compare two refusals whole."""
    return response.status_code, response.json(), response.headers.get("www-authenticate")


def handed_argv(launch) -> tuple[list[str], list[int]]:
    """(argv, pass_fds) that start a built launch (gg.runner.isolation.Launch) the way the
    runner's launcher does: its ``handed`` bytes (the command's environment) readable on fd 3.
    A small Python, started with the launch's own ``env``, moves them there and execs it."""
    if launch.handed is None:
        return list(launch.argv), []
    fd = os.memfd_create("handed", 0)
    os.write(fd, launch.handed)
    os.lseek(fd, 0, os.SEEK_SET)
    move = ("import os, sys\nfd = int(sys.argv[1])\nif fd != 3:\n    os.dup2(fd, 3)\n"
            "    os.close(fd)\nos.execvp(sys.argv[2], sys.argv[2:])")
    return [sys.executable, "-I", "-S", "-c", move, str(fd), *launch.argv], [fd]


def run_launch(launch, *, prefix: list[str] | None = None, timeout: float = 60.0,
               **options) -> subprocess.CompletedProcess:
    """Run a built launch to its end, as the runner's launcher starts it (``handed_argv``);
    ``prefix``: what it runs under (``setpriv`` to another user)."""
    argv, fds = handed_argv(launch)
    if prefix and fds:
        argv = [*argv[:6], *prefix, *argv[6:]]
    elif prefix:
        argv = [*prefix, *argv]
    try:
        return subprocess.run(argv, env=launch.env, cwd=launch.cwd, pass_fds=fds,
                              timeout=timeout, check=False, **options)
    finally:
        for fd in fds:
            os.close(fd)


def flight_workspace(path: Path) -> Path:
    """``path`` made and handed to the flight identity a launch built without one runs as (a
    root runner's first flight uid; nothing to do for any other runner), as a runner hands
    its flights' workspaces over."""
    from gg.runner.flight_identity import hand_over, runs_as_root, shared

    path.mkdir(parents=True, exist_ok=True)
    if runs_as_root():
        hand_over(path, shared().first())
    return path


def accept_queue(port: int) -> int | None:
    """Connections the kernel completed that the server has not accepted yet (Linux)."""
    for line in open("/proc/net/tcp").read().splitlines()[1:]:
        fields = line.split()
        if fields[1].endswith(f":{port:04X}") and fields[3] == "0A":  # LISTEN
            return int(fields[4].split(":")[1], 16)
    return None


# A library that marks every process it loads into: an empty file named after the process
# (its comm) in the directory MARKS. With LD_PRELOAD, it shows which programs a variable
# reached.
MARKING_LIBRARY = r"""
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
__attribute__((constructor)) static void mark(void) {
    char name[64] = {0}, path[4096];
    int fd = open("/proc/self/comm", O_RDONLY);
    if (fd >= 0) { if (read(fd, name, sizeof name - 1) < 0) name[0] = 0; close(fd); }
    name[strcspn(name, "\n")] = 0;
    snprintf(path, sizeof path, "%s/%s", MARKS, name);
    fd = open(path, O_WRONLY | O_CREAT, 0644);
    if (fd >= 0) close(fd);
}
"""


def marking_library(folder: Path) -> tuple[Path, Path] | None:
    """(the library, its marks directory), built with cc in ``folder`` and checked to mark
    (``true`` under it leaves ``true``, removed again); None without a C compiler."""
    import shutil

    cc = shutil.which("cc")
    if cc is None:
        return None
    marks = folder / "marks"
    marks.mkdir()
    source, library = folder / "mark.c", folder / "libmark.so"
    source.write_text(MARKING_LIBRARY)
    subprocess.run([cc, "-shared", "-fPIC", f'-DMARKS="{marks}"', "-o", str(library),
                    str(source)], check=True, capture_output=True, timeout=60)
    subprocess.run(["true"], env={**os.environ, "LD_PRELOAD": str(library)}, check=True)
    assert [p.name for p in marks.iterdir()] == ["true"]  # the library does mark
    (marks / "true").unlink()
    return library, marks
