"""One file to copy (issue 16, point 6): scripts/build-pyz makes one executable .pyz named
with its version, platform and Python; it runs ``--version`` and a runner that flies a flight
against a real control plane, with nothing of this checkout on its path.

Building fetches the dependencies' wheels through pip: where the package index cannot be
reached the test is skipped, saying so."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from support import wait_until

ROOT = Path(__file__).resolve().parent.parent
OFFLINE = ("Could not find a version", "No matching distribution", "Failed to establish",
           "Temporary failure in name resolution", "Network is unreachable", "ConnectTimeout")


@pytest.mark.timeout(1500)
def test_the_pyz_runs_version_and_a_runner_that_flies_a_flight(fleet, tmp_path):
    if importlib.util.find_spec("shiv") is None:
        pytest.skip("shiv is not installed (pip install -e '.[test]' installs it)")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["SHIV_ROOT"] = str(tmp_path / "shiv")
    built = subprocess.run([sys.executable, str(ROOT / "scripts/build-pyz"), "--out",
                            str(tmp_path / "dist")], env=env, capture_output=True, text=True,
                           timeout=1200)
    if built.returncode != 0 and any(word in built.stdout + built.stderr for word in OFFLINE):
        pytest.skip("the package index cannot be reached to fetch the dependencies' wheels")
    assert built.returncode == 0, built.stderr[-3000:]
    pyz = Path(built.stdout.strip().splitlines()[-1])
    minor = f"{sys.version_info[0]}.{sys.version_info[1]}"
    platform = sysconfig.get_platform().replace(".", "_")
    assert pyz.name == f"gg-0.1.0-{platform}-py{minor}.pyz" and os.access(pyz, os.X_OK)

    version = subprocess.run([sys.executable, str(pyz), "--version"], env=env,
                             capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert version.returncode == 0, version.stderr
    assert version.stdout.startswith("gg 0.1.0 (Python ")
    unit = subprocess.run([sys.executable, str(pyz), "install", "runner", "--print"], env=env,
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert f"ExecStart={sys.executable} {pyz} runner up" in unit.stdout, unit.stderr
    assert "Environment=SHIV_ROOT=%S/gg/runner/shiv" in unit.stdout

    runner_env = {**env, **fleet.env, "GG_STATE_DIR": str(tmp_path / "state"),
                  "GG_CONFIG_DIR": str(fleet.config_dir)}
    log = open(tmp_path / "runner.log", "wb")
    runner = subprocess.Popen([sys.executable, str(pyz), "--server", fleet.url, "runner", "up",
                               "--name", "from-pyz", "--labels", "built=pyz"],
                              env=runner_env, stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)
    try:
        fleet.wait_online("from-pyz", timeout=120)
        flown = fleet.gg("fly", "--labels", "built=pyz", "--wait", "--", "echo", "flown-by-pyz",
                         timeout=300)
        assert flown.returncode == 0, flown.stderr
        assert "flown-by-pyz" in flown.stdout
        row = fleet.runner_row("from-pyz")
        assert row["version_skew"] == "none"
    finally:
        runner.terminate()
        runner.wait(timeout=60)
        log.close()
    wait_until(lambda: runner.poll() is not None, what="the pyz runner to stop")
