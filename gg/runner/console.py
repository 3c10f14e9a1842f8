"""Consoles on this runner (docs/console.md): a PTY, a command under the runner's policy, and
its bytes relayed to the person through the control plane.

The runner never listens: when a check-in answer names a console waiting for it (it is told
on its parked claim, or hears at its next check-in), it dials the console's WebSocket at the
control plane with its own credential, one thread per console. The command runs on a fresh
PTY whose controlling terminal is that PTY, in a fresh workspace removed afterwards, under the
runner's assigned isolation and egress, built by the same code as a flight's sandbox
(:func:`gg.runner.isolation.build`: the same layout, masks and confinement, keeping only the
session so the terminal is the command's own). ``--flight F`` runs it in attended flight F's
workspace under F's policy, and ends it when F ends here.

Frames: binary both ways (keys in, the terminal's output out); ``{"resize": [rows, cols]}``
in; ``{"exit": status}`` out when the command ends (a signal N reads 128+N, like a shell).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import struct
import subprocess
import termios
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from gg.api import consoles as wire
from gg.api.consoles import ConsoleCall
from gg.client import ApiError, Unreachable
from gg.runner import egress, isolation
from gg.runner.flight import STOP_GRACE
from gg.runner.flight_env import HANDED_SOURCE, after_drop
from gg.runner.flight_identity import runs_as_root
from gg.runner.launching import LAUNCHER, LaunchedProcess, signal_group

if TYPE_CHECKING:
    from websockets.sync.client import ClientConnection

# The loop's runner (gg.runner.loop.Runner) owns the consoles; it is not imported here, so
# that no runner module imports one that imports it back.
Runner = Any

READ_BYTES = 65_536


def default_shell() -> list[str]:
    for shell in ("/bin/bash", "/bin/sh"):
        if os.path.exists(shell):
            return [shell, "-i"]
    return ["sh", "-i"]


def command_argv(command: list[str]) -> list[str]:
    """No command: the default shell; one word with spaces: a shell line; else as given."""
    if not command:
        return default_shell()
    if len(command) == 1 and any(c in command[0] for c in " \t;&|<>$`'\"*?()"):
        return ["/bin/sh", "-c", command[0]]
    return list(command)


def exit_status(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


class Consoles:
    """The consoles this runner serves now; each named console is dialled once."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        self.seen: set[str] = set()
        self.live: dict[str, ConsoleRun] = {}
        self.named = False  # the last check-in named consoles still waiting for us
        self._unreached: set[str] = set()  # dialled, but the control plane was not reached
        self._lock = threading.Lock()

    def absorb(self, calls: list[ConsoleCall]) -> None:
        self.named = bool(calls)
        for call in calls:
            with self._lock:
                if call.id in self.live or call.id in self.seen and not self._may_retry(call.id):
                    continue
                self.seen.add(call.id)
                run = self.live[call.id] = ConsoleRun(self.runner, call, self._over)
            threading.Thread(target=run.serve, name=f"console-{call.id}", daemon=True).start()

    def _may_retry(self, console_id: str) -> bool:
        """Named again after a dial that never reached the control plane: dial again."""
        return console_id in self._unreached

    def _over(self, run: "ConsoleRun", unreached: bool) -> None:
        with self._lock:
            self.live.pop(run.call.id, None)
            if unreached:
                self._unreached.add(run.call.id)
            else:
                self._unreached.discard(run.call.id)

    def stop_all(self) -> None:
        for run in list(self.live.values()):
            run.stop()


class ConsoleRun:
    def __init__(self, runner: Runner, call: ConsoleCall,
                 over: Callable[["ConsoleRun", bool], None]) -> None:
        self.runner = runner
        self.call = call
        self.over = over
        self.proc: LaunchedProcess | subprocess.Popen | None = None
        self.master: int | None = None
        self.ws: ClientConnection | None = None  # dialled first (_dial)
        self.launch: isolation.Launch | None = None
        self.stopping = threading.Event()
        self.network: egress.Network | None = None  # egress allowlist: the console's own

    def serve(self) -> None:
        unreached = False
        try:
            self._serve()
        except Unreachable:
            unreached = True
        except ApiError as exc:
            self.runner.say(f"console {self.call.id}: {exc.message}")
        except Exception as exc:  # one console must not take the runner down
            self.runner.say(f"console {self.call.id}: {type(exc).__name__}: {exc}")
            self._send_text(wire.ERROR, f"the runner could not run the console: {exc}")
        finally:
            self._stop_process()
            if self.network is not None:
                self.network.close()
            if self.master is not None:
                os.close(self.master)
            if self.ws is not None:
                try:
                    self.ws.close()
                except Exception:
                    pass
            self.over(self, unreached)

    def stop(self) -> None:
        self.stopping.set()
        self._stop_process()

    # -- the session ----------------------------------------------------------------------

    def _serve(self) -> None:
        call, runner = self.call, self.runner
        flight_run = runner.runs.get(call.flight) if call.flight else None
        if call.flight and (flight_run is None or flight_run.workspace is None):
            self._dial()  # the control plane refuses a console whose flight is not flying
            self._send_text(wire.ERROR, f"flight {call.flight} is not flying on this runner")
            return
        self._dial()
        fresh = None
        argv = command_argv(call.command)
        try:
            if flight_run is not None:
                workspace = flight_run.workspace
                launch = flight_run.launch_for(argv, workspace, {"TERM": call.term},
                                               terminal=True)
                policy = flight_run.policy
                joined = into_flight(flight_run, argv, launch)
                if joined is not None:  # inside the flight's own sandbox
                    launch, policy = joined, {**policy, "isolation": "joined"}
            else:
                fresh = workspace = runner.state.workspaces / f"console-{call.id}"
                shutil.rmtree(workspace, ignore_errors=True)
                workspace.mkdir(parents=True, mode=0o700)
                policy = runner.policy
                launch = self._launch(argv, workspace, policy)
        except isolation.IsolationUnavailable as exc:
            self._send_text(wire.ERROR, f"runner {runner.registration.name} cannot meet its "
                                        f"policy for a console: {exc.missing}")
            self._send_exit(126)
            return
        where = f" in flight {call.flight}'s workspace" if call.flight else ""
        runner.say(f"console {call.id}: opened by {call.person or 'a person'}{where}: "
                   f"{' '.join(argv)}")
        if flight_run is None and runs_as_root():  # said before the command's first byte
            self._send_screen(host_root_banner(runner.registration.name, policy))
        try:
            self._run(launch, policy, flight_run)
        finally:
            if fresh is not None:
                shutil.rmtree(fresh, ignore_errors=True)
        runner.say(f"console {call.id}: closed (exit {exit_status(self.proc.returncode)})"
                   if self.proc is not None and self.proc.returncode is not None
                   else f"console {call.id}: closed")

    def _dial(self) -> None:
        self.ws = self.runner.client.dial_console(self.call.id, "runner")

    def _launch(self, argv: list[str], workspace: Path, policy: dict) -> isolation.Launch:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GG_")}
        env.update({"HOME": str(workspace), "TERM": self.call.term,
                    "GG_CONSOLE": self.call.id, "GG_WORKSPACE": str(workspace)})
        if not policy:
            raise isolation.IsolationUnavailable("no policy has been assigned yet")
        hidden = [p for p in self.runner.options.hidden
                  if Path(p).exists() and Path(p) != Path("/")]
        if policy.get("egress") == "allowlist":  # a network namespace of its own, as a flight
            try:
                self.network = egress.links_for(self.runner.state.path).open(
                    policy.get("allow") or ())
            except egress.EgressUnavailable as exc:
                raise isolation.IsolationUnavailable(str(exc)) from None
        try:
            return isolation.build(argv, policy=policy, workspace=workspace, env=env,
                                   state_dir=self.runner.state.path,
                                   capabilities=self.runner.capabilities or {}, hidden=hidden,
                                   container_name=f"gg-console-{self.call.id}", terminal=True,
                                   as_runner=True,
                                   netns=self.network.path if self.network else None)
        except ValueError as exc:
            raise isolation.IsolationUnavailable(str(exc)) from None

    def _run(self, launch: isolation.Launch, policy: dict, flight_run) -> None:
        master, slave = os.openpty()
        self.master = master
        _set_size(master, self.call.rows, self.call.cols)
        argv, env, handed = launch.argv, launch.env, launch.handed
        if (policy or {}).get("isolation") == "none":  # the launched group's session takes the PTY
            if handed is None:  # the command itself: the leader (gg's) runs with the runner's
                env, handed = isolation.runner_env(), isolation.handed_env(launch.env)
            argv = isolation.on_terminal(argv, handed=launch.handed is None)
        try:  # started by the runner's launcher: dies with the runner, like a flight
            self.proc = LAUNCHER.start(argv, env=env, cwd=launch.cwd, stdin=slave,
                                       stdout=slave, stderr=slave, handed=handed)
        finally:
            os.close(slave)
        self.launch = launch
        reader = threading.Thread(target=self._screen, name=f"console-out-{self.call.id}",
                                  daemon=True)
        reader.start()
        keys = threading.Thread(target=self._keys, name=f"console-in-{self.call.id}",
                                daemon=True)
        keys.start()
        while self.proc.poll() is None:
            if self.stopping.is_set():
                break
            if flight_run is not None and flight_run.lost.is_set():
                self._send_text(wire.ERROR, f"flight {self.call.flight} ended: its console "
                                            f"closes with it")
                break
            try:
                self.proc.wait(timeout=0.2)
            except subprocess.TimeoutExpired:
                pass
        self._stop_process()
        reader.join(timeout=5)  # everything the command wrote goes out before its status
        assert self.proc.returncode is not None, "it ended, or _stop_process waited for it"
        self._send_exit(exit_status(self.proc.returncode))

    def _screen(self) -> None:
        assert self.ws is not None and self.master is not None, "both there before it starts"
        while True:
            try:
                data = os.read(self.master, READ_BYTES)
            except OSError:  # EIO: every process holding the terminal is gone
                return
            if not data:
                return
            try:
                self.ws.send(data)
            except Exception:
                self.stopping.set()
                return

    def _keys(self) -> None:
        assert self.ws is not None and self.master is not None, "both there before it starts"
        try:
            for message in self.ws:
                if isinstance(message, bytes):
                    os.write(self.master, message)
                    continue
                try:
                    value = json.loads(message)
                except ValueError:
                    continue
                size = value.get(wire.RESIZE) if isinstance(value, dict) else None
                if (isinstance(size, list) and len(size) == 2
                        and all(isinstance(n, int) and 0 < n < 10_000 for n in size)):
                    _set_size(self.master, size[0], size[1])
        except Exception:
            pass
        self.stopping.set()  # the person (or the relay) went away: the command ends too

    def _send_text(self, key: str, value) -> None:
        if self.ws is None:
            return
        try:
            self.ws.send(json.dumps({key: value}))
        except Exception:
            pass

    def _send_screen(self, text: str) -> None:
        if self.ws is None:
            return
        try:
            self.ws.send(text.replace("\n", "\r\n").encode())
        except Exception:
            pass

    def _send_exit(self, status: int) -> None:
        self._send_text(wire.EXIT, status)

    def _stop_process(self) -> None:
        """SIGHUP to the console's session group (a terminal hung up), SIGKILL after the
        grace; a container's client does not stop its container, so its cleanup runs too."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            if proc is not None:
                _kill_group(proc.pid, signal.SIGKILL)  # leftovers holding the terminal
            if self.launch is not None:
                self.launch.discard()  # a container's environment file
            return
        _signal(proc, signal.SIGHUP)
        try:
            proc.wait(timeout=STOP_GRACE)
        except subprocess.TimeoutExpired:
            _signal(proc, signal.SIGKILL)
            proc.wait()
        launch = self.launch
        if launch is not None and launch.cleanup:
            subprocess.run(launch.cleanup, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, check=False, timeout=30)
        if launch is not None:
            launch.discard()


HOST_ROOT = "host root"


def host_root_banner(runner_name: str, policy: dict | None) -> str:
    """What a console to a root runner itself says first: whom it runs as, and that it is
    recorded (docs/console.md)."""
    level = (policy or {}).get("isolation", "sandbox")
    inside = {"none": "on the host itself",
              "sandbox": "in the runner's sandbox: no capability, /proc/sys read-only",
              "container": "in a container"}.get(level, f"under isolation {level}")
    return (f"gg: this console on runner {runner_name} runs as {HOST_ROOT} (uid 0), "
            f"{inside}; it is recorded in the events (info:console:opened)\n")


def into_flight(flight_run, argv: list[str], launch: isolation.Launch) -> isolation.Launch | None:
    """``argv`` run inside the running sandbox of ``flight_run``: its namespaces (user, mount,
    pid, network, …) entered with ``nsenter``, then every capability that entering gave
    dropped and no_new_privs set with ``setpriv`` before the command starts, so the console
    holds no more than the flight does (docs/console.md). A container flight is joined with
    the engine's ``exec``. None when the flight has no sandbox of its own to enter (isolation
    none): the console then runs beside it, in its workspace, under its policy (``launch``).
    On a root runner the console takes the flight's identity (uid, gid, no other group), as
    the flight does: never root."""
    isolation_level = (flight_run.policy or {}).get("isolation")
    if isolation_level == "container" and flight_run.launch and flight_run.launch.container_name:
        engine = flight_run.launch.argv[0]
        return isolation.Launch(argv=[engine, "exec", "--interactive", "--tty", "--env",
                                      f"TERM={launch.env.get('TERM', 'xterm')}",
                                      flight_run.launch.container_name, *argv],
                                env=launch.env, cwd=launch.cwd)
    if isolation_level != "sandbox" or flight_run.proc is None:
        return None
    target, entered = _inside(flight_run.proc.pid)
    if target is None:
        raise isolation.IsolationUnavailable("the flight's sandbox is not running any more")
    flags = [f"--{name}" for name in entered]
    if "user" in entered:
        flags.append("--preserve-credentials")
    nsenter, setpriv = shutil.which("nsenter"), shutil.which("setpriv")
    if not nsenter or not setpriv or not setpriv.startswith(("/usr/", "/bin/", "/sbin/")):
        raise isolation.IsolationUnavailable("joining a flight's sandbox needs nsenter and "
                                             "setpriv (util-linux) in the system directories")
    # setpriv by its absolute path in the read-only system directories: nothing the flight can
    # write is ever run while the console still holds what entering gave it
    if flight_run.identity is not None:  # a root runner's flight: become its identity
        drop = isolation.drop_argv(flight_run.identity)
    else:  # the runner's own uid, as the flight: only what entering gave is dropped
        drop = [setpriv, "--no-new-privs", "--inh-caps=-all", "--ambient-caps=-all",
                "--bounding-set=-all", "--"]
    enter = [nsenter, "--target", str(target), *flags, f"--wd={launch.cwd}", "--", *drop]
    # nsenter and setpriv run with the runner's environment, and the leader, which reads the
    # command's (handed on fd 3), only once setpriv dropped what entering gave (and, on a
    # root runner, took the flight's identity): nothing of the flight's runs before
    if launch.sourced:  # a root runner's flight: a shell of its identity sources the lines
        inner = after_drop(isolation.on_terminal(argv), source=HANDED_SOURCE)
    else:
        inner = isolation.on_terminal(argv, handed=launch.handed is not None)
    return isolation.Launch(argv=[*enter, *inner], env=launch.env, cwd=launch.cwd,
                            handed=launch.handed)


_NAMESPACES = (("user", "user"), ("mnt", "mount"), ("pid", "pid"), ("net", "net"),
               ("uts", "uts"), ("ipc", "ipc"))


def _inside(pid: int) -> tuple[int | None, list[str]]:
    """A process inside the sandbox started as ``pid`` (bubblewrap), and the namespaces it has
    of its own (nsenter's names, the user namespace first)."""
    import psutil

    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return None, []
    for child in children:
        entered = []
        for proc_name, flag in _NAMESPACES:
            try:
                theirs = os.readlink(f"/proc/{child.pid}/ns/{proc_name}")
                ours = os.readlink(f"/proc/self/ns/{proc_name}")
            except OSError:
                break
            if theirs != ours:
                entered.append(flag)
        else:
            if "mount" in entered and "pid" in entered:
                return child.pid, entered
    return None, []


def _signal(proc: LaunchedProcess | subprocess.Popen, sig: int) -> None:
    try:
        signal_group(proc, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _kill_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _set_size(fd: int, rows: int, cols: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
