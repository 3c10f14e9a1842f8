"""Wrap a flight's command so that it runs under the policy's isolation and egress.

The policy is met or the flight does not run: when the capability report says a piece is
missing, ``build`` raises ``IsolationUnavailable`` naming it (the same phrase the server shows
as ``degraded: ...``), and the runner reports degraded. Nothing here ever falls back to less
isolation than the policy asks for.

What each combination becomes::

    none      + all    the command as is, cwd = workspace
    none      + none   bwrap --dev-bind / / --unshare-net  (the host as is, but an empty
                       network namespace: only its own loopback, so egress is really cut)
    sandbox   + all    bwrap: read-only /, private /tmp, /proc and /dev, own pid namespace,
                       new session, dies with the runner, writable workspace, HOME in it,
                       the runner's state dir (and any ``hidden`` path) masked by an empty
                       read-only tmpfs
    sandbox   + none   the same, plus --unshare-net
    container + all    ENGINE run --rm, workspace mounted at /workspace, image ``image``
    container + none   the same, plus --network none
    any       + allowlist  IsolationUnavailable("egress allowlist is not enforced yet")

Secrets in ``env`` never appear on a command line: bwrap and the plain command inherit the
environment, and a container gets ``--env NAME`` (the engine client reads the value from its
own environment).
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gg.domain.health import first_missing
from gg.domain.policy import Policy

DEFAULT_IMAGE = "docker.io/library/python:3.11-slim"
CONTAINER_WORKSPACE = "/workspace"
# Host-specific variables that mean nothing (or the wrong thing) inside a container.
_HOST_ONLY = frozenset({"PATH", "HOME", "PWD", "OLDPWD", "SHLVL", "HOSTNAME", "TMPDIR", "_",
                        "SSH_AUTH_SOCK", "DISPLAY", "XAUTHORITY", "DBUS_SESSION_BUS_ADDRESS"})


class IsolationUnavailable(Exception):
    """The policy cannot be met on this host; ``missing`` is the one missing piece."""

    def __init__(self, missing: str) -> None:
        super().__init__(missing)
        self.missing = missing


@dataclass(frozen=True)
class Launch:
    """What to hand ``subprocess.Popen``: ``Popen(l.argv, env=l.env, cwd=l.cwd)``.

    ``cleanup`` is an argv to run when the flight is cancelled or the runner stops it: killing
    a container engine's client does not stop the container, so ``ENGINE rm -f NAME`` must.
    """

    argv: list[str]
    env: dict[str, str]
    cwd: Path
    cleanup: list[str] | None = None
    container_name: str | None = None


def _bwrap(capabilities: Mapping[str, Any]) -> str:
    return str(capabilities.get("bwrap") or "bwrap")


def _masks(workspace: Path, hidden: Iterable[Path]) -> list[Path]:
    masks: list[Path] = []
    for path in hidden:
        path = Path(os.path.abspath(path))
        if path == workspace or path == Path("/"):
            raise ValueError(f"{path} cannot be hidden from a sandbox whose workspace is "
                             f"{workspace}")
        if path not in masks:
            masks.append(path)
    return masks


def _sandbox_argv(bwrap: str, workspace: Path, masks: list[Path], cut_net: bool) -> list[str]:
    argv = [bwrap, "--die-with-parent", "--new-session", "--unshare-pid"]
    if cut_net:
        argv.append("--unshare-net")
    argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    # Mount outer paths before inner ones: a workspace inside the state dir is bound after the
    # state dir is masked, and a mask inside the workspace comes after the workspace bind.
    mounts: list[tuple[int, list[str]]] = [
        (len(workspace.parts), ["--bind", str(workspace), str(workspace)])]
    for mask in masks:
        mounts.append((len(mask.parts), ["--tmpfs", str(mask)]))
    for _, args in sorted(mounts, key=lambda m: m[0]):
        argv += args
    # Read-only last, so the mount points for deeper binds already exist inside each mask.
    for mask in masks:
        argv += ["--remount-ro", str(mask)]
    return argv + ["--chdir", str(workspace)]


def _container(command: list[str], engine: str, workspace: Path, env: Mapping[str, str],
               cut_net: bool, image: str, name: str) -> Launch:
    argv = [engine, "run", "--rm", "--name", name, "--security-opt", "no-new-privileges",
            "--volume", f"{workspace}:{CONTAINER_WORKSPACE}", "--workdir", CONTAINER_WORKSPACE,
            "--env", f"HOME={CONTAINER_WORKSPACE}"]
    if cut_net:
        argv += ["--network", "none"]
    passed = {k: v for k, v in env.items() if k not in _HOST_ONLY}
    for key in sorted(passed):
        argv += ["--env", key]
    client_env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "XDG_RUNTIME_DIR",
                                                               "DOCKER_HOST", "CONTAINER_HOST")}
    client_env.update(passed)
    return Launch(argv=argv + [image, *command], env=client_env, cwd=workspace,
                  cleanup=[engine, "rm", "--force", name], container_name=name)


def build(command: list[str], *, policy: Policy | Mapping[str, Any], workspace: Path,
          env: Mapping[str, str], state_dir: Path | None, capabilities: Mapping[str, Any],
          hidden: Iterable[Path] = (), image: str = DEFAULT_IMAGE,
          container_name: str | None = None) -> Launch:
    """Wrap ``command`` for ``policy``; raise ``IsolationUnavailable`` if it cannot be met.

    ``state_dir`` (the runner's keys and credentials) and every ``hidden`` path (pass the
    runner's config dir) are neither readable nor writable inside a sandbox.
    """
    if not command:
        raise ValueError("there is no command to run")
    policy = policy if isinstance(policy, Policy) else Policy.from_dict(policy)
    missing = first_missing(policy, capabilities)
    if missing:
        raise IsolationUnavailable(missing)
    workspace = Path(os.path.abspath(workspace))
    cut_net = policy.egress == "none"
    out_env = dict(env)
    if policy.isolation == "container":
        engine = str(capabilities["container_engine"])
        name = container_name or f"gg-{workspace.name[:40]}-{secrets.token_hex(4)}"
        return _container(command, engine, workspace, out_env, cut_net, image, name)
    if policy.isolation == "none":
        if not cut_net:
            return Launch(argv=list(command), env=out_env, cwd=workspace)
        argv = [_bwrap(capabilities), "--die-with-parent", "--unshare-net",
                "--dev-bind", "/", "/", "--chdir", str(workspace), "--"]
        return Launch(argv=argv + list(command), env=out_env, cwd=workspace)
    masks = _masks(workspace, [*([state_dir] if state_dir else []), *hidden])
    out_env["HOME"] = str(workspace)
    out_env["TMPDIR"] = "/tmp"
    argv = _sandbox_argv(_bwrap(capabilities), workspace, masks, cut_net)
    return Launch(argv=argv + ["--", *command], env=out_env, cwd=workspace)


def build_argv(command: list[str], *, policy: Policy | Mapping[str, Any], workspace: Path,
               env: Mapping[str, str], state_dir: Path | None,
               capabilities: Mapping[str, Any], **options: Any) -> tuple[list[str], dict[str, str]]:
    """(argv, env) for callers that only need those two; run it with ``cwd=workspace``."""
    launch = build(command, policy=policy, workspace=workspace, env=env, state_dir=state_dir,
                   capabilities=capabilities, **options)
    return launch.argv, launch.env
