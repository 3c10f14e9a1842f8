"""Every unit ``gg install`` prints starts: its ``ExecStart`` line, run as printed (systemd's
specifiers and ``${STATE_DIRECTORY}`` filled in as systemd would, its ``Environment=`` set),
checks in with a real control plane. systemd itself is not needed (issue 24, point 1)."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
from pathlib import Path

import pytest

from gg.launch import gg_argv

from fleet_support import apply_and_clear, mint, profile_yaml, write_profile
from support import wait_until


def unit_text(*args: str) -> str:
    done = subprocess.run(gg_argv("install", "--print", *args), capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def as_systemd_would(text: str, root: Path) -> tuple[list[str], dict[str, str]]:
    """(argv, environment) of the unit's ExecStart, with %S, %E and ${STATE_DIRECTORY} made
    paths under ``root``, and the StateDirectory made."""
    lines = dict(line.split("=", 1) for line in text.splitlines() if "=" in line
                 and not line.startswith("Environment="))
    state_base, conf_base = root / "var/lib", root / "etc"
    state = state_base / lines["StateDirectory"]
    conf = conf_base / lines["ConfigurationDirectory"]
    state.mkdir(parents=True, mode=0o700)
    conf.mkdir(parents=True, mode=0o700)

    def fill(value: str) -> str:
        return (value.replace("%S", str(state_base)).replace("%E", str(conf_base))
                .replace("${STATE_DIRECTORY}", str(state)).replace("%%", "%"))

    env = {k: v for k, v in os.environ.items() if k not in ("GG_STATE_DIR", "GG_CONFIG_DIR")}
    for line in text.splitlines():
        if line.startswith("Environment="):
            key, _, value = line[len("Environment="):].partition("=")
            env[key] = fill(value)
    return [fill(word) for word in shlex.split(lines["ExecStart"])], env


def start(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    return subprocess.Popen(argv, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT,
                            start_new_session=True)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


@pytest.mark.parametrize("recipe", ["one host", "several hosts"])
def test_a_printed_runner_unit_starts_and_checks_in(fleet, tmp_path, recipe):
    airspace = tmp_path / "airspace"
    apply_and_clear(fleet, airspace, "build", profile_yaml("build"))
    token_file = tmp_path / "enrol-build"
    token_file.write_text(mint(fleet, "build", "--uses", "1"))
    name = "build-1" if recipe == "one host" else "host-a"
    text = unit_text("runner", "--name", name, "--", "--server", fleet.url,
                     "--enrol-file", str(token_file))
    argv, env = as_systemd_would(text, tmp_path / "host")
    proc = start(argv, env, tmp_path / "unit.log")
    try:
        wait_until(lambda: (fleet.runner_row(name) or {}).get("online"), 60,
                   what=f"the unit's runner {name} online "
                        f"({(tmp_path / 'unit.log').read_text()[-400:]!r})")
    finally:
        stop(proc)


def test_a_printed_maintainer_unit_starts_and_checks_in(fleet, tmp_path):
    airspace = tmp_path / "airspace"
    write_profile(airspace, "keepers", profile_yaml("keepers").replace(
        "roles: [runner]", "roles: [runner, maintain]"))
    apply_and_clear(fleet, airspace, "keepers", (airspace / "fleet/keepers.yaml").read_text())
    token_file = tmp_path / "enrol-keeper"
    token_file.write_text(mint(fleet, "keepers", "--uses", "1"))
    text = unit_text("maintainer", "--pool", "ui-pool", "--name", "keeper", "--",
                     "--server", fleet.url, "--enrol-file", str(token_file))
    argv, env = as_systemd_would(text, tmp_path / "host")
    proc = start(argv, env, tmp_path / "unit.log")
    try:
        def told() -> str:
            return (tmp_path / "unit.log").read_text()
        # It enrols (a runner row) and reaches the pool step: the server's own words about the
        # pool, not a usage error of the command line.
        wait_until(lambda: fleet.runner_row("keeper") is not None or proc.poll() is not None,
                   60, what=f"the maintainer unit enrolled ({told()[-400:]!r})")
        assert "No such option" not in told()
        assert fleet.runner_row("keeper") is not None, told()
    finally:
        stop(proc)


def test_print_without_a_server_or_an_enrolment_says_what_is_missing():
    done = subprocess.run(gg_argv("install", "runner", "--print"), capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0
    assert "ExecStart=" in done.stdout
    assert "no control plane is named: add -- --server URL" in done.stderr
    assert "no enrolment is named: add -- --enrol-file FILE" in done.stderr
    named = subprocess.run(gg_argv("install", "runner", "--print", "--", "--server",
                                   "http://127.0.0.1:1", "--enrol-file", "/etc/gg/enrol"),
                           capture_output=True, text=True, timeout=60)
    assert named.returncode == 0 and named.stderr == ""


def test_the_server_option_stands_before_the_subcommand_on_either_side_of_the_separator():
    text = unit_text("runner", "--name", "b", "--", "--labels", "a=b", "--server=http://h:1")
    exec_start = next(line for line in text.splitlines() if line.startswith("ExecStart="))
    words = shlex.split(exec_start.partition("=")[2])
    assert words.index("--server=http://h:1") < words.index("runner")
    assert words[words.index("up") + 1:] == ["--name", "b", "--labels", "a=b"]
