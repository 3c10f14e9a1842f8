"""tests/zygote.py: the suite's servers and runners are forked from a process that has gg
imported, and each child is still the process a ``python -m gg`` would have been: its own
session, the environment, folder, open-file limit and log it was given, its own exit status
(read through the zygote, its parent), and a signal only while it lives."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from gg.launch import LocalServer, free_port, popen_gg, wait_healthy

from zygote import Forked, Starts, Zygote


@pytest.fixture(scope="module")
def zygote():
    z = Zygote()
    yield z
    z.close()


def test_a_child_reads_the_environment_it_was_given(zygote, tmp_path):
    # (not /proc/PID/environ, which keeps the zygote's: a child's is its own os.environ)
    env = {**os.environ, "GG_STATE_DIR": str(tmp_path / "state"),
           "GG_CONFIG_DIR": str(tmp_path / "config")}
    runner = zygote.start(["--server", "http://127.0.0.1:9", "runner", "up", "--name", "z"],
                          env, tmp_path / "log", None)
    assert runner.wait(60) == 1  # not registered: it says so and exits 1, as python -m gg
    assert (tmp_path / "state" / "key.pem").exists()
    assert "this runner is not registered yet" in (tmp_path / "log").read_text()


def test_a_child_has_its_own_session_folder_limit_and_output(zygote, tmp_path):
    log = tmp_path / "log"
    url = f"http://127.0.0.1:{free_port()}"
    server = zygote.start(["server", "--data-dir", str(tmp_path / "data"), "--listen",
                           url.removeprefix("http://"), "--dev"], dict(os.environ), log,
                          (1000, 1000))
    try:
        wait_healthy(url, 60, server)
        assert os.getsid(server.pid) == server.pid  # as start_new_session
        assert os.readlink(f"/proc/{server.pid}/cwd") == os.getcwd()
        limits = open(f"/proc/{server.pid}/limits").read().splitlines()
        assert [line.split()[3:5] for line in limits if line.startswith("Max open files")] \
            == [["1000", "1000"]]
        assert os.readlink(f"/proc/{server.pid}/fd/0") == os.devnull
        assert os.readlink(f"/proc/{server.pid}/fd/1") == str(log)
        assert os.readlink(f"/proc/{server.pid}/fd/2") == str(log)
        assert "control plane on " + url in log.read_text()
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(30)


def test_exit_statuses_are_the_childs_own(zygote, tmp_path):
    version = zygote.start(["--version"], dict(os.environ), tmp_path / "version.log", None)
    assert version.wait(30) == 0
    assert (tmp_path / "version.log").read_text().startswith("gg ")
    refused = zygote.start(["server", "--listen", "nowhere"], dict(os.environ), None, None)
    assert refused.wait(30) == 2
    assert refused.poll() == 2


def test_a_wait_runs_out_and_a_signal_reaches_only_a_living_child(zygote, tmp_path):
    server = zygote.start(["server", "--data-dir", str(tmp_path / "data"), "--listen",
                           f"127.0.0.1:{free_port()}", "--dev"], dict(os.environ), None, None)
    with pytest.raises(subprocess.TimeoutExpired):
        server.wait(0.2)
    assert server.poll() is None
    server.send_signal(signal.SIGKILL)
    assert server.wait(30) == -signal.SIGKILL
    server.send_signal(signal.SIGTERM)  # ended: never a pid that may be another's now


def test_a_server_started_through_gg_launch_is_forked_and_answers(tmp_path):
    starts = Starts()
    import gg.launch

    saved, gg.launch.starter = gg.launch.starter, starts
    try:
        server = LocalServer(tmp_path / "data", free_port()).start()
        try:
            assert isinstance(server.proc, Forked)
            assert server.proc.pid != starts.zygote.proc.pid
        finally:
            server.stop()
        assert server.proc.returncode is not None
    finally:
        gg.launch.starter = saved
        starts.close()


def test_another_interpreter_setting_is_started_as_before(tmp_path):
    starts = Starts()
    try:
        env = {**os.environ, "PYTHONPATH": str(tmp_path)}
        proc = starts(["--version"], env, None, None)
        assert isinstance(proc, subprocess.Popen)
        assert proc.wait(30) == 0
        assert isinstance(starts(["--version"], dict(os.environ), None, None), Forked)
    finally:
        starts.close()


def test_popen_gg_is_python_m_gg(tmp_path):
    proc = popen_gg(["--version"], dict(os.environ), tmp_path / "log", 64)
    assert proc.args[:3] == [sys.executable, "-m", "gg"]
    assert proc.wait(30) == 0
    assert (tmp_path / "log").read_text().startswith("gg ")


def test_a_cli_call_forked_reads_its_input_and_gives_its_output_and_status(tmp_path):
    starts = Starts()
    try:
        env = {**os.environ, "GG_CONFIG_DIR": str(tmp_path / "config")}
        done = starts.run(["--version"], env, timeout=30)
        assert (done.returncode, done.stderr) == (0, "") and done.stdout.startswith("gg ")
        refused = starts.run(["fly", "--no-such-flag"], env, timeout=30)
        assert refused.returncode == 2 and "--no-such-flag" in refused.stderr
        with pytest.raises(subprocess.CalledProcessError):
            starts.run(["fly", "--no-such-flag"], env, timeout=30, check=True)
        # input: a secret's value is read from stdin (an empty one is refused before any
        # server is asked), and nothing given means an empty stdin, never the worker's
        env["GG_SERVER"] = "http://127.0.0.1:9"
        for given in ("\n", None):
            empty = starts.run(["secret", "set", "EMPTY"], env, input=given, timeout=30)
            assert empty.returncode != 0 and "a secret's value is empty" in empty.stderr
        sent = starts.run(["secret", "set", "KEY"], env, input="s3cret-value\n", timeout=30)
        assert sent.returncode != 0 and "a secret's value is empty" not in sent.stderr
        assert "s3cret-value" not in sent.stderr + sent.stdout
    finally:
        starts.close()
