"""Starting flights' processes: the runner's side of its launcher (:mod:`gg.runner.launcher`).

Every flight's process (and a service's generations, a console's command) is forked by the
runner's launcher, one small process started once per runner, so a flight costs no Python
start of its own and still dies with the runner. :data:`LAUNCHER` starts it on first use and
again after it died; :class:`LaunchedProcess` is what the flight holds, shaped like
``subprocess.Popen`` (``pid``, ``poll``, ``wait(timeout)``, ``returncode``, ``stdout``) with
``send_signal`` going to the process group.

Each process the launcher starts lives in a cgroup of its own (:mod:`gg.runner.cgroups`):
:func:`kill_tree` kills all of it, and :meth:`LaunchedProcess.watch` gives the launcher the
time at which it kills it by itself (the watchdog of a flight's lease, moved by each renewal;
docs/lease-protocol.md, "The runner stops what it cannot renew").

When the launcher dies under running flights (killed by hand, say), the runner SIGKILLs each
one's process group and every cgroup the launcher made: each ends as ``-SIGKILL`` with
:data:`LAUNCHER_DIED` as its ``note``
(the reason its flight fails with), and the next flight starts a new launcher.

The parent-death signals follow the thread that forked: the launcher is started from
:data:`SPAWNER`'s thread, which lives as long as the runner process, and starts every
flight from its own single thread.
"""

from __future__ import annotations

import itertools
import marshal
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

from gg.runner import cgroups
from gg.runner.launcher import CHUNK, HEADER

PROGRAM = Path(__file__).with_name("launcher.py")
PIPE, STDOUT = subprocess.PIPE, subprocess.STDOUT
LAUNCHER_DIED = "the runner's launcher died: the flight's process was killed with it"
WATCHDOG = "its kill deadline passed: the launcher killed its whole tree"
SUPPORTED = sys.platform.startswith("linux")  # PR_SET_PDEATHSIG is Linux's


class Spawner:
    """Forks from one thread that lives as long as the runner process.

    A parent-death signal fires when the *thread* that forked the child ends, not the
    process; a flight's own thread ends with the flight, so forking there would tie the
    signal to the wrong thing. This thread never ends before the process does.
    """

    def __init__(self) -> None:
        self._requests: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def popen(self, argv: list[str], **options: Any) -> subprocess.Popen:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name="spawner", daemon=True)
                self._thread.start()
        done = threading.Event()
        box: dict[str, Any] = {}  # the process, or the error that refused it
        self._requests.put((argv, options, box, done))
        done.wait()
        if "error" in box:
            raise box["error"]
        return box["proc"]

    def _serve(self) -> None:
        while True:
            argv, options, box, done = self._requests.get()
            try:
                box["proc"] = subprocess.Popen(argv, **options)
            except BaseException as exc:  # handed to the caller, never the end of this thread
                box["error"] = exc
            finally:
                done.set()


SPAWNER = Spawner()


class LaunchedProcess:
    """A process the launcher forked: ``subprocess.Popen``'s shape, as far as gg uses it."""

    def __init__(self, channel: "_Channel", pid: int, args: list[str]) -> None:
        self._channel = channel
        self.pid = pid
        self.args = args
        self.returncode: int | None = None
        self.stdout: IO[bytes] | None = None
        self.note: str | None = None  # why it ended, when that was not its own doing
        # what its cgroups counted (gg.runner.cgroups.usage): peak_memory, cpu_seconds,
        # oom_kills; {} where the host gives no such cgroup
        self.usage: dict[str, Any] = {}
        self._ended = threading.Event()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._ended.wait(timeout):
            assert timeout is not None, "a wait without a timeout ends only when it does"
            raise subprocess.TimeoutExpired(self.args, timeout)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        """``sig`` to the process's whole group, while its leader has not been reaped."""
        if self.returncode is None:
            self._channel.signal(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def kill_tree(self) -> None:
        """SIGKILL the process and everything it started, whichever session or group it is in
        (its cgroup; its process group where the host gives none)."""
        if self.returncode is None:
            self._channel.kill(self.pid)

    def watch(self, deadline: float | None) -> None:
        """The launcher kills the whole tree by itself when ``time.monotonic()`` reaches
        ``deadline``, whatever the runner is doing then (None: never)."""
        if self.returncode is None:
            self._channel.deadline(self.pid, deadline)

    def _end(self, returncode: int, note: str | None = None) -> None:
        if self.returncode is None:
            self.note = note or self.note
            self.returncode = returncode
            self._ended.set()


def signal_group(proc: Any, sig: int) -> None:
    """``sig`` to the process group ``proc`` leads (a launched process or a Popen)."""
    if isinstance(proc, LaunchedProcess):
        proc.send_signal(sig)
    else:
        os.killpg(proc.pid, sig)


def kill_tree(proc: Any) -> None:
    """SIGKILL ``proc``'s whole tree (a launched process), or its group (a Popen)."""
    if isinstance(proc, LaunchedProcess):
        proc.kill_tree()
    else:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass


class _Channel:
    """One launcher process and its socket; dead once the socket ends."""

    def __init__(self, spawner: Spawner) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.process = spawner.popen(
                [sys.executable, "-I", "-S", str(PROGRAM), str(os.getpid()),
                 str(theirs.fileno())], pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, start_new_session=True)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self.sock = ours
        self.alive = True
        self._send_lock = threading.Lock()
        self._lock = threading.Lock()
        self._tickets = itertools.count(1)
        self._waiting: dict[int, tuple[threading.Event, dict]] = {}
        self._running: dict[int, LaunchedProcess] = {}
        threading.Thread(target=self._read, name="launcher", daemon=True).start()

    def start(self, argv: list[str], env: dict[str, str], cwd: str,
              fds: list[int], cleanup: list[str] | None = None,
              limits: dict[str, Any] | None = None) -> LaunchedProcess:
        done = threading.Event()
        box: dict[str, Any] = {"argv": argv}  # the process, or the error that refused it
        with self._lock:
            if not self.alive:
                raise OSError("the runner's launcher is gone")
            ticket = next(self._tickets)
            self._waiting[ticket] = (done, box)
        try:
            self._send(("start", ticket, list(argv), dict(env), str(cwd),
                        list(cleanup) if cleanup else None, dict(limits or {})), fds)
        except OSError:
            with self._lock:
                self._waiting.pop(ticket, None)
            raise
        done.wait()
        if "error" in box:
            raise OSError(box["error"])
        return box["proc"]

    def signal(self, pid: int, sig: int) -> None:
        try:
            self._send(("signal", pid, int(sig)), [])
        except OSError:
            pass  # the launcher is gone, and its children with it

    def kill(self, pid: int) -> None:
        try:
            self._send(("kill", pid), [])
        except OSError:
            pass

    def deadline(self, pid: int, when: float | None) -> None:
        try:
            self._send(("deadline", pid, when), [])
        except OSError:
            pass

    def _send(self, message: tuple, fds: list[int]) -> None:
        data = marshal.dumps(message)
        first = len(data).to_bytes(HEADER, "big") + data[:CHUNK]
        with self._send_lock:
            if fds:
                socket.send_fds(self.sock, [first], fds)
            else:
                self.sock.send(first)
            for start in range(CHUNK, len(data), CHUNK):
                self.sock.send(data[start:start + CHUNK])

    def _read(self) -> None:
        while True:
            try:
                data = self.sock.recv(4096)
            except OSError:
                data = b""
            if not data:
                break
            message = marshal.loads(data)
            with self._lock:
                if message[0] == "ended":
                    proc = self._running.pop(message[1], None)
                    if proc is not None:
                        if len(message) > 3 and isinstance(message[3], dict):
                            proc.usage = message[3]
                        proc._end(os.waitstatus_to_exitcode(message[2]))
                    continue
                if message[0] == "watchdog":
                    proc = self._running.get(message[1])
                    if proc is not None:
                        proc.note = WATCHDOG
                    continue
                done, box = self._waiting.pop(message[1])
                if message[0] == "started":
                    box["proc"] = self._running[message[2]] = LaunchedProcess(
                        self, message[2], box["argv"])
                else:
                    box["error"] = message[2]
            done.set()
        with self._lock:  # the launcher is gone: its children die with it, and their groups
            self.alive = False
            for proc in self._running.values():
                try:
                    os.killpg(proc.pid, signal.SIGKILL)  # held by the rest of the group, if any
                except OSError:
                    pass
                proc._end(-signal.SIGKILL, LAUNCHER_DIED)
            self._running.clear()
            self._kill_cgroups()
            for done, box in self._waiting.values():
                box["error"] = "the runner's launcher is gone"
                done.set()
            self._waiting.clear()
        self.sock.close()
        self.process.wait()

    def _kill_cgroups(self) -> None:
        """What the dead launcher had started, in the cgroups it made
        (``gg/<runner pid>/<launcher pid>``)."""
        limited = {h.own: h for h in cgroups.limit_hierarchies().values()}
        for hierarchy in [*cgroups.hierarchies(), *limited.values()]:
            base = os.path.join(hierarchy.own, "gg", str(os.getpid()), str(self.process.pid))
            if os.path.isdir(base):
                cgroups.kill(hierarchy, base)


class Launcher:
    """The runner's launcher, started on first use and again after it died."""

    def __init__(self, spawner: Spawner) -> None:
        self._spawner = spawner
        self._channel: _Channel | None = None
        self._owner = 0
        self._lock = threading.Lock()

    def channel(self) -> _Channel:
        with self._lock:
            channel = self._channel
            if channel is None or not channel.alive or self._owner != os.getpid():
                channel = self._channel = _Channel(self._spawner)
                self._owner = os.getpid()
            return channel

    def pid(self) -> int | None:
        """The launcher process's pid while one runs (for tests and diagnostics)."""
        channel = self._channel
        return channel.process.pid if channel is not None and channel.alive else None

    def start(self, argv: list[str], *, env: dict[str, str] | None, cwd: str | Path,
              stdin: int | None = None, stdout: int | None = None,
              stderr: int | None = None,
              handed: bytes | None = None,
              listening: int | None = None,
              cleanup: list[str] | None = None,
              limits: dict[str, Any] | None = None) -> LaunchedProcess | subprocess.Popen:
        """Start ``argv`` in a session and process group of its own, tied to the runner.

        ``stdin`` / ``stdout`` / ``stderr``: a file descriptor, or None for /dev/null;
        ``stdout=PIPE`` gives the handle a readable ``stdout``; ``stderr=STDOUT`` joins it.
        ``handed``: bytes the child reads on fd 3 (``isolation.Launch.handed``: bwrap's
        ``--args``, the command's environment kept off ``env`` and every command line).
        ``listening``: a listening socket the child gets next (fd 3, or 4 after ``handed``):
        a service's socket activation (gg.runner.socket_activation); the caller keeps its own.
        ``cleanup``: an argv the launcher runs (with ``env``) when it kills the tree itself
        (the watchdog, or the runner gone): ``isolation.Launch.cleanup``, a container's
        ``ENGINE rm --force NAME``, since the container is not in the tree's cgroup.
        ``limits``: the resource limits its cgroups enforce (gg.domain.limits: cpus, memory
        in bytes, pids); OSError when one cannot be enforced here.
        OSError when it cannot be started (the child's own exec error is its output and
        exit status 127, as a shell would say it).
        """
        env = dict(os.environ) if env is None else env
        if not SUPPORTED:
            if handed is not None or listening is not None:
                raise OSError("a sandbox's environment is handed over on Linux only")
            if limits:
                raise OSError("resource limits are enforced on Linux only")
            null = subprocess.DEVNULL
            return self._spawner.popen(argv, env=env, cwd=cwd,
                                       stdin=null if stdin is None else stdin,
                                       stdout=null if stdout is None else stdout,
                                       stderr=null if stderr is None else stderr,
                                       start_new_session=True)
        opened: list[int] = []
        reader: int | None = None
        null = -1  # /dev/null, opened below for each stream not given (read only then)
        try:
            if stdin is None or stdout is None or stderr is None:
                null = os.open(os.devnull, os.O_RDWR)
                opened.append(null)
            if stdout == PIPE:
                reader, stdout = os.pipe()
                opened.append(stdout)
            out = null if stdout is None else stdout
            err = out if stderr == STDOUT else (null if stderr is None else stderr)
            fds = [null if stdin is None else stdin, out, err]
            if handed is not None:
                fds.append(_memory_file(handed))
                opened.append(fds[-1])
            if listening is not None:
                fds.append(listening)
            where = os.path.abspath(cwd)  # the launcher's own folder is not the runner's
            channel = self.channel()
            try:
                proc = channel.start(argv, env, where, fds, cleanup, limits)
            except OSError:
                if channel.alive:
                    raise
                proc = self.channel().start(argv, env, where, fds, cleanup,
                                            limits)  # it had just died
        except BaseException:
            if reader is not None:
                os.close(reader)
            raise
        finally:
            for fd in opened:
                os.close(fd)
        if reader is not None:
            proc.stdout = open(reader, "rb")
        return proc


def _memory_file(data: bytes) -> int:
    """A descriptor reading ``data`` from its start: in memory, never on a disk or a
    command line, and of any size (a pipe would block its writer past 64 KiB)."""
    fd = os.memfd_create("gg-handed", os.MFD_CLOEXEC)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


LAUNCHER = Launcher(SPAWNER)
