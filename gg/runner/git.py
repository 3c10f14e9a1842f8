"""The runner's git work: clone a flight's repository, list the agent's commits, push them.

Credentials reach git only through ``gg.runner.git_credential_helper``, configured per command
with ``-c credential.helper=`` (which drops every helper from the machine's own git config)
followed by ``-c credential.helper=!<python> -P -m gg.runner.git_credential_helper``. No secret
is ever in an argv, a URL, an environment variable, ``.git/config`` or the workspace; the git
subprocess's environment carries only ``GG_STATE_DIR`` (a path, not a secret).

**The workspace is not trusted after the agent has run.** Its ``.git`` is the agent's to
write, and a hook or a config entry there (``core.hooksPath``, ``core.fsmonitor``,
``log.showSignature`` with ``gpg.program``, ``remote.*.receivepack``...) would run a command
of the agent's choosing outside the sandbox, as the runner, next to the credential helper. So
``commits_since`` and ``push`` never run git *in* the workspace: they make a throwaway bare
"shadow" repository that borrows the workspace's objects (``objects/info/alternates``), fetch
the workspace's HEAD into it (fetching from an untrusted repository is the one thing git is
designed to do safely), and read or push from there, under gg's own configuration.

Every failure is a ``GitError``::

    GitError(Exception)       .reason says what happened, for the runner's hand-back:
        credential_missing     the repository wants a credential this runner does not hold
        credential_refused     the host refused the credential this runner holds
        not_found              no such repository (or it is hidden from this credential)
        unreachable            the host could not be reached
        rejected               the destination refused the push (not a fast-forward, a hook)
        bad_input              a URL with a password, a relative path, a bad branch name...
        timeout                git did not finish in time (its process group is killed)
        failed                 anything else; the stderr tail says what

``str(error)`` is one plain sentence, then git's stderr tail with URL credentials redacted.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, TypedDict
from urllib.parse import urlsplit

import gg
from gg.domain.repos import is_local_slug, redact_url_credentials, repo_slug
from gg.runner.git_credential_helper import STATE_DIR_ENV

__all__ = [
    "CloneResult",
    "Commit",
    "GitError",
    "PushResult",
    "clone",
    "clone_command",
    "commits_since",
    "git_environment",
    "push",
]

HELPER_MODULE = "gg.runner.git_credential_helper"
_SHA = re.compile(r"^[0-9a-f]{40}(?:[0-9a-f]{24})?$")
_TAIL_LINES = 15
_TAIL_CHARS = 2000


class GitError(Exception):
    """A git operation failed; ``reason`` is one of the words in the module docstring."""

    def __init__(self, sentence: str, *, reason: str = "failed", stderr_tail: str = "") -> None:
        self.sentence = sentence
        self.reason = reason
        self.stderr_tail = redact_url_credentials(stderr_tail)
        super().__init__(sentence)

    def __str__(self) -> str:
        if not self.stderr_tail:
            return self.sentence
        return self.sentence + "\n" + "\n".join("  git: " + line
                                                for line in self.stderr_tail.splitlines())


@dataclass(frozen=True)
class CloneResult:
    head: str  # the commit checked out; "" when the repository has no commits yet


@dataclass(frozen=True)
class PushResult:
    destination: str  # the destination's slug
    branch: str
    head: str  # the commit now at refs/heads/<branch> there


class Commit(TypedDict):
    sha: str
    subject: str
    author: str  # "Name <email>"


def git_environment(state_dir: Path | None = None) -> dict[str, str]:
    """The environment every gg git command runs with.

    The machine's ``GIT_*`` variables are dropped (a stray ``GIT_DIR`` or
    ``GIT_CONFIG_PARAMETERS`` must not redirect the runner's git), except ``GIT_TRACE`` for
    diagnosis; git may never prompt, and its messages are in English so they can be read.
    """
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GIT_", "GCM_")) and k not in ("SSH_ASKPASS", STATE_DIR_ENV)}
    if "GIT_TRACE" in os.environ:
        env["GIT_TRACE"] = os.environ["GIT_TRACE"]
    env.update({"GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "", "GCM_INTERACTIVE": "never",
                "LC_ALL": "C", "LANGUAGE": "C"})
    if state_dir is not None:
        env[STATE_DIR_ENV] = str(Path(state_dir).resolve())
        # The helper imports gg; make sure it finds this very copy of it.
        package_root = str(Path(gg.__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH"))
                                            if p)
    return env


def _git(args: list[str], *, state_dir: Path | None) -> list[str]:
    config = ["credential.helper=", "credential.useHttpPath=true", "core.askPass=",
              "core.hooksPath=/dev/null", "protocol.ext.allow=never"]
    if state_dir is not None:
        helper = f"!{shlex.quote(sys.executable)} -P -m {HELPER_MODULE}"
        config.insert(1, f"credential.helper={helper}")
    argv = ["git"]
    for item in config:
        argv += ["-c", item]
    return argv + args


def clone_command(url: str, workspace: Path, *,
                  state_dir: Path) -> tuple[list[str], dict[str, str]]:
    """The exact argv and environment ``clone`` runs (so tests can pin what git is given)."""
    _refuse_url_password(url)
    return (_git(["clone", "--quiet", "--", url, str(workspace)], state_dir=state_dir),
            git_environment(state_dir))


def clone(url: str, workspace: Path, *, state_dir: Path, timeout: float) -> CloneResult:
    """Clone ``url`` into ``workspace`` (absent or empty), with this runner's credential."""
    slug = _slug(url)
    workspace = Path(workspace).resolve()
    if workspace.exists() and (not workspace.is_dir() or any(workspace.iterdir())):
        raise GitError(f"cannot clone {slug}: the workspace {workspace} is not empty",
                       reason="bad_input")
    workspace.parent.mkdir(parents=True, exist_ok=True)
    argv, env = clone_command(url, workspace, state_dir=state_dir)
    deadline = time.monotonic() + timeout
    try:
        rc, _, err = _run(argv, env=env, cwd=workspace.parent, deadline=deadline)
        if rc != 0:
            raise _failure("clone", slug, rc, err)
    except GitError:
        _empty(workspace)  # it was empty before; leave no half-clone behind
        raise
    rc, out, _ = _run(_git(["rev-parse", "--verify", "--quiet", "HEAD"], state_dir=None),
                      env=git_environment(), cwd=workspace, deadline=deadline)
    return CloneResult(head=out.strip() if rc == 0 else "")


def commits_since(workspace: Path, base: str, *, timeout: float = 60.0,
                  limit: int = 1000) -> list[Commit]:
    """Commits reachable from the workspace's HEAD but not from ``base`` (the clone's head),
    oldest first; at most the newest ``limit`` of them. ``base`` "" (the clone of an empty
    repository) means every commit is the agent's."""
    if base and not _SHA.match(base):
        raise GitError("the base commit must be a full commit id", reason="bad_input")
    deadline = time.monotonic() + timeout
    with _shadow(Path(workspace), deadline) as (shadow, head):
        if not head or head == base:
            return []
        fmt = "--format=%H%x1f%an <%ae>%x1f%s%x1e"
        rc, out, err = _run(_git(["log", "--reverse", f"--max-count={limit}", fmt,
                                  f"{base}..{head}" if base else head, "--"],
                                 state_dir=None),
                            env=_shadow_env(shadow), cwd=shadow, deadline=deadline)
        if rc != 0:
            raise GitError("cannot list the workspace's commits: the base commit "
                           f"{base[:12]} is not in the repository any more", stderr_tail=err)
    commits: list[Commit] = []
    for record in out.split("\x1e"):
        fields = record.strip("\n").split("\x1f")
        if len(fields) == 3:
            commits.append({"sha": fields[0], "author": fields[1], "subject": fields[2]})
    return commits


def push(workspace: Path, destination_url: str, *, state_dir: Path, branch: str,
         timeout: float = 300.0) -> PushResult:
    """Push the workspace's HEAD to ``refs/heads/<branch>`` of a destination: a URL or an
    absolute path to a (bare) repository. Never forced; whether the destination is allowed
    is the caller's question (``gg.domain.repos.destination_allowed``)."""
    slug = _slug(destination_url)
    if not is_local_slug(slug):
        _refuse_url_password(destination_url)
    deadline = time.monotonic() + timeout
    ref = f"refs/heads/{branch}"
    with _shadow(Path(workspace), deadline) as (shadow, head):
        if branch.startswith("-") or _run(["git", "check-ref-format", ref],
                                          env=git_environment(), cwd=shadow,
                                          deadline=deadline)[0] != 0:
            raise GitError(f"{branch!r} is not a valid branch name", reason="bad_input")
        if not head:
            raise GitError("nothing to push: the workspace has no commits", reason="bad_input")
        env = _shadow_env(shadow, state_dir)
        rc, _, err = _run(_git(["push", "--quiet", "--no-verify", "--", destination_url,
                                f"{head}:{ref}"], state_dir=state_dir),
                          env=env, cwd=shadow, deadline=deadline)
        if rc != 0:
            raise _failure("push", slug, rc, err)
    return PushResult(destination=slug, branch=branch, head=head)


# -- internals ------------------------------------------------------------------------------


@contextmanager
def _shadow(workspace: Path, deadline: float) -> Iterator[tuple[Path, str]]:
    """A throwaway bare repository holding the workspace's HEAD as ``refs/gg/head``."""
    workspace = workspace.resolve()
    with tempfile.TemporaryDirectory(prefix="gg-shadow-") as tmp:
        shadow = Path(tmp) / "shadow.git"
        env = git_environment()
        rc, _, err = _run(["git", "init", "--quiet", "--bare", str(shadow)], env=env,
                          cwd=Path(tmp), deadline=deadline)
        if rc != 0:
            raise GitError("cannot make a scratch repository to read the workspace",
                           stderr_tail=err)
        objects = workspace / ".git" / "objects"
        if objects.is_dir() and not objects.is_symlink():
            (shadow / "objects" / "info" / "alternates").write_text(f"{objects}\n")
        safe = ["-c", f"safe.directory={workspace}", "-c", f"safe.directory={workspace}/.git"]
        fetch = _git(["fetch", "--quiet", "--no-tags", "--", str(workspace),
                      "+HEAD:refs/gg/head"], state_dir=None)
        rc, _, err = _run(fetch[:1] + safe + fetch[1:], env=_shadow_env(shadow), cwd=shadow,
                          deadline=deadline)
        if rc != 0:
            if "couldn't find remote ref HEAD" in err or "no such ref" in err.lower():
                yield shadow, ""
                return
            raise GitError(f"cannot read the workspace {workspace} as a git repository",
                           stderr_tail=err)
        rc, out, err = _run(_git(["rev-parse", "--verify", "refs/gg/head^{commit}"],
                                 state_dir=None), env=_shadow_env(shadow), cwd=shadow,
                            deadline=deadline)
        if rc != 0:
            raise GitError("the workspace's HEAD is not a commit", stderr_tail=err)
        yield shadow, out.strip()


def _empty(directory: Path) -> None:
    if directory.is_dir():
        for child in directory.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child, ignore_errors=True)
            else:
                child.unlink(missing_ok=True)


def _shadow_env(shadow: Path, state_dir: Path | None = None) -> dict[str, str]:
    env = git_environment(state_dir)
    env["GIT_DIR"] = str(shadow)
    return env


def _run(argv: list[str], *, env: dict[str, str], cwd: Path,
         deadline: float) -> tuple[int, str, str]:
    """Run git with no stdin; on the deadline kill its whole process group."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise GitError(f"git {_verb(argv)} had no time left to start", reason="timeout")
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=cwd, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=remaining)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _, err = proc.communicate()
        raise GitError(f"git {_verb(argv)} did not finish in time", reason="timeout",
                       stderr_tail=_tail(err.decode("utf-8", "replace"))) from None
    return (proc.returncode, out.decode("utf-8", "replace"),
            _tail(err.decode("utf-8", "replace")))


def _verb(argv: list[str]) -> str:
    skip = False
    for item in argv[1:]:
        if skip:
            skip = False
        elif item == "-c":
            skip = True
        elif not item.startswith("-"):
            return item
    return "command"


def _tail(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return redact_url_credentials("\n".join(lines[-_TAIL_LINES:])[-_TAIL_CHARS:])


def _failure(verb: str, slug: str, rc: int, err: str) -> GitError:
    low = err.lower()
    if "terminal prompts disabled" in low or "could not read username" in low \
            or "could not read password" in low:
        return GitError(f"{slug} asks for a credential and this runner holds none for it; "
                        f"add one on this machine with: gg credential add --repo {slug}",
                        reason="credential_missing", stderr_tail=err)
    if "authentication failed" in low or "access denied" in low or "http 403" in low \
            or "returned error: 403" in low:
        return GitError(f"{slug} refused the credential this runner holds for it; replace it "
                        f"with: gg credential add --repo {slug}",
                        reason="credential_refused", stderr_tail=err)
    if "[rejected]" in low or "[remote rejected]" in low or "non-fast-forward" in low:
        return GitError(f"{slug} refused the push (the branch moved on there, or a hook "
                        "declined it)", reason="rejected", stderr_tail=err)
    if "not found" in low or "does not appear to be a git repository" in low \
            or "does not exist" in low:
        return GitError(f"repository {slug} was not found", reason="not_found",
                        stderr_tail=err)
    if "could not resolve host" in low or "failed to connect" in low \
            or "connection refused" in low or "couldn't connect" in low:
        return GitError(f"cannot reach the host of {slug}", reason="unreachable",
                        stderr_tail=err)
    return GitError(f"git {verb} of {slug} failed (exit {rc})", stderr_tail=err)


def _slug(url: str) -> str:
    if url.startswith("-"):
        raise GitError("a repository URL cannot start with a dash", reason="bad_input")
    try:
        return repo_slug(url)
    except ValueError as exc:
        raise GitError(str(exc), reason="bad_input") from None


def _refuse_url_password(url: str) -> None:
    if "://" not in url:
        return
    parts = urlsplit(url)
    if parts.password is not None or (parts.username and parts.scheme in ("http", "https")):
        raise GitError("a repository URL must not carry a user or password; give the URL "
                       "without it and store the secret with gg credential add --repo "
                       f"{_slug(url)}", reason="bad_input")
