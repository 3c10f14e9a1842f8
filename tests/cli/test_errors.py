"""Bad input on the command line: one plain sentence on stderr, a non-zero exit, no traceback."""

from __future__ import annotations

import os
import subprocess

import pytest

from gg.launch import free_port, gg_argv


def gg(*args: str, config_dir) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GG_")}
    env["GG_CONFIG_DIR"] = str(config_dir)
    return subprocess.run(gg_argv(*args), env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("args, code, sentence", [
    (["fly"], 2, "gg fly: Missing argument '-- CMD...'."),
    (["fly", "--bogus", "--", "x"], 2, "gg fly: No such option: --bogus"),
    (["nosuch"], 2, "gg: No such command 'nosuch'."),
    (["runner", "up", "--workers", "0"], 2, "gg runner up: Invalid value for '--workers'"),
    (["flights"], 3, "not signed in: gg login --server URL --token-file FILE"),
    (["server", "--listen", "nope"], 2, "--listen takes HOST:PORT (got 'nope')"),
    (["login", "--server", "http://127.0.0.1:9", "--token", "abc"], 2,
     "that is not a person's token (they start with ggp_)"),
    # the job contract (docs/jobs.md): refused before anything is sent
    (["fly", "--concurrency", "deploy prod", "--", "x"], 2,
     "--concurrency: a key has no spaces, colons or control characters"),
    (["fly", "--concurrency", "", "--", "x"], 2, "--concurrency needs a key: KEY or KEY:N"),
    (["fly", "--concurrency", "k:0", "--", "x"], 2, "--concurrency KEY:N: N is a whole number"),
    (["fly", "--concurrency", "k:two", "--", "x"], 2, "--concurrency KEY:N: N is a whole number"),
    (["fly", "--cancel-in-progress", "--", "x"], 2, "--cancel-in-progress needs --concurrency"),
    (["fly", "--grace", "11m", "--", "x"], 2, "--grace is at most 10 minutes"),
    (["fly", "--grace", "soon", "--", "x"], 2, "--grace: 'soon' is not a duration"),
    (["fly", "--retries", "11", "--", "x"], 2, "--retries is a whole number from 0 to 10"),
    (["fly", "--retry-on", "often", "--", "x"], 2, "--retry-on takes failed and timed-out"),
    (["fly", "--retry-delay", "2d", "--", "x"], 2, "--retry-delay is at most one day"),
    (["fly", "--retry-delay", "later", "--", "x"], 2, "--retry-delay: 'later' is not a duration"),
    (["rerun", "f_1", "--with", "colour=blue"], 2, "--with takes KEY=VALUE, KEY one of env"),
    (["rerun", "f_1", "--with", "retries=many"], 2, "--with retries= is a whole number"),
])
def test_bad_input_is_one_sentence_and_a_non_zero_exit(tmp_path, args, code, sentence):
    done = gg(*args, config_dir=tmp_path)
    assert done.returncode == code
    assert done.stderr.startswith(sentence), done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_an_unreachable_control_plane_is_one_sentence(tmp_path):
    port = free_port()
    done = gg("--server", f"http://127.0.0.1:{port}", "whoami", config_dir=tmp_path)
    assert done.returncode == 3  # not signed in comes first
    env_done = subprocess.run(gg_argv("--server", f"http://127.0.0.1:{port}", "flights"),
                              env={**os.environ, "GG_CONFIG_DIR": str(tmp_path),
                                   "GG_TOKEN": "ggp_x"},
                              capture_output=True, text=True, timeout=60)
    assert env_done.returncode == 7
    assert env_done.stderr == f"cannot reach the control plane at http://127.0.0.1:{port} (ConnectError)\n"


def test_debug_shows_the_traceback(tmp_path):
    done = gg("--debug", "--server", "http://127.0.0.1:9", "login", "--token-file",
              str(tmp_path / "missing"), config_dir=tmp_path)
    assert done.returncode != 0
    assert "Traceback" in done.stderr
