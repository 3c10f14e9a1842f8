"""Agents: a flight names one; the runner resolves the name from its OWN configuration.

The control plane only ever sends a name (``shell``, ``codex``…). What that name runs is
decided on the machine, in ``agents.toml`` in the runner's state directory (``GG_STATE_DIR``),
so nobody who can open flights can make a runner execute a program of their choosing by path:
an unknown name is handed back ``returned``, never guessed.

::

    # GG_STATE_DIR/agents.toml
    [agents.codex]
    command = ["codex", "exec", "--full-auto", "{command}"]
    check = ["codex", "login", "status"]        # optional: "is it signed in?" (maintenance)

    [agents.lint]
    command = ["/opt/lint/bin/lint", "--fix", "{args}"]

In ``command``, an argument that is exactly ``{args}`` becomes the flight's command arguments,
one argument each; elsewhere ``{command}`` is the flight's command as one text (its arguments
joined with spaces, each shell-quoted when there are several), ``{workspace}`` the flight's
workspace and ``{flight}`` its id. Nothing else is substituted, and nothing is run through a
shell unless the template itself says so.

``shell`` is built in and cannot be redefined: one argument is run with ``/bin/sh -c``,
several are run as they are (what ``gg fly -- CMD…`` has always done).

An agent is *present* when its program (``command[0]``) is found: an absolute path that is an
executable file, or a name on ``PATH``. The runner reports the names of present agents at
check-in, so the control plane offers it only flights whose agent it has.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path

from gg.domain.profiles import AGENT_PATTERN

__all__ = ["AGENTS_FILE", "SHELL", "Agent", "AgentError", "argv_for", "available", "load_agents",
           "present", "signed_in"]

AGENTS_FILE = "agents.toml"
SHELL = "shell"


class AgentError(Exception):
    """The agents file is unreadable or malformed: one sentence naming file and key."""


@dataclass(frozen=True)
class Agent:
    name: str
    command: tuple[str, ...]
    check: tuple[str, ...] | None = None

    @property
    def builtin(self) -> bool:
        return self.name == SHELL


SHELL_AGENT = Agent(SHELL, ())


def load_agents(state_dir: Path) -> dict[str, Agent]:
    """Every agent this runner knows: ``shell`` plus those in ``agents.toml`` (if any)."""
    found = {SHELL: SHELL_AGENT}
    path = Path(state_dir) / AGENTS_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return found
    except OSError as exc:
        raise AgentError(f"{path}: cannot be read ({exc.strerror})") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise AgentError(f"{path}: is not valid TOML ({exc})") from None
    unknown = sorted(set(data) - {"agents"})
    if unknown:
        raise AgentError(f"{path}: {unknown[0]}: is not a known key (agents are [agents.NAME])")
    table = data.get("agents", {})
    if not isinstance(table, dict):
        raise AgentError(f"{path}: agents: must be a table of [agents.NAME] entries")
    for name, spec in table.items():
        found[name] = _agent(path, name, spec)
    return found


def _agent(path: Path, name: str, spec: object) -> Agent:
    where = f"{path}: agents.{name}"
    if name == SHELL:
        raise AgentError(f"{where}: shell is built in and cannot be redefined")
    if not AGENT_PATTERN.match(name):
        raise AgentError(f"{where}: an agent name is lowercase letters, digits, - or _, "
                         "starting with a letter")
    if not isinstance(spec, dict):
        raise AgentError(f"{where}: must be a table with command = [...]")
    unknown = sorted(set(spec) - {"command", "check"})
    if unknown:
        raise AgentError(f"{where}.{unknown[0]}: is not a known key (command, check)")
    command = _argv(where + ".command", spec.get("command"), required=True)
    assert command is not None  # required: refused above when missing
    check = _argv(where + ".check", spec.get("check"), required=False)
    return Agent(name, command, check)


def _argv(where: str, value: object, *, required: bool) -> tuple[str, ...] | None:
    if value is None and not required:
        return None
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise AgentError(f"{where}: must be a non-empty list of texts, "
                         "like [\"prog\", \"{command}\"]")
    return tuple(value)


def present(agent: Agent) -> bool:
    """Is the agent's program on this machine?"""
    if agent.builtin:
        return True
    program = agent.command[0]
    if os.path.isabs(program):
        return os.path.isfile(program) and os.access(program, os.X_OK)
    return shutil.which(program) is not None


def available(state_dir: Path) -> list[str]:
    """Names of the agents this runner can run now (reported at check-in)."""
    try:
        agents = load_agents(state_dir)
    except AgentError:
        return [SHELL]
    return sorted(name for name, agent in agents.items() if present(agent))


def argv_for(agent: Agent, command: list[str], *, workspace: Path, flight_id: str) -> list[str]:
    """The exact argv that runs ``command`` with ``agent``."""
    if agent.builtin:
        return ["/bin/sh", "-c", command[0]] if len(command) == 1 else list(command)
    text = command[0] if len(command) == 1 else shlex.join(command)
    values = {"{command}": text, "{workspace}": str(workspace), "{flight}": flight_id}
    argv: list[str] = []
    for part in agent.command:
        if part == "{args}":
            argv.extend(command)
            continue
        for key, value in values.items():
            part = part.replace(key, value)
        argv.append(part)
    return argv


def signed_in(agent: Agent, *, timeout: float = 20.0) -> tuple[bool, str]:
    """Run the agent's own ``check`` (if it defines one): (passed, one-line detail)."""
    if agent.check is None:
        return True, "no sign-in check defined"
    try:
        done = subprocess.run(list(agent.check), stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=timeout, text=True)
    except FileNotFoundError:
        return False, f"its check program {agent.check[0]} was not found"
    except subprocess.TimeoutExpired:
        return False, f"its check did not finish within {timeout:g}s"
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or [""]
        return False, f"its check failed (exit {done.returncode}) {tail[0][:200]}".strip()
    return True, "signed in"
