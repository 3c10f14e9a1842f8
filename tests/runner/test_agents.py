"""Agents are resolved on the runner, from its own agents.toml; shell is built in."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gg.runner.agents import AgentError, argv_for, available, load_agents, present, signed_in


def write(state: Path, text: str) -> None:
    (state / "agents.toml").write_text(text)


def test_without_a_file_only_shell_is_known_and_it_runs_the_command(tmp_path):
    agents = load_agents(tmp_path)
    assert list(agents) == ["shell"]
    shell = agents["shell"]
    assert argv_for(shell, ["echo hi"], workspace=tmp_path, flight_id="f_1") == [
        "/bin/sh", "-c", "echo hi"]
    assert argv_for(shell, ["echo", "hi"], workspace=tmp_path, flight_id="f_1") == ["echo", "hi"]
    assert available(tmp_path) == ["shell"]


def test_a_configured_agent_expands_its_template_and_nothing_else(tmp_path):
    write(tmp_path, '[agents.codex]\ncommand = ["codex", "exec", "{command}", "--cd", '
                    '"{workspace}", "--tag", "{flight}", "{args}", "{unknown}"]\n')
    codex = load_agents(tmp_path)["codex"]
    argv = argv_for(codex, ["fix the bug", "now; rm -rf /"], workspace=Path("/w"),
                    flight_id="f_9")
    assert argv == ["codex", "exec", "'fix the bug' 'now; rm -rf /'", "--cd", "/w", "--tag",
                    "f_9", "fix the bug", "now; rm -rf /", "{unknown}"]


def test_an_agent_is_present_only_when_its_program_is_found(tmp_path):
    write(tmp_path, f'[agents.py]\ncommand = ["{sys.executable}", "-c", "{{command}}"]\n'
                    '[agents.ghost]\ncommand = ["no-such-program-here"]\n'
                    '[agents.rel]\ncommand = ["/no/such/abs/path"]\n')
    agents = load_agents(tmp_path)
    assert present(agents["py"]) and not present(agents["ghost"]) and not present(agents["rel"])
    assert available(tmp_path) == ["py", "shell"]


@pytest.mark.parametrize("text, problem", [
    ('[agents.shell]\ncommand = ["bash"]\n', "shell is built in"),
    ('[agents.Bad]\ncommand = ["x"]\n', "an agent name is lowercase"),
    ('[agents.x]\ncommand = "x --y"\n', "must be a non-empty list of texts"),
    ('[agents.x]\ncommand = ["x"]\nshell = true\n', "agents.x.shell: is not a known key"),
    ('[other]\n', "other: is not a known key"),
    ('[agents.x\n', "is not valid TOML"),
])
def test_a_broken_agents_file_is_refused_with_file_and_key(tmp_path, text, problem):
    write(tmp_path, text)
    with pytest.raises(AgentError) as refused:
        load_agents(tmp_path)
    assert str(refused.value).startswith(str(tmp_path / "agents.toml"))
    assert problem in str(refused.value)
    assert available(tmp_path) == ["shell"]


def test_an_agents_sign_in_check_is_run_when_it_defines_one(tmp_path):
    write(tmp_path, '[agents.ok]\ncommand = ["true"]\ncheck = ["true"]\n'
                    '[agents.out]\ncommand = ["true"]\ncheck = ["sh", "-c", "echo not signed in >&2; exit 3"]\n'
                    '[agents.plain]\ncommand = ["true"]\n')
    agents = load_agents(tmp_path)
    assert signed_in(agents["ok"])[0] and signed_in(agents["plain"])[0]
    passed, detail = signed_in(agents["out"])
    assert not passed and "exit 3" in detail and "not signed in" in detail
