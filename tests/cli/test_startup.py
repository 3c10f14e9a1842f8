"""Start-up: `gg --help` lists every command from the table without importing a command
module, and a command imports only its own modules (figures: docs/performance.md)."""

from __future__ import annotations

import json
import subprocess
import sys

from gg.cli import app as cli_app  # first: it chooses plain (not Rich) help

import typer  # noqa: E402


def _modules_after(*argv: str) -> list[str]:
    code = ("import sys, contextlib, io\n"
            "from gg.cli.app import run\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    run({list(argv)!r})\n"
            "import json\n"
            "print(json.dumps(sorted(name for name, m in list(sys.modules.items())\n"
            "                        if type(m).__name__ != '_LazyModule')))")  # not yet loaded
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_help_lists_every_command_without_importing_a_command_module():
    loaded = _modules_after("--help")
    commands = {f"gg.cli.{m}" for line in cli_app.COMMANDS.values() for m in line[0]}
    assert not commands & set(loaded), commands & set(loaded)
    assert "gg.client" not in loaded and "httpx" not in loaded and "gg.api.schemas" not in loaded


def test_a_command_imports_only_the_modules_on_its_line():
    loaded = set(_modules_after("fly", "--help"))
    assert "gg.cli.flights" in loaded
    assert not {"gg.cli.pools", "gg.cli.fleet", "gg.cli.runners", "gg.cli.server"} & loaded
    assert "gg.api.enrolment" not in loaded and "gg.api.pools" not in loaded


def test_the_table_names_every_registered_command_with_its_own_help():
    everything = typer.Typer()  # its own group: the modules' groups are shared, so this
    # test registers each module once, as the app does
    everything.callback()(lambda: None)
    import importlib

    for module in sorted({m for line in cli_app.COMMANDS.values() for m in line[0]}):
        importlib.import_module(f"gg.cli.{module}").register(everything)
    group = typer.main.get_command(everything)
    assert sorted(group.commands) == sorted(cli_app.COMMANDS)
    for name, command in group.commands.items():
        assert command.get_short_help_str(limit=1000) == cli_app.COMMANDS[name][1], name


def test_a_group_built_from_several_modules_has_all_their_subcommands():
    done = subprocess.run([sys.executable, "-m", "gg", "runner", "--help"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for sub in ("up", "cordon", "sent", "ownership", "maintain"):
        assert f"  {sub} " in out, sub
    done = subprocess.run([sys.executable, "-m", "gg", "runner", "maintain", "--help"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "POOL" in done.stdout, done.stderr
