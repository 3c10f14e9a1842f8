"""Keeping a service flight running on this runner (gg.domain.services, docs/services.md).

One supervisor per service, on the flight's own thread, inside :meth:`FlightRun.run`: the lease
is kept by the same keeper as any flight's, which also brings the newest spec with every
renewal. The supervisor::

    start generation N ──> ready? (port answering, or --ready-cmd exit 0) ──> serving
       ^                                                       |
       |   exited: restart after backoff (doubling, capped)    |
       +-------------------------------------------------------+
    a newer spec (generation N+1) while N serves:
       start N+1 beside N ──ready──> new connections go to N+1 at once; N is stopped once its
                                     connections finish or the grace passes (SIGTERM, grace,
                                     SIGKILL)
                    └─never ready──> N+1 stopped, N keeps serving, "update_failed" reported

With ``--port P`` the runner listens on P itself (:class:`Forwarder`), exclusively, and
forwards each connection to the serving generation's own loopback port, which the generation
gets in ``$PORT``; only a listener the generation's own processes hold is served there, and
only the socket the generation made at ``$SERVICE_SOCKET`` (gg.runner.service_ports). Under
``egress: none`` (or ``allowlist``) the generation lives in a network namespace of its own
(the sandbox's, or its flight's), so its loopback is not the runner's: the generation may listen on the Unix
socket ``$SERVICE_SOCKET`` (a path in its workspace, which the runner sees too), and a runner
allowed to enter other namespaces (root) also reaches ``127.0.0.1:$PORT`` inside the
generation's namespace (:class:`Namespace`). Each step is reported as a fact (``note`` with a
``service`` word). When the lease
is lost or the flight cancelled, every generation is stopped and the forwarder closed before
anything else: a service never serves from two runners. A runner that cannot renew the lease
in time (a partition, a stalled control plane) stops accepting on the forwarder and stops every
generation before the lease may be granted elsewhere, and the launcher kills each generation's
tree by itself when the runner is frozen (docs/lease-protocol.md, "The runner stops what it
cannot renew"): the re-placement never serves beside it.
"""

from __future__ import annotations

import ctypes
import os
import queue
import signal
import socket
import subprocess
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

from gg.domain import services
from gg.runner import isolation, socket_activation
from gg.runner.launching import LAUNCHER, LaunchedProcess, kill_tree, signal_group
from gg.runner.service_ports import (
    NotTheGeneration,
    connect_own_socket,
    foreign,
    generation_port,
    listen_exclusively,
    listeners,
    socket_inodes,
)

POLL = 0.1  # seconds between looks at the processes, the readiness and the spec
READY_CHECK_TIMEOUT = 5.0  # one --ready-cmd run, or one connection attempt, at most
REPICK_GRACE = 0.5  # a generation whose port was taken serves nothing: stopped quickly


CLONE_NEWNET = 0x40000000
SOCKET_NAME = ".service-{}.sock"  # in the workspace: $SERVICE_SOCKET of generation N


def _net_namespace(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:
        return None


def namespace_of(pid: int) -> int | None:
    """The pid of a process at or under ``pid`` whose network namespace is not ours (the
    sandbox's), or None while there is none yet."""
    import psutil

    ours = _net_namespace(os.getpid())
    try:
        tree = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return None
    for proc in tree:
        theirs = _net_namespace(proc.pid)
        if theirs is not None and theirs != ours:
            return proc.pid
    return None


class Namespace:
    """A thread that lives in another process's network namespace and opens connections there.

    ``setns(2)`` moves only the calling thread; a socket keeps the namespace it was made in, so
    connections made here serve the forwarder's other threads. Entering a namespace needs
    CAP_SYS_ADMIN over it: a root runner has it, an unprivileged one does not (:meth:`enter`
    says so with an OSError)."""

    def __init__(self, pid: int):
        self._requests: queue.SimpleQueue = queue.SimpleQueue()
        self._entered: Future = Future()
        self._fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        self._thread = threading.Thread(target=self._live, name=f"netns-{pid}", daemon=True)
        self._thread.start()

    def enter(self) -> None:
        self._entered.result(timeout=10)

    def connect(self, port: int, timeout: float) -> socket.socket:
        answer: Future = Future()
        self._requests.put((port, timeout, answer))
        return answer.result(timeout=timeout + 5)

    def close(self) -> None:
        self._requests.put(None)

    def _live(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        try:
            if libc.setns(self._fd, CLONE_NEWNET) != 0:
                err = ctypes.get_errno()
                raise OSError(err, os.strerror(err))
        except BaseException as exc:  # noqa: BLE001 - told to whoever waits on enter()
            self._entered.set_exception(exc)
            return
        finally:
            os.close(self._fd)
        self._entered.set_result(None)
        while (request := self._requests.get()) is not None:
            port, timeout, answer = request
            try:
                answer.set_result(socket.create_connection(("127.0.0.1", port), timeout=timeout))
            except BaseException as exc:  # noqa: BLE001 - the caller's to handle
                answer.set_exception(exc)


@dataclass
class Generation:
    number: int
    spec: dict
    port: int
    proc: LaunchedProcess | subprocess.Popen | None = None
    launch: isolation.Launch | None = None
    started_wall: float = field(default_factory=time.time)
    ready: bool = False
    reader: threading.Thread | None = None
    socket_path: Path | None = None  # $SERVICE_SOCKET, under egress none
    namespace: Namespace | None = None  # entered on the first connection, when we may
    listening: frozenset[int] = frozenset()  # its listeners on $PORT, once seen to be its own
    strangers: frozenset[int] = frozenset()  # listeners on $PORT not its own, at the last look

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def connect(self, timeout: float) -> socket.socket:
        """A connection to this generation: its loopback port, or under egress none its
        socket (when it listens there) or its port inside its namespace."""
        if self.socket_path is None:
            self.check_listeners()
            return socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        if os.path.lexists(self.socket_path):
            return connect_own_socket(self.socket_path, timeout)
        if self.namespace is None:
            pid = namespace_of(self.proc.pid) if self.proc is not None else None
            if pid is None:
                raise ConnectionRefusedError("the generation's namespace is not there yet")
            self.namespace = Namespace(pid)
        self.namespace.enter()
        return self.namespace.connect(self.port, timeout)

    def check_listeners(self) -> None:
        """Refuse unless every socket listening on ``$PORT`` is this generation's own: another
        flight on the host may have bound the port first (or beside it, with SO_REUSEPORT),
        and would otherwise be handed the service's connections and read ready."""
        found = listeners(self.port)
        if not found:
            raise ConnectionRefusedError("nothing listens on the generation's port yet")
        if found <= self.listening:
            return
        if self.proc is None or not found <= socket_inodes(self.proc.pid):
            raise NotTheGeneration(f"port {self.port} is held by a process that is not "
                                   "the generation's")
        self.listening = frozenset(found)

    def taken(self) -> bool:
        """Something that is not this generation listens on its ``$PORT`` (a flight on the
        host bound it first), seen on two looks in a row while the generation runs (a tree
        read as it forks is not a stranger), on one once it has ended. Under egress none (but
        a handed socket, made on the runner's loopback) the port lies in the generation's own
        namespace, where no other flight is."""
        if self.socket_path is not None or self.proc is None:
            return False
        found = listeners(self.port)
        if not found or found <= self.listening:
            self.strangers = frozenset()
            return False
        proc = self.proc  # not None, said above (a lambda keeps no narrowing)
        seen, self.strangers = self.strangers, foreign(
            self.port, lambda: socket_inodes(proc.pid) if self.alive else set())
        if not self.strangers:
            self.listening = frozenset(found)
            return False
        return bool(self.strangers & seen) or not self.alive

    def close(self) -> None:
        if self.namespace is not None:
            self.namespace.close()


class Forwarder:
    """Listens on the service's port and pipes each connection to the serving generation."""

    def __init__(self, port: int):
        self.sock = listen_exclusively(port)
        self.sock.settimeout(POLL)
        self.target: Generation | None = None
        self.active: dict[int, int] = {}  # open connections, by generation number
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept, name=f"forward-{port}", daemon=True)
        self._thread.start()

    def open_to(self, number: int) -> int:
        with self._lock:
            return self.active.get(number, 0)

    def close(self) -> None:
        self.stop_accepting()
        self._thread.join(timeout=5)

    def stop_accepting(self) -> None:
        """No new connection from now on (quick: the alarm's thread calls it)."""
        self._closed.set()
        try:
            self.sock.close()
        except OSError:
            pass

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with self._lock:
                target = self.target
                if target is not None:
                    self.active[target.number] = self.active.get(target.number, 0) + 1
            if target is None:
                conn.close()  # nothing serves yet: refused, as a stopped service would be
                continue
            threading.Thread(target=self._pipe, args=(conn, target), daemon=True).start()

    def _pipe(self, conn: socket.socket, target: Generation) -> None:
        try:
            upstream = target.connect(READY_CHECK_TIMEOUT)
        except OSError:
            conn.close()
            self._done(target.number)
            return
        upstream.settimeout(None)
        conn.settimeout(None)
        back = threading.Thread(target=_copy, args=(upstream, conn), daemon=True)
        back.start()
        _copy(conn, upstream)
        back.join()
        for s in (conn, upstream):
            try:
                s.close()
            except OSError:
                pass
        self._done(target.number)

    def _done(self, number: int) -> None:
        with self._lock:
            self.active[number] = self.active.get(number, 1) - 1


def _copy(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    try:
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass


class Supervisor:
    def __init__(self, run, workspace: Path):
        self.run = run
        self.workspace = workspace
        self.forwarder: Forwarder | None = None
        self.failed: set[int] = set()
        self.stopping_old: list[threading.Thread] = []

    # -- the loop --------------------------------------------------------------------------

    def fly(self) -> str:
        run = self.run
        # A generation that never got ready is not where a new placement starts: the one
        # that last served is (the control plane keeps both in the spec).
        spec = services.to_start(run.service_spec or run.flight.service)
        self.failed.update(spec.get("failed", []))
        if spec.get("socket_activation") and (run.policy or {}).get("isolation") == "container":
            reason = ("socket activation is not offered in a container: open it again "
                      "without --socket-activation, or on a runner of another isolation")
            self._fact(services.PORT_BUSY, spec["generation"], reason=reason)
            run.say(f"{run.id}: {reason}")
            while not self._wait(POLL * 10):  # it holds its lease and waits: no claim a moment
                pass
            run._flush(final=True)
            if run.lost.is_set():
                return "ended" if run.ended_by_server.is_set() else "lost"
            return run._hand_back()
        if spec.get("port") is not None:
            self.forwarder = self._listen(int(spec["port"]), spec)
            if self.forwarder is None:  # it must stop while it waited for its port
                run._flush(final=True)
                if run.lost.is_set():
                    return "ended" if run.ended_by_server.is_set() else "lost"
                return run._hand_back()
            run.on_lease_out.append(self.forwarder.stop_accepting)
        current: Generation | None = None
        try:
            current = self._start(spec)
            consecutive = repicks = 0
            while not self._stopping():
                run._flush()
                if not current.ready and current.taken():
                    repicks += 1
                    restarted = self._repick(current, repicks)
                    if restarted is None:
                        current = None  # stopped already
                        break
                    current = restarted
                    continue
                if not current.ready and current.alive and self._is_ready(current):
                    self._serve(current)
                    consecutive = repicks = 0
                if not current.alive:
                    code = current.proc.returncode if current.proc else None
                    consecutive += 1
                    current.ready = False
                    delay = services.restart_delay(consecutive, spec["backoff"],
                                                   spec["backoff_cap"])
                    self._fact(services.EXITED, current.number, exit_code=code,
                               consecutive=consecutive, restart_in=delay)
                    run.say(f"{run.id}: generation {current.number} exited ({code}); "
                            f"restarting in {delay:g}s")
                    if self._wait(delay):
                        break
                    wanted = self._wanted()
                    if wanted["generation"] > current.number and \
                            wanted["generation"] not in self.failed:
                        spec = wanted
                        self._fact(services.SWITCHED, spec["generation"], ready=False,
                                   started_at=time.time())
                    current = self._start(spec)
                    continue
                wanted = self._wanted()
                if wanted["generation"] > current.number and wanted["generation"] not in self.failed:
                    if not current.ready:  # nothing serves yet: no one to keep it up for
                        self._stop(current, grace=spec["stop_grace"])
                        spec = wanted
                        self._fact(services.SWITCHED, spec["generation"], ready=False,
                                   started_at=time.time())
                        current = self._start(spec)
                        consecutive = 0
                        continue
                    new = self._update(current, wanted)
                    if new is not None:
                        current, spec = new, wanted
                        consecutive = 0
                    continue
                self._wait(POLL)
        finally:
            if current is not None:
                self._stop(current, grace=run.stop_grace(0.5 if self._lost()
                                                          else spec.get("stop_grace", 5)))
            if self.forwarder is not None:
                self.forwarder.close()
            for t in self.stopping_old:
                t.join(timeout=60)
            run.proc = None
            run._flush(final=True)
        if run.lost.is_set():
            return "ended" if run.ended_by_server.is_set() else "lost"
        return run._hand_back()  # returning (the runner stops, or was retired)

    def _listen(self, port: int, spec: dict) -> Forwarder | None:
        """The forwarder on ``port``, once it can be had. Held by something else on this host
        (the control plane offers no runner a port another service holds there), the service
        waits for it here, holding its lease, trying again after the restart backoff, rather
        than being handed back and granted again at once, a claim a moment; it says so once
        (a ``port_busy`` fact, which ``gg services`` reads). None when it must stop first."""
        said, tries = None, 0
        while True:
            try:
                return Forwarder(port)
            except OSError as exc:
                why = os.strerror(exc.errno) if exc.errno else str(exc)
                reason = f"port {port} cannot be listened on here: {why}"
            tries += 1
            delay = services.restart_delay(tries, spec["backoff"], spec["backoff_cap"])
            if reason != said:
                said = reason
                self._fact(services.PORT_BUSY, spec["generation"], reason=reason)
                self.run.say(f"{self.run.id}: {reason}; waiting for it")
            if self._wait(delay):
                return None

    def _update(self, old: Generation, spec: dict) -> Generation | None:
        """Start ``spec`` beside ``old``; switch to it once ready, or give it up."""
        run = self.run
        new = self._start(spec)
        deadline = time.monotonic() + spec["ready_timeout"]
        reason = None
        repicks = 0
        while not self._stopping():
            run._flush()
            if new.taken():
                repicks += 1
                if repicks > services.REPICKS_AT_ONCE:
                    self._stop(new, grace=REPICK_GRACE)
                    reason = (f"found its port taken by another process {repicks} times in "
                              "a row")
                    break
                restarted = self._repick(new, repicks)  # at once: never None here
                if restarted is None:
                    return None
                new = restarted
                continue
            if not new.alive:
                assert new.proc is not None, "_start started it"
                reason = f"exited with {new.proc.returncode} before it was ready"
                break
            if self._is_ready(new):
                break
            if time.monotonic() >= deadline:
                reason = f"was not ready within {spec['ready_timeout']:g}s"
                break
            self._wait(POLL)
        if self._stopping():
            self._stop(new, grace=0.5)
            return None
        if reason is not None:
            self._stop(new, grace=spec["stop_grace"])  # ended already: its cleanup only
            self.failed.add(new.number)
            self._fact(services.UPDATE_FAILED, new.number, reason=reason)
            run.say(f"{run.id}: generation {new.number} {reason}; "
                    f"generation {old.number} keeps serving")
            return None
        new.ready = True
        if self.forwarder is not None:
            self.forwarder.target = new  # new connections go to the new one at once
        self._fact(services.SWITCHED, new.number, started_at=new.started_wall, ready=True)
        retire = threading.Thread(target=self._drain_and_stop, args=(old, spec["stop_grace"]),
                                  daemon=True)
        retire.start()
        self.stopping_old.append(retire)
        return new

    def _drain_and_stop(self, old: Generation, grace: float) -> None:
        deadline = time.monotonic() + grace
        while self.forwarder is not None and self.forwarder.open_to(old.number) > 0 \
                and time.monotonic() < deadline and not self.run.ran_out.is_set():
            time.sleep(POLL)
        self._stop(old, grace=self.run.stop_grace(grace))

    # -- one generation --------------------------------------------------------------------

    def _start(self, spec: dict) -> Generation:
        run = self.run
        activated = bool(spec.get("socket_activation"))
        # held from now on: nothing else can take it before the generation serves
        held = socket_activation.listen() if activated else None
        gen = Generation(number=spec["generation"], spec=spec,
                         port=held.getsockname()[1] if held else generation_port())
        command = list(spec["command"])
        argv = ["/bin/sh", "-c", command[0]] if len(command) == 1 else command
        env = {**spec.get("env", {}), "PORT": str(gen.port),
               **(socket_activation.environment() if activated else {})}
        # egress none or allowlist: the generation's loopback is its namespace's, not ours
        if (run.policy or {}).get("egress") in ("none", "allowlist") and not activated:
            gen.socket_path = self.workspace / SOCKET_NAME.format(gen.number)
            gen.socket_path.unlink(missing_ok=True)
            # sun_path holds 107 bytes: a longer path is given relative to the workspace,
            # where the generation starts
            env["SERVICE_SOCKET"] = str(gen.socket_path) if len(
                os.fsencode(gen.socket_path)) <= 107 else gen.socket_path.name
        try:
            gen.launch = run.launch_for(argv, self.workspace, env, activation=activated)
            run.launch = gen.launch
            run._start(self.workspace, listening=held.fileno() if held else None)
        finally:
            if held is not None:
                held.close()  # the generation holds it now (or nobody, when it did not start)
        gen.proc, gen.started_wall = run.proc, time.time()
        gen.reader = threading.Thread(target=run._read_output_of, args=(gen.proc,), daemon=True)
        gen.reader.start()
        self._fact(services.STARTED, gen.number)  # not its $PORT: nobody else's business
        return gen

    def _repick(self, gen: Generation, repicks: int) -> Generation | None:
        """``gen``'s ``$PORT`` was taken first by something else on the host: waiting would
        never make it ready (its server fails with 'Address already in use', or is never
        served), so it is stopped and started again at once on a fresh port, said once with a
        ``port_taken`` fact. After ``REPICKS_AT_ONCE`` in a row each start waits the restart
        backoff, so a flight that keeps taking ports does not make the runner spin. None when
        the service must stop while it waits."""
        self._stop(gen, grace=self.run.stop_grace(REPICK_GRACE))
        reason = (f"port {gen.port} was listened on first by a process that is not the "
                  "generation's; started again on another port")
        if repicks == 1:
            self._fact(services.PORT_TAKEN, gen.number, port=gen.port, reason=reason,
                       text=f"service generation {gen.number}: {reason}")
        self.run.say(f"{self.run.id}: generation {gen.number}: {reason}")
        over = repicks - services.REPICKS_AT_ONCE
        if over > 0 and self._wait(services.restart_delay(over, gen.spec["backoff"],
                                                          gen.spec["backoff_cap"])):
            return None
        return self._start(gen.spec)

    def _is_ready(self, gen: Generation) -> bool:
        spec = gen.spec
        if spec.get("ready_cmd"):
            launch = self.run.launch_for(["/bin/sh", "-c", spec["ready_cmd"]], self.workspace,
                                         {**spec.get("env", {}), "PORT": str(gen.port)})
            try:  # by the runner's launcher, as the generation itself: bwrap gets the
                # runner's environment, the check its own (handed), and it dies with the runner
                proc = LAUNCHER.start(launch.argv, env=launch.env, cwd=launch.cwd,
                                      handed=launch.handed)
            except OSError:
                return False
            try:
                return proc.wait(timeout=READY_CHECK_TIMEOUT) == 0
            except subprocess.TimeoutExpired:
                signal_group(proc, signal.SIGKILL)
                return False
            finally:
                launch.discard()
        if spec.get("port") is not None:
            try:
                gen.connect(timeout=1.0).close()
                return True
            except (OSError, TimeoutError):
                return False
        return gen.alive

    def _serve(self, gen: Generation) -> None:
        gen.ready = True
        if self.forwarder is not None:
            self.forwarder.target = gen
        self._fact(services.READY, gen.number)

    def _stop(self, gen: Generation, grace: float) -> None:
        proc = gen.proc
        if proc is not None and proc.poll() is None:
            try:
                signal_group(proc, signal.SIGTERM)
                proc.wait(timeout=self.run.stop_grace(grace))
            except subprocess.TimeoutExpired:
                kill_tree(proc)  # the whole tree, whatever left its group
                proc.wait()
            except ProcessLookupError:
                pass
        if gen.launch is not None and gen.launch.cleanup:
            subprocess.run(gen.launch.cleanup, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, check=False, timeout=30)
        if gen.launch is not None:
            gen.launch.discard()
        if gen.reader is not None:
            gen.reader.join(timeout=5)
        gen.close()
        if gen.socket_path is not None:
            gen.socket_path.unlink(missing_ok=True)

    # -- helpers ---------------------------------------------------------------------------

    def _wanted(self) -> dict:
        return self.run.service_spec or self.run.flight.service

    def _lost(self) -> bool:
        return self.run.lost.is_set()

    def _stopping(self) -> bool:
        run = self.run
        return run.lost.is_set() or run.ended_by_server.is_set() or run.returning.is_set()

    def _wait(self, seconds: float) -> bool:
        """Wait ``seconds`` unless the service must stop first; True when it must."""
        deadline = time.monotonic() + seconds
        while True:
            if self._stopping():
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.run.lost.wait(min(left, POLL))

    def _fact(self, word: str, generation: int, **body) -> None:
        text = f"service generation {generation} {word.replace('_', ' ')}"
        self.run._report([{"kind": "note", "body": {"service": word, "generation": generation,
                                                    "text": text, **body}}])


def fly(run, workspace: Path) -> str:
    return Supervisor(run, workspace).fly()
