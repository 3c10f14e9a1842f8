"""Flying one flight: fresh workspace, the agent's process, output as facts, the lease kept.

Three threads per flight: the process's output reader, the lease keeper (renews when
LEASE_RENEW_AT of the lease remains) and this one, which waits for the process and hands
the flight back. A refusal of the lease (409/404) ends the flight here at once: the
process is stopped and nothing more is reported, so a machine that stalled and came back
cannot overwrite its replacement.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from gg.client import ApiError, Client, Unreachable
from gg.runner import repository

FLUSH_EVERY = 0.2
FLUSH_BYTES = 32_000
STOP_GRACE = 5.0


@dataclass
class Lease:
    flight_id: str
    epoch: int
    ttl: float
    renew_at: float
    local_expiry: float  # monotonic


@dataclass
class FlightRun:
    client: Client
    flight: dict
    lease: Lease
    workspace_root: Path
    say: Callable[[str], None] = print
    lost: threading.Event = field(default_factory=threading.Event)
    ended_by_server: threading.Event = field(default_factory=threading.Event)
    returning: threading.Event = field(default_factory=threading.Event)
    proc: subprocess.Popen | None = None
    exit_code: int | None = None
    fleet: Any = None  # enrolment: gg.runner.fleet.FleetState (profile, agents, credentials)
    argv: list[str] | None = None  # enrolment: what the agent runs (gg.runner.repository)
    base: str | None = None  # enrolment: the commit the repository was cloned at
    _seq: int = 0
    _buffer: list = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def id(self) -> str:
        return self.flight["id"]

    def run(self) -> str:
        """Fly it; returns what became of it: landed, failed, returned, lost or ended."""
        workspace = self._fresh_workspace()
        keeper = threading.Thread(target=self._keep_lease, name=f"lease-{self.id}", daemon=True)
        keeper.start()
        outcome = "lost"
        try:
            self._report([{"kind": "started", "body": {"workspace": str(workspace),
                                                       "pid": os.getpid()}}])
            self.argv = repository.prepare(self, workspace)  # enrolment: agent, clone
            self._start(workspace)
            reader = threading.Thread(target=self._read_output, name=f"out-{self.id}", daemon=True)
            reader.start()
            last_flush = time.monotonic()
            while self.proc.poll() is None:
                if self.lost.is_set() or self.ended_by_server.is_set() or self.returning.is_set():
                    self._stop_process()
                    break
                if time.monotonic() - last_flush >= FLUSH_EVERY:
                    self._flush()
                    last_flush = time.monotonic()
                self._wait_proc(FLUSH_EVERY)
            reader.join(timeout=10)
            self._flush()
            self.exit_code = self.proc.returncode
            if not (self.lost.is_set() or self.returning.is_set()):
                repository.finish(self, workspace)  # enrolment: commits, push
            outcome = self._hand_back()
        except repository.CannotFly as refusal:  # enrolment: not on this machine, or not at all
            outcome = self._hand_back(refusal.outcome, refusal.reason)
        except _Lost:
            self._stop_process()
            outcome = "ended" if self.ended_by_server.is_set() else "lost"
        finally:
            self.lost.set()  # stops the keeper
            shutil.rmtree(workspace, ignore_errors=True)
        return outcome

    # -- the process ------------------------------------------------------------------

    def _fresh_workspace(self) -> Path:
        path = self.workspace_root / f"{self.id}-{self.lease.epoch}"
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True, mode=0o700)
        return path

    def _start(self, workspace: Path) -> None:
        command = list(self.flight["command"])
        argv = self.argv or (["/bin/sh", "-c", command[0]] if len(command) == 1 else command)
        env = dict(os.environ)
        for key in list(env):
            if key.startswith("GG_") and key not in ("GG_IMAGE_ROOT",):
                env.pop(key)
        env.update({"GG_FLIGHT": self.id, "GG_ATTEMPT": str(self.flight.get("attempt", 1)),
                    "GG_WORKSPACE": str(workspace), "HOME": str(workspace)})
        try:
            self.proc = subprocess.Popen(argv, cwd=workspace, env=env, stdout=subprocess.PIPE,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)
        except OSError as exc:
            self.proc = subprocess.Popen(["/bin/sh", "-c", f"echo {_quote(str(exc))} >&2; exit 127"],
                                         cwd=workspace, stdout=subprocess.PIPE,
                                         stderr=subprocess.STDOUT, start_new_session=True)

    def _read_output(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for raw in iter(self.proc.stdout.readline, b""):
            with self._lock:
                self._buffer.append(raw.decode("utf-8", "replace"))

    def _wait_proc(self, timeout: float) -> None:
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass

    def _stop_process(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=STOP_GRACE)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        except ProcessLookupError:
            pass

    # -- reporting ----------------------------------------------------------------------

    def _flush(self) -> None:
        with self._lock:
            if not self._buffer:
                return
            text = "".join(self._buffer)
            self._buffer.clear()
        facts = []
        for start in range(0, len(text), FLUSH_BYTES):
            self._seq += 1
            facts.append({"kind": "output", "body": {"text": text[start:start + FLUSH_BYTES]},
                          "key": f"{self.lease.epoch}:output:{self._seq}"})
        self._report(facts)

    def _report(self, facts: list[dict]) -> None:
        for fact in facts:
            fact.setdefault("key", f"{self.lease.epoch}:{fact['kind']}:{self._next()}")
        try:
            self.client.report(self.id, self.lease.epoch, facts, retry_for=self._patience())
        except ApiError as exc:
            self._refused(exc)
        except Unreachable:
            pass  # kept trying for a whole lease; the server will decide

    def _hand_back(self, outcome: str | None = None, reason: str | None = None) -> str:
        if self.lost.is_set():
            return "ended" if self.ended_by_server.is_set() else "lost"
        if outcome is not None:
            pass  # enrolment: decided by gg.runner.repository
        elif self.returning.is_set():
            outcome, reason = "returned", "the runner is stopping"
        else:
            outcome = "landed" if self.exit_code == 0 else "failed"
            reason = None
        body = {"epoch": self.lease.epoch, "outcome": outcome, "exit_code": self.exit_code,
                "reason": reason, "key": f"{self.lease.epoch}:hand-back"}
        try:
            self.client.hand_back(self.id, body, retry_for=self._patience())
        except ApiError as exc:
            self._refused(exc, raise_=False)
            return "ended" if self.ended_by_server.is_set() else "lost"
        except Unreachable:
            return "lost"
        return outcome

    def _refused(self, exc: ApiError, raise_: bool = True) -> None:
        if exc.code == "flight_ended":
            self.ended_by_server.set()
        if exc.status in (404, 409, 410, 401, 403):
            self.lost.set()
            if raise_:
                raise _Lost() from exc
        elif raise_:
            raise exc

    def _patience(self) -> float:
        return max(self.lease.ttl * 2, 30.0)

    def _next(self) -> int:
        self._seq += 1
        return self._seq

    # -- the lease keeper ----------------------------------------------------------------

    def _keep_lease(self) -> None:
        while not self.lost.is_set():
            due = self.lease.local_expiry - self.lease.renew_at
            if self.lost.wait(max(0.0, due - time.monotonic())):
                return
            try:
                sent = time.monotonic()
                answer = self.client.renew(self.id, self.lease.epoch,
                                           retry_for=self._patience())
                remaining = answer["expires_at"] - answer["server_time"]
                self.lease.local_expiry = sent + remaining
            except ApiError as exc:
                if exc.code == "flight_ended":
                    self.ended_by_server.set()
                self.say(f"{self.id}: lease refused ({exc.message}); stopping it here")
                self.lost.set()
                return
            except Unreachable:
                # Kept trying; the server decides. Try again soon.
                self.lease.local_expiry = time.monotonic() + self.lease.renew_at + 1.0


class _Lost(Exception):
    pass


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"
