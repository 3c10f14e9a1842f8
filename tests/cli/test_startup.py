"""Start-up: `gg --help` lists every command from the table without importing a command
module, and a command imports only its own modules (figures: docs/performance.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import typer  # noqa: E402

from gg.cli import app as cli_app  # first: it chooses plain (not Rich) help


def _modules_after(*argv: str, env: dict | None = None) -> list[str]:
    code = ("import sys, contextlib, io\n"
            "from gg.cli.app import run\n"
            "out = io.StringIO()\n"
            "with contextlib.redirect_stdout(out):\n"
            f"    code = run({list(argv)!r})\n"
            "assert code == 0, (code, out.getvalue())\n"
            "import json\n"
            "print(json.dumps(sorted(name for name, m in list(sys.modules.items())\n"
            "                        if type(m).__name__ != '_LazyModule')))")  # not yet loaded
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env={**os.environ, **(env or {})})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


# What a command that only opens a flight and prints it must not pay for: the wire models'
# pydantic (Typer's own option checks included), httpx, and anything of the server.
HEAVY = ("pydantic", "pydantic_core", "fastapi", "starlette", "uvicorn", "httpx", "httpcore",
         "gg.server", "gg.control", "gg.store", "rich")


def _heavy(loaded: list[str]) -> list[str]:
    wire = [m for m in loaded if m.startswith("gg.api.") and m != "gg.api.paths"]
    return sorted({m for m in loaded if m.split(".")[0] in HEAVY or m.startswith(HEAVY)}
                  | set(wire))


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


def test_gg_fly_opens_a_flight_without_pydantic_httpx_or_any_server_module(fleet):
    env = {**fleet.env, "GG_CONFIG_DIR": str(fleet.config_dir), "GG_SERVER": fleet.url}
    for argv in (["fly", "--", "true"], ["fly", "--json", "--title", "t", "--", "true"],
                 ["fly", "--help"]):
        assert _heavy(_modules_after(*argv, env=env)) == [], argv
    rows = fleet.api().flights()
    assert [r["title"] for r in rows] == ["t", "true"] and rows[0]["command"] == ["true"]


def test_plain_option_checks_keep_typers_values_and_refusals():
    from gg.cli.values import plain_values

    seen = {}
    app = typer.Typer()

    @app.command()
    def one(port: int = typer.Option(None, "--port"), rate: float = typer.Option(1.0, "--rate"),
            words: list[str] = typer.Option([], "--word"), flag: bool = typer.Option(False, "--flag"),
            name: str = typer.Option("x", "--name")) -> None:
        seen.update(port=port, rate=rate, words=words, flag=flag, name=name)

    command = typer.main.get_command(app)
    plain_values(command)
    assert all(type(p._runtime_param).__name__ == "_PlainValue" for p in command.params)
    command.main(["--port", "8080", "--rate", "2", "--word", "a", "--word", "b", "--flag",
                  "--name", "n"], standalone_mode=False)
    assert seen == {"port": 8080, "rate": 2.0, "words": ["a", "b"], "flag": True, "name": "n"}
    assert type(seen["port"]) is int and type(seen["rate"]) is float
    for argv, flag in ((["--port", "80x"], "--port"), (["--rate", "fast"], "--rate")):
        own = typer.main.get_command(app)  # Typer's checks alone: the same refusal
        assert _refusal(command, argv) == _refusal(own, argv)
        assert _refusal(command, argv).startswith(f"Invalid value for '{flag}'")


def _refusal(command, argv: list[str]) -> str:
    try:
        command.main(argv, standalone_mode=False)
    except Exception as exc:  # click's usage error (Typer vendors click: matched by shape)
        return exc.format_message()
    raise AssertionError(f"{argv} was accepted")
