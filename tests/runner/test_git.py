"""The runner's git work against real git: a loopback smart-HTTP server with basic auth,
local bare repositories, and workspaces an agent has written to."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from git_http_server import IDENTITY, GitHttpServer  # noqa: E402

from gg.runner.credentials import CredentialStore  # noqa: E402
from gg.runner.git import (  # noqa: E402
    GitError,
    clone,
    clone_command,
    commits_since,
    push,
)

USER = "robot"
PASSWORD = "pw-8d3f1b6a9c2e4f70a5b1"  # long and unusual, so a match is never an accident
TIMEOUT = 60.0


@pytest.fixture
def server(tmp_path: Path) -> Iterator[GitHttpServer]:
    with GitHttpServer(tmp_path / "srv", user=USER, password=PASSWORD) as srv:
        srv.create_repo("acme/widgets.git", with_commit=True)
        yield srv


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture
def store(state_dir: Path) -> CredentialStore:
    return CredentialStore(state_dir)


AGENT = {"GIT_AUTHOR_NAME": "Agent Smith", "GIT_AUTHOR_EMAIL": "agent@example.test",
         "GIT_COMMITTER_NAME": "Agent Smith", "GIT_COMMITTER_EMAIL": "agent@example.test"}


def git(*args: str, cwd: Path | None = None, identity: dict[str, str] = IDENTITY) -> str:
    result = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                            timeout=30, check=True,
                            env={**os.environ, **identity, "GIT_TERMINAL_PROMPT": "0"})
    return result.stdout.strip()


def agent_commits(workspace: Path, *subjects: str) -> list[str]:
    """What an agent does: change files and commit them; returns the new commit ids."""
    shas = []
    for i, subject in enumerate(subjects):
        (workspace / f"change-{i}.txt").write_text(subject + "\n")
        git("add", "-A", cwd=workspace)
        git("commit", "--quiet", "-m", subject, cwd=workspace, identity=AGENT)
        shas.append(git("rev-parse", "HEAD", cwd=workspace))
    return shas


def every_file_under(path: Path) -> Iterator[Path]:
    for p in path.rglob("*"):
        if p.is_file() and not p.is_symlink():
            yield p


# -- clone ------------------------------------------------------------------------------------


def test_clone_with_the_right_credential_checks_out_the_repository(server, store, state_dir,
                                                                   tmp_path) -> None:
    url = server.url("acme/widgets.git")
    store.add(repo=url, secret=f"{USER}:{PASSWORD}")
    result = clone(url, tmp_path / "ws", state_dir=state_dir, timeout=TIMEOUT)
    expected = git("--git-dir", str(server.project_root / "acme/widgets.git"),
                   "rev-parse", "refs/heads/main")
    assert result.head == expected
    assert (tmp_path / "ws" / "README.md").read_text() == "widgets\n"
    assert server.seen_users and set(server.seen_users) == {USER}


def test_clone_without_a_credential_fails_at_once_naming_the_missing_one(server, state_dir,
                                                                          tmp_path) -> None:
    started = time.monotonic()
    with pytest.raises(GitError) as info:
        clone(server.url("acme/widgets.git"), tmp_path / "ws", state_dir=state_dir,
              timeout=TIMEOUT)
    assert time.monotonic() - started < TIMEOUT / 2  # it never sat at a prompt
    err = info.value
    assert err.reason == "credential_missing"
    slug = f"127.0.0.1:{server.port}/acme/widgets"
    assert err.sentence.startswith(f"{slug} asks for a credential")
    assert f"gg credential add --repo {slug}" in str(err)
    assert "terminal prompts disabled" in err.stderr_tail
    assert server.seen_users == []


def test_a_credential_for_one_repository_is_never_offered_to_another(server, store, state_dir,
                                                                     tmp_path) -> None:
    server.create_repo("acme/other.git", with_commit=True)
    store.add(repo=server.url("acme/widgets.git"), secret=f"{USER}:{PASSWORD}")
    with pytest.raises(GitError) as info:
        clone(server.url("acme/other.git"), tmp_path / "ws", state_dir=state_dir,
              timeout=TIMEOUT)
    assert info.value.reason == "credential_missing"
    assert server.seen_users == []


def test_clone_with_a_wrong_credential_fails_clearly_without_showing_it(server, store,
                                                                        state_dir,
                                                                        tmp_path) -> None:
    wrong = "wrong-password-77aa55cc33"
    store.add(repo=server.url("acme/widgets.git"), secret=f"{USER}:{wrong}")
    with pytest.raises(GitError) as info:
        clone(server.url("acme/widgets.git"), tmp_path / "ws", state_dir=state_dir,
              timeout=TIMEOUT)
    assert info.value.reason == "credential_refused"
    assert "refused the credential" in info.value.sentence
    assert wrong not in str(info.value) and wrong not in repr(info.value)


def test_the_secret_is_in_no_argv_and_no_environment_given_to_git(server, store, state_dir,
                                                                  tmp_path) -> None:
    url = server.url("acme/widgets.git")
    store.add(repo=url, secret=f"{USER}:{PASSWORD}")
    argv, env = clone_command(url, tmp_path / "ws", state_dir=state_dir)
    assert all(PASSWORD not in arg for arg in argv)
    assert all(PASSWORD not in f"{k}={v}" for k, v in env.items())
    assert url in argv and "credential.helper=" in argv and "credential.useHttpPath=true" in argv
    assert any(a.startswith("credential.helper=!") and "gg.runner.git_credential_helper" in a
               for a in argv)
    assert env["GIT_TERMINAL_PROMPT"] == "0" and env["GG_STATE_DIR"] == str(state_dir.resolve())


def test_no_process_git_starts_during_a_clone_has_the_secret_in_its_argv(
        server, store, state_dir, tmp_path, monkeypatch) -> None:
    trace = tmp_path / "git-trace.log"
    monkeypatch.setenv("GIT_TRACE", str(trace))  # git logs the argv of every child it runs
    url = server.url("acme/widgets.git")
    store.add(repo=url, secret=f"{USER}:{PASSWORD}")
    clone(url, tmp_path / "ws", state_dir=state_dir, timeout=TIMEOUT)
    logged = trace.read_text()
    assert "gg.runner.git_credential_helper" in logged  # the helper really was asked
    assert "remote-http" in logged
    assert PASSWORD not in logged


def test_the_secret_is_in_no_file_of_the_workspace(server, store, state_dir, tmp_path) -> None:
    url = server.url("acme/widgets.git")
    store.add(repo=url, secret=f"{USER}:{PASSWORD}")
    workspace = tmp_path / "ws"
    clone(url, workspace, state_dir=state_dir, timeout=TIMEOUT)
    config = (workspace / ".git" / "config").read_text()
    assert PASSWORD not in config and f"{USER}:" not in config
    assert "credential" not in config  # the helper is per command, never saved
    for path in every_file_under(workspace):
        assert PASSWORD.encode() not in path.read_bytes(), path


def test_a_url_carrying_a_password_is_refused_before_git_runs(server, state_dir,
                                                              tmp_path) -> None:
    url = server.url("acme/widgets.git").replace("http://", f"http://{USER}:{PASSWORD}@")
    with pytest.raises(GitError) as info:
        clone(url, tmp_path / "ws", state_dir=state_dir, timeout=TIMEOUT)
    assert info.value.reason == "bad_input"
    assert PASSWORD not in str(info.value)
    assert server.seen_users == [] and server.refused == 0
    assert not (tmp_path / "ws").exists()


def test_clone_refuses_a_workspace_that_is_not_empty(server, state_dir, tmp_path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "left-over").write_text("x")
    with pytest.raises(GitError, match="not empty") as info:
        clone(server.url("acme/widgets.git"), tmp_path / "ws", state_dir=state_dir,
              timeout=TIMEOUT)
    assert info.value.reason == "bad_input"


def test_clone_of_a_repository_that_does_not_exist_says_so(store, state_dir, tmp_path) -> None:
    bare = tmp_path / "nowhere" / "missing.git"
    with pytest.raises(GitError) as info:
        clone(str(bare), tmp_path / "ws", state_dir=state_dir, timeout=TIMEOUT)
    assert info.value.reason == "not_found"


def test_a_clone_that_hangs_is_stopped_at_its_timeout(state_dir, tmp_path) -> None:
    with socket.socket() as silent:  # accepts connections (backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/acme/widgets.git"
        started = time.monotonic()
        with pytest.raises(GitError) as info:
            clone(url, tmp_path / "ws", state_dir=state_dir, timeout=1.0)
        assert info.value.reason == "timeout"
        assert time.monotonic() - started < 15
    assert not (tmp_path / "ws").exists() or not any((tmp_path / "ws").iterdir())


# -- commits made by the agent ----------------------------------------------------------------


@pytest.fixture
def workspace(server, store, state_dir, tmp_path) -> tuple[Path, str]:
    url = server.url("acme/widgets.git")
    store.add(repo=url, secret=f"{USER}:{PASSWORD}")
    ws = tmp_path / "ws"
    return ws, clone(url, ws, state_dir=state_dir, timeout=TIMEOUT).head


def test_commits_since_lists_the_agents_commits_oldest_first(workspace) -> None:
    ws, base = workspace
    shas = agent_commits(ws, "add the frobnicator", "fix the frobnicator")
    assert commits_since(ws, base) == [
        {"sha": shas[0], "subject": "add the frobnicator",
         "author": "Agent Smith <agent@example.test>"},
        {"sha": shas[1], "subject": "fix the frobnicator",
         "author": "Agent Smith <agent@example.test>"},
    ]


def test_commits_since_is_empty_when_the_agent_committed_nothing(workspace) -> None:
    ws, base = workspace
    (ws / "uncommitted.txt").write_text("work in progress\n")
    assert commits_since(ws, base) == []


def test_commits_since_refuses_a_base_that_is_not_a_commit_id(workspace) -> None:
    ws, _ = workspace
    with pytest.raises(GitError) as info:
        commits_since(ws, "--output=/tmp/evil")
    assert info.value.reason == "bad_input"


def test_an_empty_repository_clones_with_no_head_and_every_later_commit_is_the_agents(
        server, store, state_dir, tmp_path) -> None:
    url = server.url("acme/empty.git")
    server.create_repo("acme/empty.git")
    store.add(repo=url, secret=f"{USER}:{PASSWORD}")
    ws = tmp_path / "ws"
    assert clone(url, ws, state_dir=state_dir, timeout=TIMEOUT).head == ""
    assert commits_since(ws, "") == []
    with pytest.raises(GitError, match="nothing to push") as info:
        push(ws, url, state_dir=state_dir, branch="main")
    assert info.value.reason == "bad_input"
    shas = agent_commits(ws, "first ever")
    assert [c["sha"] for c in commits_since(ws, "")] == shas
    push(ws, url, state_dir=state_dir, branch="main")
    assert git("--git-dir", str(server.project_root / "acme/empty.git"),
               "rev-parse", "refs/heads/main") == shas[0]


def test_a_workspace_whose_git_directory_is_gone_is_a_clear_error(workspace) -> None:
    ws, base = workspace
    for path in sorted((ws / ".git").rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    (ws / ".git").rmdir()
    with pytest.raises(GitError, match="cannot read the workspace"):
        commits_since(ws, base)


# -- push -------------------------------------------------------------------------------------


def test_push_to_a_local_bare_repository_puts_head_on_the_branch(workspace, state_dir,
                                                                 tmp_path) -> None:
    ws, _ = workspace
    shas = agent_commits(ws, "agent work")
    dest = tmp_path / "dest.git"
    git("init", "--quiet", "--bare", str(dest))
    result = push(ws, str(dest), state_dir=state_dir, branch="gg/flight-1")
    assert result.head == shas[-1] and result.branch == "gg/flight-1"
    assert result.destination == str(tmp_path / "dest")
    assert git("--git-dir", str(dest), "rev-parse", "refs/heads/gg/flight-1") == shas[-1]


def test_push_over_http_uses_the_stored_credential(server, workspace, state_dir) -> None:
    ws, _ = workspace
    shas = agent_commits(ws, "agent work over http")
    result = push(ws, server.url("acme/widgets.git"), state_dir=state_dir, branch="gg/f2")
    bare = server.project_root / "acme/widgets.git"
    assert git("--git-dir", str(bare), "rev-parse", "refs/heads/gg/f2") == shas[-1]
    assert result.destination == f"127.0.0.1:{server.port}/acme/widgets"


def test_push_without_a_credential_for_the_destination_fails_clearly(server, workspace,
                                                                     state_dir) -> None:
    ws, _ = workspace
    agent_commits(ws, "agent work")
    server.create_repo("acme/fork.git")
    with pytest.raises(GitError) as info:
        push(ws, server.url("acme/fork.git"), state_dir=state_dir, branch="main")
    assert info.value.reason == "credential_missing"


def test_a_push_that_is_not_a_fast_forward_is_rejected_never_forced(workspace, state_dir,
                                                                    tmp_path) -> None:
    ws, _ = workspace
    dest = tmp_path / "dest.git"
    git("init", "--quiet", "--bare", str(dest))
    agent_commits(ws, "first")
    push(ws, str(dest), state_dir=state_dir, branch="main")
    git("reset", "--quiet", "--hard", "HEAD~1", cwd=ws)
    agent_commits(ws, "rewritten history")
    with pytest.raises(GitError) as info:
        push(ws, str(dest), state_dir=state_dir, branch="main")
    assert info.value.reason == "rejected"


@pytest.mark.parametrize("branch", ["-f", "bad..name", "with space", "end.lock", ""])
def test_push_refuses_a_bad_branch_name(workspace, state_dir, tmp_path, branch) -> None:
    ws, _ = workspace
    dest = tmp_path / "dest.git"
    git("init", "--quiet", "--bare", str(dest))
    with pytest.raises(GitError) as info:
        push(ws, str(dest), state_dir=state_dir, branch=branch)
    assert info.value.reason == "bad_input"


def test_push_refuses_a_destination_with_a_password_or_a_relative_path(workspace,
                                                                      state_dir) -> None:
    ws, _ = workspace
    for dest in (f"https://{USER}:{PASSWORD}@example.test/acme/widgets.git", "../dest.git"):
        with pytest.raises(GitError) as info:
            push(ws, dest, state_dir=state_dir, branch="main")
        assert info.value.reason == "bad_input"
        assert PASSWORD not in str(info.value)


def test_nothing_the_agent_plants_in_the_workspace_runs_during_push_or_listing(
        workspace, state_dir, tmp_path) -> None:
    ws, base = workspace
    agent_commits(ws, "innocent change")
    marker = tmp_path / "pwned"
    script = tmp_path / "evil.sh"
    script.write_text(f"#!/bin/sh\necho \"$GG_STATE_DIR\" >> {marker}\nexit 0\n")
    script.chmod(0o755)
    hooks = ws / ".git" / "hooks"
    for hook in ("pre-push", "post-checkout", "reference-transaction", "post-index-change"):
        (hooks / hook).write_text(script.read_text())
        (hooks / hook).chmod(0o755)
    for key, value in (("core.fsmonitor", str(script)), ("log.showSignature", "true"),
                       ("gpg.program", str(script)), ("core.pager", str(script)),
                       ("remote.origin.receivepack", str(script))):
        git("config", key, value, cwd=ws)
    dest = tmp_path / "dest.git"
    git("init", "--quiet", "--bare", str(dest))
    assert len(commits_since(ws, base)) == 1
    push(ws, str(dest), state_dir=state_dir, branch="main")
    assert not marker.exists()
    # The plant is live: git run naively inside the workspace does run it.
    git("push", "--quiet", str(dest), "HEAD:refs/heads/naive", cwd=ws)
    assert marker.exists()
