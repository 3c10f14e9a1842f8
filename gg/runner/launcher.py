"""The runner's launcher: one small long-lived process that starts every flight's process.

A flight's process must die with the runner, even when the runner is SIGKILLed, and it
must not cost a Python start of its own (a reaper per flight was half of a flight's CPU).
So the runner starts this program once, and hands it each process to start over a Unix
socket (:mod:`gg.runner.launching`)::

    runner ──socket──> launcher ──fork──> flight A's process (session and group leader) ──> …
                                 ──fork──> flight B's process …

- The runner sends argv, environment and working directory, and the flight's stdin, stdout
  and stderr as file descriptors (``SCM_RIGHTS``), plus, for a sandbox, a fourth that the
  child gets as fd 3: what bwrap reads the command's own environment from (``--args 3``),
  so the environment bwrap starts with is the runner's. The launcher spawns the command
  (``posix_spawn``: the kernel holds the launcher until the child has exec'd, so no copy of
  the launcher is made and touched): the child makes a session and process group of its
  own, puts the three descriptors on 0, 1 and 2, restores the signals Python changed, and
  execs, the program found on the flight's own ``PATH``. The launcher answers the pid, and
  when the child ends, its wait status (so the runner reads the same exit code, or the same
  signal, as a child of its own). A command that cannot be spawned (not found, not
  executable, a working directory that is not there) is forked instead, and the fork says
  why on the flight's stderr and exits 127, as a shell would; that child also takes a
  parent-death SIGKILL tied to the launcher, which a spawned child cannot.
- Every process it starts gets a session keyring of its own, empty: before each start the
  launcher joins a new anonymous session keyring (``keyctl(KEYCTL_JOIN_SESSION_KEYRING,
  NULL)``, one system call), which the child inherits. No flight, service or console ever
  holds the runner's session keyring (an admin's login secrets), nor another flight's. A
  kernel without keyrings (``ENOSYS``) or a seccomp filter that refuses the call (``EPERM``,
  a container's default) leaves no keyring to reach; any other failure refuses the start.
- The launcher holds a parent-death signal (``PR_SET_PDEATHSIG``) tied to the runner's
  long-lived spawner thread, and reads the socket: when the runner dies (the signal, or the
  socket's end of file, whichever comes first), the launcher SIGKILLs the process group of
  every child it has not reaped, starts each one's cleanup (below), then exits. A launcher
  killed first takes its children with it: the runner sees the socket end, SIGKILLs each of
  their groups, reports those flights as killed (``-9``, with a note), and starts a new
  launcher for the next one.
- A graceful stop is the runner's: SIGTERM to the group, SIGKILL after its grace, sent
  through the launcher (``signal``), which signals a group only while its leader is not yet
  reaped, so a recycled pid is never hit. SIGTERM and SIGINT to the launcher itself are
  ignored: a service manager's stop reaches the flights directly and they get their grace.

- Each child starts in a cgroup of its own (:mod:`gg.runner.cgroups`, where the host lets
  the launcher make one): the launcher joins the new cgroup, starts the child, and goes
  back, so the child's whole tree is in it, including what leaves its group (``setsid``, a
  double fork, a nested PID namespace). When the child is reaped, whatever of its tree is
  left is killed and the cgroup removed before the runner hears ``ended``: nothing of a
  flight outlives it. ``kill`` kills a child's whole tree now (the runner's SIGKILL after
  the grace). Without a cgroup, both fall back to the child's process group, and what left
  the group escapes.
- The watchdog: the runner gives each child a kill deadline (``deadline``, a
  ``CLOCK_MONOTONIC`` time, the same clock in every process), moved by each renewal of the
  flight's lease. When one passes the launcher kills that child's whole tree by itself, as
  ``kill`` would, and tells the runner (``watchdog``): a frozen runner (SIGSTOP, a stalled
  VM) cannot renew, and its flights still stop before their leases run out
  (docs/lease-protocol.md, "The runner stops what it cannot renew").
- A start may carry the child's resource limits (``cpus``, ``memory`` in bytes, ``pids``):
  the child also starts in a cgroup of its own in each hierarchy of the ``memory``, ``cpu``,
  ``cpuacct`` and ``pids`` controllers the host has (:func:`gg.runner.cgroups.limit_bases`;
  v1 on a hybrid host), with the limits written there; a limit whose controller is missing
  refuses the start. Every child is counted so, limited or not: ``ended`` carries its usage
  (peak memory, CPU seconds, and how many of its processes the kernel killed over its
  memory limit), read before its cgroups are emptied and removed.
- A start may carry the child's cleanup, an argv (a container's ``ENGINE rm --force NAME``:
  a container lives in its engine's cgroups, outside the child's tree). The launcher runs it
  when it kills that tree on its own, at the watchdog's deadline and when the runner is
  gone; never for a child that ended otherwise (the runner cleans up after those, as after
  its own ``kill``). It is spawned, not waited for: in a session of its own, with the
  environment the child started with, on /dev/null; reaped with the children, and killed
  if it still runs ``CLEANUP_BOUND`` seconds later (the runner gone, it is left to finish).
  The runner's own cleanup afterwards finds nothing left, and removes nothing twice.

The wire (``SOCK_SEQPACKET``, values in ``marshal``, the peer being the runner only)::

    runner -> launcher   a message of N bytes: first packet = 4-byte N + up to CHUNK bytes
                         (the descriptors ride on it), then packets of the rest
                         ("start", ticket, argv, env, cwd, cleanup argv or None,
                          limits {cpus, memory, pids})
                         + fds 0, 1, 2 [, 3] [, socket] (a start without cleanup or
                         limits, of five or six values, is read as one with None)
                         ("signal", pid, signal number) · ("kill", pid)
                         ("deadline", pid, monotonic time or None)
    launcher -> runner   ("started", ticket, pid) · ("refused", ticket, message)
                         ("ended", pid, wait status, usage) · ("watchdog", pid)

The standard library only: the runner runs it by path
(``python -I -S launcher.py RUNNER_PID SOCKET_FD``), without gg on ``sys.path``.
"""

from __future__ import annotations

# The signal module's C half: the same functions and numbers, without the enum classes.
import _signal as signal
import ctypes
import importlib.util
import marshal
import math
import os
import select
import socket
import sys
import time

PR_SET_PDEATHSIG = 1
KEYCTL_JOIN_SESSION_KEYRING = 1
# keyctl's system call number, by machine (os.uname().machine).
KEYCTL_SYSCALL = {"x86_64": 250, "aarch64": 219, "arm64": 219, "riscv64": 219,
                  "ppc64le": 280, "ppc64": 280, "s390x": 280}
NO_KEYRINGS = (38, 1)  # ENOSYS: no keyrings in this kernel; EPERM: a seccomp filter refuses
PARENT_GONE = signal.SIGHUP  # what the kernel sends the launcher when the runner dies
CHUNK = 32_768  # bytes of a message per packet, well under any socket buffer
HEADER = 4
CLEANUP_BOUND = 60.0  # seconds a child's cleanup may run before the launcher kills it
# Limits whose controller counts nothing a flight reports: its cgroup is made only when asked
# (memory and cpuacct, which count peak memory and CPU seconds, are made for every child).
UNCOUNTED = {"cpus": "cpu", "pids": "pids"}
FDS = 5  # the most descriptors a start carries: 0, 1, 2, what bwrap reads on 3, a socket
# What the child puts back before exec: the handlers set here, and what Python ignores.
RESTORED = (signal.SIGCHLD, signal.SIGHUP, signal.SIGTERM, signal.SIGINT, signal.SIGPIPE,
            signal.SIGXFSZ)


def _noop(*_args) -> None:
    pass


def _cgroups():
    """gg.runner.cgroups, loaded by path: this program runs without gg on ``sys.path``."""
    spec = importlib.util.spec_from_file_location(
        "gg_runner_cgroups", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                          "cgroups.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Launcher:
    def __init__(self, runner_pid: int, sock: socket.socket) -> None:
        self.runner_pid = runner_pid
        self.sock = sock
        self.children: set[int] = set()  # started, not yet reaped: their groups are ours
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.me = os.getpid()
        self.deadlines: dict[int, float] = {}  # the watchdog's: pid -> monotonic kill time
        self.cgroups = _cgroups()
        # gg/<runner pid>/<launcher pid>: a launcher started after one died never meets its
        # predecessor's cgroups (which the runner kills)
        self.hierarchy, self.cgroup_base, _ = self.cgroups.find(f"{runner_pid}/{self.me}")
        self.cgroup_of: dict[int, str] = {}  # pid -> its tree's cgroup
        # Resource limits and usage (gg fly --cpus --memory --pids): controller -> where a
        # child's cgroup for it is made (a v1 hierarchy's own directory, or the tree's
        # cgroup above when v2 has it), and each child's, pid -> controller -> directory
        self.limit_bases = self.cgroups.limit_bases(f"{runner_pid}/{self.me}",
                                                    self.hierarchy, self.cgroup_base)
        self.limit_kinds = {c: ("v2" if h.kind == self.cgroups.V2 else "v1")
                            for c, (h, _base) in self.limit_bases.items()}
        self.limit_of: dict[int, dict[str, str]] = {}
        # pid -> (argv, env): what stops what the child's tree leaves outside its cgroup (a
        # container, in its engine's cgroups), run when the launcher kills that tree itself
        self.cleanups: dict[int, tuple[list[str], dict[str, str]]] = {}
        self.cleaning: dict[int, float] = {}  # a running cleanup's pid -> its kill time

    def fresh_keyring(self) -> None:
        """Join a new, empty, anonymous session keyring: the next child starts with it."""
        number = KEYCTL_SYSCALL.get(os.uname().machine)
        if number is None:
            raise OSError(0, f"a fresh session keyring cannot be made on {os.uname().machine}")
        if self.libc.syscall(number, KEYCTL_JOIN_SESSION_KEYRING, None) >= 0:
            return
        err = ctypes.get_errno()
        if err not in NO_KEYRINGS:
            raise OSError(err, f"no fresh session keyring ({os.strerror(err)})")

    def pdeathsig(self, sig: int) -> bool:
        return self.libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0

    def kill_all(self) -> None:
        for pid in list(self.children):
            self.signal_group(pid, signal.SIGKILL)
            self.kill_tree(pid)
            self.clean_up(pid)  # left to finish on its own: the launcher exits next
            self.drop_limits(pid)
        for base, hierarchy in {b: h for h, b in self.limit_bases.values()}.items():
            if base != self.cgroup_base:
                self.cgroups.kill(hierarchy, base)
                try:
                    os.rmdir(os.path.dirname(base))  # the runner's, when it was the last
                except OSError:
                    pass
        if self.cgroup_base is not None:
            self.cgroups.kill(self.hierarchy, self.cgroup_base)
            try:
                os.rmdir(os.path.dirname(self.cgroup_base))  # the runner's, when it was the last
            except OSError:
                pass

    def kill_tree(self, pid: int) -> None:
        """SIGKILL child ``pid``'s whole tree: its cgroup, else its process group."""
        path = self.cgroup_of.pop(pid, None)
        if path is None or not self.cgroups.kill(self.hierarchy, path):
            if pid in self.children:
                self.signal_group(pid, signal.SIGKILL)
            if path is not None:
                self.cgroup_of[pid] = path  # not empty yet: tried again when it is reaped

    def watch(self) -> float | None:
        """Kill the tree of every child whose deadline passed, and start its cleanup; kill a
        cleanup that outran its bound. The milliseconds until the next of these (None:
        none)."""
        now = time.monotonic()
        for pid, when in list(self.deadlines.items()):
            if when <= now:
                del self.deadlines[pid]
                if pid in self.children:
                    self.send(("watchdog", pid))
                    self.kill_tree(pid)
                    self.clean_up(pid)
        for pid, when in list(self.cleaning.items()):
            if when <= now:
                self.cleaning[pid] = math.inf  # killed once; reaped with the others
                self.signal_group(pid, signal.SIGKILL)
        times = [t for t in (*self.deadlines.values(), *self.cleaning.values()) if t < math.inf]
        if not times:
            return None
        return max(0.0, min(times) - time.monotonic()) * 1000

    def clean_up(self, pid: int) -> None:
        """Start child ``pid``'s cleanup (a container's ``ENGINE rm --force NAME``), if it has
        one: in a session of its own, with the environment the child started with, on
        /dev/null. Never waited for here: reaped with the children, killed past
        ``CLEANUP_BOUND``. The runner's own cleanup, later, finds nothing left to remove."""
        argv, env = self.cleanups.pop(pid, (None, None))
        if not argv or env is None:
            return
        program = find(argv[0], env)
        if program is None:
            return
        try:
            self.fresh_keyring()
            os.chdir("/")
            cleaner = os.posix_spawn(
                program, argv, env, setsid=True, setsigdef=RESTORED,
                file_actions=[(os.POSIX_SPAWN_OPEN, n, os.devnull, os.O_RDWR, 0)
                              for n in range(3)])
        except OSError:
            return
        self.cleaning[cleaner] = time.monotonic() + CLEANUP_BOUND

    def signal_group(self, pid: int, sig: int) -> None:
        """``sig`` to the group child ``pid`` leads; to the child alone while it has not made
        its group yet (it is forked and answered at once, and makes its session only when it
        first runs). Either way ``sig`` is not lost: the child holds every signal blocked
        until its own handlers are the defaults again."""
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        except OSError:
            pass

    def serve(self) -> int:
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)
        for sig in (signal.SIGCHLD, PARENT_GONE, signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, _noop)  # a handler, so each one is written to the wakeup pipe
        if not self.pdeathsig(PARENT_GONE):
            print("the parent-death signal cannot be set here", file=sys.stderr)
            return 127
        poller = select.poll()
        poller.register(self.sock.fileno(), select.POLLIN)
        poller.register(wake_r, select.POLLIN)
        try:
            while os.getppid() == self.runner_pid:  # else the runner died before it was armed
                for fd, _ in poller.poll(self.watch()):
                    if fd == wake_r:
                        try:
                            os.read(wake_r, 512)
                        except BlockingIOError:
                            pass
                        self.reap()
                    elif not self.take():
                        return 0  # the runner closed its end: it is gone
        finally:
            self.kill_all()
        return 0

    def reap(self) -> None:
        while self.children or self.cleaning:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if self.cleaning.pop(pid, None) is not None:
                continue  # a cleanup: the runner never heard of it
            self.children.discard(pid)
            self.deadlines.pop(pid, None)
            self.cleanups.pop(pid, None)  # ended: the runner cleans up after it, as ever
            used = self.cgroups.usage(self.limit_of.get(pid, {}), self.limit_kinds)
            if pid in self.cgroup_of:  # what is left of its tree goes with it
                self.kill_tree(pid)
            self.drop_limits(pid)
            self.send(("ended", pid, status, used))

    def send(self, message: tuple) -> None:
        try:
            self.sock.send(marshal.dumps(message))
        except OSError:
            pass  # the runner is gone; the loop notices its end of file

    def receive(self) -> tuple[tuple | None, list[int]]:
        data, fds, _flags, _addr = socket.recv_fds(self.sock, HEADER + CHUNK, FDS)
        for fd in fds:  # a spawned command gets them only as the 0, 1, 2 (3) it is given
            os.set_inheritable(fd, False)
        if not data:
            return None, fds
        size = int.from_bytes(data[:HEADER], "big")
        parts = [data[HEADER:]]
        got = len(parts[0])
        while got < size:
            more = self.sock.recv(CHUNK)
            if not more:
                return None, fds
            parts.append(more)
            got += len(more)
        return marshal.loads(b"".join(parts)), fds

    def take(self) -> bool:
        message, fds = self.receive()
        if message is None:
            for fd in fds:
                os.close(fd)
            return False
        if message[0] == "signal":
            _, pid, sig = message
            if pid in self.children:  # not reaped yet: the group id is still its own
                self.signal_group(pid, sig)
        elif message[0] == "kill":
            if message[1] in self.children:
                self.kill_tree(message[1])
        elif message[0] == "deadline":
            _, pid, when = message
            if pid in self.children and when is not None:
                self.deadlines[pid] = when
            else:
                self.deadlines.pop(pid, None)
        elif message[0] == "start":  # a runner from before cleanups sends five values
            _, ticket, argv, env, cwd, *rest = message
            cleanup = rest[0] if rest else None
            limits = (rest[1] if len(rest) > 1 else None) or {}
            cgroup = self.new_cgroup(ticket)
            dirs: dict[str, str] = {}
            try:
                dirs = self.new_limit_cgroups(ticket, cgroup, limits)
                pid, joined = self.start_in(cgroup, argv, env, cwd, fds, dirs)
            except OSError as exc:
                self.send(("refused", ticket, f"cannot start a process: "
                                              f"{exc.strerror or exc}"))
            else:
                self.children.add(pid)
                if cleanup:
                    self.cleanups[pid] = (list(cleanup), env)
                if joined:
                    assert cgroup is not None, "start_in joins only a cgroup it was given"
                    self.cgroup_of[pid] = cgroup
                self.limit_of[pid] = dirs
                self.send(("started", ticket, pid))
            finally:
                if cgroup is not None and cgroup not in self.cgroup_of.values():
                    self.cgroups.remove(cgroup)
                for path in set(dirs.values()) - {cgroup}:
                    if dirs not in self.limit_of.values():
                        self.cgroups.remove(path)
        for fd in fds:
            os.close(fd)
        return True

    def new_cgroup(self, ticket: int) -> str | None:
        """A cgroup for the next child, or None when none can be made here."""
        if self.cgroup_base is None:
            return None
        try:
            return self.cgroups.make(self.cgroup_base, str(ticket))
        except OSError:
            return None

    def new_limit_cgroups(self, ticket: int, cgroup: str | None,
                          limits: dict) -> dict[str, str]:
        """controller -> the next child's cgroup for its limits and usage: in each v1
        hierarchy a new one, in v2 the child's own ``cgroup``; ``limits`` written there.
        OSError when a limit asked for cannot be enforced here (nothing is left made)."""
        dirs: dict[str, str] = {}
        made: dict[str, str] = {}
        try:
            for controller, (hierarchy, base) in self.limit_bases.items():
                if controller in UNCOUNTED.values() and not any(
                        limits.get(n) is not None for n, c in UNCOUNTED.items()
                        if c == controller):
                    continue  # cpu and pids only limit: made only when asked
                if hierarchy.kind == self.cgroups.V2:
                    if cgroup is not None:
                        dirs[controller] = cgroup
                    continue
                if base not in made:
                    try:
                        made[base] = self.cgroups.make(base, str(ticket))
                    except FileExistsError:  # left by a child whose cgroup was not emptied
                        made[base] = os.path.join(base, str(ticket))
                dirs[controller] = made[base]
            for name, controller in (*UNCOUNTED.items(), ("memory", "memory")):
                if limits.get(name) is not None and controller not in dirs:
                    raise OSError(0, f"cgroup controller {controller} not available")
            self.cgroups.set_limits(dirs, self.limit_kinds, limits)
        except OSError:
            for path in made.values():
                self.cgroups.remove(path)
            raise
        return dirs

    def drop_limits(self, pid: int) -> None:
        """Empty and remove a child's v1 cgroups (its tree's cgroup is killed apart)."""
        dirs = self.limit_of.pop(pid, {})
        for controller, path in dirs.items():
            hierarchy, _base = self.limit_bases[controller]
            if hierarchy.kind != self.cgroups.V2:
                self.cgroups.kill(hierarchy, path)

    def start_in(self, cgroup: str | None, argv: list[str], env: dict[str, str], cwd: str,
                 fds: list[int], dirs: dict[str, str] | None = None) -> tuple[int, bool]:
        """Start the child from inside ``cgroup`` (and the v1 cgroups of its limits,
        ``dirs``): the launcher joins them, starts the child (which is born there, its every
        descendant with it) and goes back to its own. Returns the pid and whether the child
        is in ``cgroup``."""
        joined = False
        if cgroup is not None:
            try:
                self.cgroups.join(cgroup)
                joined = True
            except OSError:
                pass
        limited = []
        try:
            for controller, path in (dirs or {}).items():
                hierarchy, _base = self.limit_bases[controller]
                if hierarchy.kind != self.cgroups.V2 and hierarchy.own not in limited:
                    self.cgroups.join(path)  # OSError: refused, nothing started
                    limited.append(hierarchy.own)
            return self.start(argv, env, cwd, fds), joined
        finally:
            if joined:
                self.cgroups.join(self.hierarchy.own)
            for own in limited:
                self.cgroups.join(own)

    def start(self, argv: list[str], env: dict[str, str], cwd: str, fds: list[int]) -> int:
        """Spawn ``argv``; fork it where spawning fails, so that its child says why. Either
        way it starts in a session keyring of its own."""
        self.fresh_keyring()
        program = find(argv[0], env)
        if program is not None:
            try:
                os.chdir(cwd)  # this process has one thread: the child starts here
                return os.posix_spawn(
                    program, argv, env, setsid=True, setsigdef=RESTORED,
                    file_actions=[(os.POSIX_SPAWN_DUP2, fd, n) for n, fd in enumerate(fds)])
            except OSError:
                pass
        return self.fork(argv, env, cwd, fds)

    def fork(self, argv: list[str], env: dict[str, str], cwd: str, fds: list[int]) -> int:
        # Every signal is held across the fork: one sent to the child before it has put its
        # handlers back (a stop that comes at once) waits for the defaults, then acts.
        held = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
        pid = os.fork()
        if pid:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
            return pid
        try:  # the child: nothing here may return into the launcher's loop
            for sig in RESTORED:
                signal.signal(sig, signal.SIG_DFL)
            signal.set_wakeup_fd(-1)
            os.setsid()
            self.pdeathsig(signal.SIGKILL)
            if os.getppid() != self.me:  # the launcher died before the signal was armed
                os._exit(137)
            signal.pthread_sigmask(signal.SIG_SETMASK, held)  # a signal held till now acts here
            for target, fd in enumerate(fds):
                os.dup2(fd, target)  # dup2 leaves the copy inheritable
            os.closerange(len(fds),
                          os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 65536)
            try:
                os.chdir(cwd)
                os.execvpe(argv[0], argv, env)
            except OSError as exc:
                os.write(2, f"{argv[0]}: {exc.strerror}\n".encode("utf-8", "replace"))
            os._exit(127)
        except BaseException:
            os._exit(127)


def find(name: str, env: dict[str, str]) -> str | None:
    """The file ``name`` execs as, searched on the flight's own ``PATH`` (as ``execvpe``
    does), or None when there is none to run."""
    candidates = [name] if os.path.dirname(name) else [
        os.path.join(folder, name) for folder in os.get_exec_path(env)]
    for path in candidates:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: launcher.py RUNNER_PID SOCKET_FD", file=sys.stderr)
        return 127
    os.set_inheritable(int(argv[2]), False)  # no command it starts may hold the runner's end
    sock = socket.socket(fileno=int(argv[2]))
    return Launcher(int(argv[1]), sock).serve()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
