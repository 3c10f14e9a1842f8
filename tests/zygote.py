"""gg processes forked from one that has already imported gg: the suite's servers and
runners, and a fleet's CLI calls (``Fleet.gg``, through ``Starts.run``).

A ``gg server`` spends about 1.5 s of CPU before it answers its health check, most of it
importing FastAPI, building the wire models and the routes' validators; a ``gg runner up``
about 0.4 s importing. The suite starts hundreds of each on two shared cores. So each
pytest worker keeps one *zygote*: a Python process, started like any ``python -m gg`` (same
interpreter, same ``PYTHON*`` environment), that imports the server and the runner once and
then forks a child for each start the worker asks for. The child is a real, separate
process: it takes the environment, working folder, open-file limit and log it was given,
starts its own session, and runs ``gg.cli.app.run`` with the arguments a ``python -m gg``
would have had, then exits as that would. Only the import is shared, and it is frozen
(``gc.freeze``) before the first fork: a child's collector never walks the zygote's objects,
so neither its collections nor its exit touch them and copy their pages.

The zygote is the children's parent, so it reaps them and tells the worker each exit status;
``Forked`` is the worker's handle, with the part of ``subprocess.Popen`` that the suite and
``gg.launch`` use (``pid``, ``poll``, ``wait``, ``send_signal``, ``terminate``, ``kill``,
``returncode``).

A start whose ``PYTHON*`` environment differs from the zygote's (another ``gg`` on
``PYTHONPATH``, as in the rolling-upgrade test) is not the zygote's to make: it is started
with ``subprocess.Popen`` as before.

What differs from ``python -m gg``: ``/proc/PID/cmdline`` names this file, and
``/proc/PID/environ`` shows the zygote's environment (the child's own is its ``os.environ``,
which gg reads and hands to what it starts); every child shares the zygote's hash seed.

Run as a script, this file is the zygote: ``python tests/zygote.py FD SOURCE``, FD its end
of a socket pair, SOURCE the folder holding the ``gg`` package the worker imported.
Requests and answers are JSON lines; a child's exit is reported by the number of the start
that made it, not by its pid, which the system may give to a later child.
"""

from __future__ import annotations

import itertools
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

# What the zygote imports before it forks anything: what a server and a runner import.
PRELOAD = ("gg.cli.app", "gg.cli.server", "gg.server.app", "gg.server.connections",
           "gg.cli.runners", "gg.cli.fleet", "gg.runner.loop")


# -- the worker's side ------------------------------------------------------------------------


class Forked:
    """A child of the zygote, as the worker sees it (the part of ``Popen`` the suite uses)."""

    def __init__(self, zygote: "Zygote", pid: int, start: int, args: list[str]):
        self.zygote = zygote
        self.pid = pid
        self.start = start  # the zygote's number for this start: a pid may be reused
        self.args = args
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.zygote.exit_status(self.start, timeout=0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = self.zygote.exit_status(self.start, timeout)
            if self.returncode is None:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:  # as Popen: never signal a pid that may have been reused
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Zygote:
    """The worker's end: asks for starts, collects the exit statuses the zygote reports."""

    def __init__(self) -> None:
        import gg

        ours, theirs = socket.socketpair()
        self.python_env = _python_env(os.environ)
        source = Path(gg.__file__).resolve().parent.parent  # the gg this worker imported
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), str(theirs.fileno()), str(source)],
            pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, start_new_session=True)
        theirs.close()
        self.sock = ours
        self.lock = threading.Lock()
        self.pending = b""
        self.exits: dict[int, int] = {}  # a start's number: its exit status
        ready = self._next({"ready"}, timeout=120)
        if ready is None:
            raise RuntimeError("the zygote did not say it was ready")

    def takes(self, env: dict[str, str]) -> bool:
        """Whether a start with ``env`` can be forked here (same interpreter settings)."""
        return self.proc.poll() is None and _python_env(env) == self.python_env

    def start(self, args: list[str], env: dict[str, str], log: Path | None,
              file_limit: int | tuple[int, int] | None, *, stdin: Path | None = None,
              stdout: Path | None = None, stderr: Path | None = None,
              session: bool = True) -> Forked:
        """Fork ``gg ARGS``: its output appended to ``log`` (both streams), or written to
        ``stdout`` and ``stderr`` with ``stdin`` read from a file; in its own session (as a
        server or runner) or in the worker's (as a CLI call under ``subprocess.run``)."""
        out = stdout or log
        request = {"args": args, "env": env, "cwd": os.getcwd(), "session": session,
                   "stdin": str(stdin) if stdin else None,
                   "stdout": str(out) if out else None,
                   "stderr": str(stderr or out) if (stderr or out) else None,
                   "file_limit": list(file_limit) if isinstance(file_limit, tuple) else file_limit}
        with self.lock:
            self.sock.sendall(json.dumps(request).encode() + b"\n")
            answer = self._next({"pid", "error"}, timeout=60)
        if answer is None or "error" in answer:
            raise RuntimeError(f"the zygote could not start gg {' '.join(args)}: {answer}")
        return Forked(self, answer["pid"], answer["start"], args)

    def exit_status(self, start: int, timeout: float | None) -> int | None:
        """The exit status of the child of ``start`` once the zygote reports it; None when ``timeout`` passes
        first. The socket is read in slices of at most 50 ms, so that a wait in one thread
        never holds up another's start."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self.lock:
                if start in self.exits:
                    return self.exits[start]
                left = 0.05 if deadline is None else min(0.05, deadline - time.monotonic())
                self._next(set(), timeout=max(0.0, left))
                if start in self.exits:
                    return self.exits[start]
            if self.proc.poll() is not None:
                raise RuntimeError("the zygote exited, and with it the exit statuses of its "
                                   "children")
            if deadline is not None and time.monotonic() >= deadline:
                return None

    def _next(self, kinds: set[str], timeout: float | None) -> dict | None:
        """Read messages (recording exits) until one of ``kinds`` arrives or ``timeout``
        passes; any message ends the wait when ``kinds`` is empty. The lock is held."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            line, sep, rest = self.pending.partition(b"\n")
            if sep:
                self.pending = rest
                message = json.loads(line)
                if "exit" in message:
                    self.exits[message["exit"]] = message["status"]
                if not kinds or kinds & message.keys():
                    return message
                continue
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            # poll, not select: a worker of the suite may hold descriptors past 1024
            poller = select.poll()
            poller.register(self.sock, select.POLLIN)
            if not poller.poll(None if left is None else left * 1000):
                return None
            chunk = self.sock.recv(65536)
            if not chunk:
                return None
            self.pending += chunk

    def close(self) -> None:
        self.sock.close()  # the zygote reads the end of its socket and exits
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Starts:
    """``gg.launch.starter`` for a pytest worker: a fork of its zygote (made at the first
    start) where the start's interpreter settings are the zygote's, else ``popen_gg``."""

    def __init__(self) -> None:
        self.zygote: Zygote | None = None

    def _zygote_for(self, env: dict[str, str]) -> Zygote | None:
        """The zygote (made at the first start), or None when ``env`` is not its to start."""
        if self.zygote is None:
            self.zygote = Zygote()
        return self.zygote if self.zygote.takes(env) else None

    def __call__(self, args: list[str], env: dict[str, str], log: Path | None,
                 file_limit: int | tuple[int, int] | None) -> Any:
        from gg.launch import popen_gg

        zygote = self._zygote_for(env)
        if zygote is None:
            return popen_gg(args, env, log, file_limit)
        return zygote.start(args, env, log, file_limit)

    def run(self, args: list[str], env: dict[str, str], input: str | None = None,
            timeout: float | None = None, check: bool = False) -> subprocess.CompletedProcess:
        """``subprocess.run(gg_argv(*args), env=env, capture_output=True, text=True, ...)``,
        forked: the CLI's output is written to files and read once it exits."""
        import tempfile

        from gg.launch import gg_argv

        argv = gg_argv(*args)
        zygote = self._zygote_for(env)
        if zygote is None:
            return subprocess.run(argv, env=env, capture_output=True, text=True, check=check,
                                  input=input, timeout=timeout)
        with tempfile.TemporaryDirectory(prefix="gg-cli-") as folder:
            given, out, err = (Path(folder) / name for name in ("in", "out", "err"))
            given.write_text(input or "")
            child = zygote.start(args, env, None, None, stdin=given, stdout=out,
                                      stderr=err, session=False)
            try:
                code = child.wait(timeout)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
                raise subprocess.TimeoutExpired(argv, timeout or 0, out.read_text(),
                                                err.read_text()) from None
            done = subprocess.CompletedProcess(argv, code, out.read_text(), err.read_text())
        if check:
            done.check_returncode()
        return done

    def close(self) -> None:
        if self.zygote is not None:
            self.zygote.close()


def _python_env(env: Any) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith("PYTHON")}


# -- the zygote ---------------------------------------------------------------------------------


def serve(fd: int) -> dict:
    """Fork a child for each request; report each child's exit. Returns, in a child, the
    request it is to carry out (the zygote itself exits when the worker closes its end)."""
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    if threading.active_count() != 1:  # forking a process with threads copies their locks
        raise SystemExit("the zygote has threads after its imports; it forks only without")
    import gc

    gc.collect()
    gc.freeze()  # never walked by a child's collector (a forked CLI call: 60 ms, not 300)
    sock = socket.socket(fileno=fd)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    sock.sendall(b'{"ready": true}\n')
    children: dict[int, int] = {}  # pid: the number of the start that made it
    numbers = itertools.count(1)
    pending = b""
    poller = select.poll()  # not select: the socket's number may be past 1024
    poller.register(sock, select.POLLIN)
    poller.register(wake_r, select.POLLIN)
    while True:
        try:
            readable = {fd for fd, _ in poller.poll()}
        except InterruptedError:
            continue
        if wake_r in readable:
            os.read(wake_r, 4096)
        _report_exits(sock, children)
        if sock.fileno() not in readable:
            continue
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:  # the worker went away with reports unread
            chunk = b""
        if not chunk:
            raise SystemExit(0)
        pending += chunk
        while b"\n" in pending:
            line, _, pending = pending.partition(b"\n")
            request = json.loads(line)
            try:
                pid = os.fork()
            except OSError as exc:
                sock.sendall(json.dumps({"error": str(exc)}).encode() + b"\n")
                continue
            if pid == 0:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                sock.close()
                os.close(wake_r)
                os.close(wake_w)
                return request
            children[pid] = next(numbers)
            sock.sendall(json.dumps({"pid": pid, "start": children[pid]}).encode() + b"\n")


def _report_exits(sock: socket.socket, children: dict[int, int]) -> None:
    """Reap every child that ended and report it by its start's number."""
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:  # none is left to reap
            pid = 0
        if not pid:
            return
        message = {"exit": children.pop(pid), "status": os.waitstatus_to_exitcode(status)}
        sock.sendall(json.dumps(message).encode() + b"\n")


def become(request: dict) -> None:
    """In the child: take the start's session, limits, folder, environment and output, and
    run gg as ``python -m gg ARGS`` would (its exit status is this process's)."""
    import resource

    if request["session"]:
        os.setsid()
    limit = request["file_limit"]
    if limit is not None:
        resource.setrlimit(resource.RLIMIT_NOFILE,
                           tuple(limit) if isinstance(limit, list) else (limit, limit))
    null = os.open(os.devnull, os.O_RDWR)
    streams = [os.open(request["stdin"], os.O_RDONLY) if request["stdin"] else null]
    for name in ("stdout", "stderr"):
        streams.append(os.open(request[name], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                       if request[name] else null)
    for fd, stream in enumerate(streams):
        os.dup2(stream, fd)
    for fd in {null, *streams} - {0, 1, 2}:
        os.close(fd)
    os.chdir(request["cwd"])
    sys.path[0] = request["cwd"]  # as ``python -m`` puts it, not this file's folder
    os.environ.clear()
    os.environ.update(request["env"])
    import gg.cli.app

    sys.argv = [str(Path(gg.cli.app.__file__).parent.parent / "__main__.py"), *request["args"]]
    gg.cli.app.main(request["args"])


if __name__ == "__main__":
    sys.path[0] = sys.argv[2]  # import the worker's gg, not this folder's neighbours'
    become(serve(int(sys.argv[1])))
