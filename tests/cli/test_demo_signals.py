"""``gg demo`` stops its control plane and runners when it is terminated or its terminal
closes (SIGTERM, SIGHUP), not only on Ctrl-C (issue 16)."""

from __future__ import annotations

import os
import signal
import subprocess

import psutil
import pytest

from gg.launch import gg_argv

from support import gone, wait_until


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_demo_stops_everything_it_started_on_sigterm_and_sighup(sig, tmp_path):
    # the demo keeps its folder for the person to read: here it is made in the test's own
    env = {**os.environ, "GG_CONFIG_DIR": str(tmp_path / "config"), "TMPDIR": str(tmp_path)}
    demo = subprocess.Popen(gg_argv("demo", "--stay"), env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for line in demo.stdout:
            if "Ctrl-C here stops them" in line:
                break
        children = psutil.Process(demo.pid).children()
        assert len(children) == 3  # the control plane and two runners
        demo.send_signal(sig)
        demo.wait(timeout=60)
        wait_until(lambda: all(gone(c.pid) for c in children), 60,
                   what="the demo's control plane and runners to stop")
    finally:
        if demo.poll() is None:
            demo.kill()


def test_a_demo_that_stops_by_itself_says_so_after_what_to_type_next(tmp_path):
    from pathlib import Path

    from gg.cli.demo import next_steps

    args = ("http://127.0.0.1:1", Path("/tmp/c"), "f_0123456789", Path("/tmp/d"))
    stopping = next_steps(*args, stay=False)
    assert stopping.endswith("run gg demo --stay to keep them up for these commands.")
    assert "--stay" not in next_steps(*args, stay=True)
    shown = [line for line in stopping.splitlines() if "#" in line]
    assert len({line.index("#") for line in shown}) == 1  # the comments line up
