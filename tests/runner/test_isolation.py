"""Isolation and egress, pinned with real processes in real bubblewrap sandboxes."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from gg.runner.capabilities import probe
from gg.runner.flight_env import ENVIRONMENT_FILE, runner_env, sourcing
from gg.runner.isolation import (
    CONTAINER_WORKSPACE,
    DEFAULT_IMAGE,
    MEMORY,
    IsolationUnavailable,
    Launch,
    _LastPolicy,
    build,
    build_argv,
    environments_root,
    layout,
    private_paths,
)

from fleet_support import CONFINED
from support import flight_workspace, gone, handed_argv, run_launch

CAPS = probe()
needs_bwrap = pytest.mark.skipif(
    not CAPS["bwrap_usable"],
    reason=f"a bubblewrap sandbox cannot start here ({CAPS['bwrap_error']})")
needs_netns = pytest.mark.skipif(not CAPS["netns"], reason="bwrap cannot make a network namespace")

SANDBOX = {"isolation": "sandbox", "egress": "all", "workers": 1}
SANDBOX_OFFLINE = {"isolation": "sandbox", "egress": "none", "workers": 1}


def _env() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}


def _launch(command: list[str], policy: dict, workspace: Path, state_dir: Path | None = None,
            **options) -> Launch:
    return build(command, policy=policy, workspace=workspace, env=_env(), state_dir=state_dir,
                 capabilities=CAPS, **options)


def _run(launch: Launch) -> subprocess.CompletedProcess[str]:
    return run_launch(launch, capture_output=True, text=True, stdin=subprocess.DEVNULL)


def _sh(script: str, policy: dict, workspace: Path, state_dir: Path | None = None,
        **options) -> subprocess.CompletedProcess[str]:
    return _run(_launch(["sh", "-c", script], policy, workspace, state_dir, **options))


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return flight_workspace(tmp_path / "workspace")


# -- the file system --------------------------------------------------------------------------

@needs_bwrap
def test_sandbox_writes_into_the_workspace(workspace):
    result = _sh("echo made > made.txt && cat made.txt", SANDBOX, workspace)
    assert result.returncode == 0, result.stderr
    assert (workspace / "made.txt").read_text() == "made\n"


@needs_bwrap
def test_sandbox_cannot_write_to_etc(workspace):
    target = Path("/etc") / f"gg-isolation-{os.getpid()}"
    result = _sh(f"echo x > {target}", SANDBOX, workspace)
    assert result.returncode != 0
    assert "Read-only file system" in result.stderr
    assert not target.exists()


@needs_bwrap
def test_state_dir_is_neither_readable_nor_writable(tmp_path):
    state = tmp_path / "state"
    (state / "workspaces" / "f1").mkdir(parents=True)
    (state / "runner.key").write_text("secret key")
    workspace = flight_workspace(state / "workspaces" / "f1")  # the usual layout: in the state dir
    result = _sh(f"cat {state}/runner.key; echo x > {state}/planted; echo ok > in-ws",
                 SANDBOX, workspace, state)
    assert "secret key" not in result.stdout
    assert "No such file or directory" in result.stderr
    assert "Read-only file system" in result.stderr
    assert not (state / "planted").exists()
    assert (workspace / "in-ws").read_text() == "ok\n"


@needs_bwrap
def test_state_dir_elsewhere_and_hidden_paths_are_masked(tmp_path, workspace):
    state, config = tmp_path / "state", tmp_path / "config"
    state.mkdir()
    config.mkdir()
    (state / "runner.key").write_text("secret key")
    (config / "token").write_text("ggp_person")
    result = _sh(f"ls -A {state} {config}; cat {state}/runner.key {config}/token",
                 SANDBOX, workspace, state, hidden=[config])
    assert "runner.key" not in result.stdout and "token" not in result.stdout
    assert "secret key" not in result.stdout and "ggp_person" not in result.stdout


@needs_bwrap
def test_what_only_its_owner_may_read_in_etc_is_blank_in_a_sandbox(workspace):
    """A root runner's flight runs as root: /etc/shadow (and every /etc file others may not
    read, every /etc directory others may not enter) must still be out of its sight."""
    private_dirs, private_files = private_paths("/etc", now=0.0)
    assert Path("/etc/shadow") in private_files  # Debian: root:shadow 0640
    result = _sh("cat /etc/shadow; echo; cat /etc/passwd", SANDBOX, workspace)
    assert "Permission denied" in result.stderr  # covered by a device it may not open
    assert result.stdout.startswith("\n")  # nothing of /etc/shadow
    assert "root:" in result.stdout  # what anyone may read is still there
    for private in private_files:
        shown = _sh(f"cat {private} 2>/dev/null | wc -c", SANDBOX, workspace)
        assert shown.stdout.strip() == "0", (private, shown.stdout, shown.stderr)
    for private in private_dirs:
        shown = _sh(f"ls -A {private} | wc -l", SANDBOX, workspace)
        assert shown.stdout.strip() == "0", (private, shown.stdout, shown.stderr)


def test_private_paths_are_what_others_may_not_read(tmp_path):
    root = tmp_path / "etc"
    (root / "open").mkdir(parents=True)
    (root / "closed").mkdir()
    (root / "closed" / "inside").write_text("x")
    (root / "open" / "key").write_text("secret")
    (root / "open" / "conf").write_text("public")
    (root / "open" / "link").symlink_to(root / "open" / "key")
    os.chmod(root / "closed", 0o750)
    os.chmod(root / "open" / "key", 0o640)
    dirs, files = private_paths(root, now=1e9)
    assert dirs == [root / "closed"] and files == [root / "open" / "key"]
    os.chmod(root / "open" / "conf", 0o600)  # looked at again only after PRIVATE_REFRESH
    assert private_paths(root, now=1e9 + 1)[1] == [root / "open" / "key"]
    again = private_paths(root, now=1e9 + 1000)[1]
    assert sorted(again) == [root / "open" / "conf", root / "open" / "key"]


@needs_bwrap
def test_only_the_allowlist_is_bound_homes_and_var_are_not(workspace):
    plan = layout(workspace)
    bound = [str(dest) for dest in plan.visible()]
    result = _sh("ls -A / /root; test -e /var/lib && echo var-lib; test -e /home && echo home",
                 SANDBOX, workspace)
    shown = set(result.stdout.split())
    assert "var-lib" not in shown and "home" not in shown
    # (a root runner's sandbox also holds its command's environment, read-only, at the root)
    assert shown - {"/:", "/root:"} <= {"bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr",
                                         "etc", "opt", "dev", "proc", "tmp",
                                         ENVIRONMENT_FILE.strip("/"), *(
                                             p.strip("/").split("/")[i] for p in bound
                                             for i in (0, 1) if p.count("/") > i)}
    for root_entry in Path("/root").iterdir():  # only what leads to a bound path is there
        if root_entry.name in shown:
            assert any(b == str(root_entry) or b.startswith(f"{root_entry}/") for b in bound)


@needs_bwrap
def test_the_root_is_read_only_and_nothing_is_left_of_it_but_the_layout(workspace):
    result = _sh("touch /made-at-root && echo made; mkdir /srv2 && echo made", SANDBOX, workspace)
    assert "made" not in result.stdout
    assert "Read-only file system" in result.stderr


@needs_bwrap
def test_tmp_is_private(workspace):
    with tempfile.NamedTemporaryFile(dir="/tmp", prefix="gg-host-") as host_file:
        result = _sh(f"test -e {host_file.name} && echo visible || echo hidden; "
                     "echo inside > /tmp/gg-inside", SANDBOX, workspace)
    assert result.stdout.strip() == "hidden", result.stderr
    assert not Path("/tmp/gg-inside").exists()


@needs_bwrap
def test_home_points_into_the_workspace(workspace):
    result = _sh('echo "$HOME"; touch "$HOME/.rc"', SANDBOX, workspace)
    assert result.stdout.strip() == str(workspace)
    assert (workspace / ".rc").exists()


# -- processes --------------------------------------------------------------------------------

@needs_bwrap
def test_sandbox_has_its_own_pid_namespace(workspace):
    result = _sh("echo $$; ls /proc", SANDBOX, workspace)
    lines = result.stdout.split()
    pids = [p for p in lines[1:] if p.isdigit()]
    assert int(lines[0]) < 10
    assert len(pids) < 10, pids
    assert str(os.getpid()) not in pids


_PARENT = """
import json, subprocess, sys
launch = json.loads(sys.argv[1])
subprocess.Popen(launch["argv"], env=launch["env"], cwd=launch["cwd"],
                 pass_fds=launch["fds"]).wait()
"""


def _wait_for(condition, what: str, deadline: float = 15.0) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def _names(pid: int) -> set[str]:
    """The names of ``pid``'s descendants as they are now (one may exit while read)."""
    names = set()
    for child in psutil.Process(pid).children(recursive=True):
        try:
            names.add(child.name())
        except psutil.NoSuchProcess:
            pass
    return names


@needs_bwrap
def test_sandboxed_child_dies_with_its_parent(workspace):
    launch = _launch(["sh", "-c", "echo $$ > ready; exec sleep 300"], SANDBOX, workspace)
    argv, fds = handed_argv(launch)
    payload = json.dumps({"argv": argv, "env": launch.env, "cwd": str(launch.cwd), "fds": fds})
    parent = subprocess.Popen([sys.executable, "-c", _PARENT, payload], pass_fds=fds)
    for fd in fds:
        os.close(fd)
    sandboxed: list[psutil.Process] = []
    try:
        _wait_for(lambda: (workspace / "ready").exists(), "the sandbox to start")
        # ``ready`` is written by the shell a moment before it becomes ``sleep``: wait for
        # the exec too, or the tree read in between holds a shell that is about to vanish
        _wait_for(lambda: "sleep" in _names(parent.pid), "the sandboxed sleep to start")
        sandboxed = psutil.Process(parent.pid).children(recursive=True)
        parent.kill()
        parent.wait()
        _wait_for(lambda: all(gone(p.pid) for p in sandboxed), "the sandbox to die")
    finally:
        parent.kill()
        parent.wait()
        for leftover in sandboxed:  # only if the test failed: leave nothing running
            try:
                leftover.kill()
            except psutil.NoSuchProcess:
                pass


# -- egress -----------------------------------------------------------------------------------

@pytest.fixture
def host_port() -> Iterator[int]:
    """A real TCP server on the host's loopback that accepts and closes."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                conn.close()
            except OSError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    server.close()


def _connect(port: int, policy: dict, workspace: Path) -> subprocess.CompletedProcess[str]:
    code = (f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5).close(); "
            "print('connected')")
    return _run(_launch([sys.executable, "-c", code], policy, workspace))


@needs_bwrap
@needs_netns
@pytest.mark.parametrize("isolation", ["sandbox", "none"])
def test_egress_none_cannot_reach_the_host(isolation, host_port, workspace):
    result = _connect(host_port, {"isolation": isolation, "egress": "none"}, workspace)
    assert result.returncode != 0
    assert "connected" not in result.stdout
    assert "Connection refused" in result.stderr or "unreachable" in result.stderr


@needs_bwrap
@pytest.mark.parametrize("isolation", ["sandbox", "none"])
def test_egress_all_reaches_the_host(isolation, host_port, workspace):
    result = _connect(host_port, {"isolation": isolation, "egress": "all"}, workspace)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "connected"


@needs_netns
def test_egress_none_without_isolation_still_uses_a_network_namespace(workspace):
    launch = _launch(["true"], {"isolation": "none", "egress": "none"}, workspace)
    assert launch.argv[0] == CAPS["bwrap"]
    assert "--unshare-net" in launch.argv and "--unshare-pid" not in launch.argv


# -- isolation none ---------------------------------------------------------------------------

def test_isolation_none_runs_the_command_as_is_in_the_workspace(workspace):
    argv, _ = build_argv(["pwd"], policy={"isolation": "none", "egress": "all"},
                           workspace=workspace, env=_env(), state_dir=None, capabilities={})
    assert argv == ["pwd"]
    launch = _launch(["pwd"], {"isolation": "none", "egress": "all"}, workspace)
    assert _run(launch).stdout.strip() == str(workspace)


# -- never less than asked --------------------------------------------------------------------

@pytest.mark.parametrize("policy, caps, missing", [
    (SANDBOX, {"bwrap": None, "bwrap_usable": False}, "bubblewrap not installed"),
    (SANDBOX, {"bwrap": "/usr/bin/bwrap", "bwrap_usable": False},
     "bubblewrap cannot create namespaces here"),
    (SANDBOX_OFFLINE, {"bwrap": "/usr/bin/bwrap", "bwrap_usable": True, "netns": False,
                       "confinement": CONFINED},
     "network namespaces unavailable"),
    ({"isolation": "none", "egress": "none"}, {"bwrap": None}, "bubblewrap not installed"),
    ({"isolation": "container", "egress": "all"}, {"container_engine": None},
     "no container engine reachable"),
    ({"isolation": "sandbox", "egress": "allowlist"}, {**CAPS, "egress_controls": ["all"]},
     "egress allowlist needs nftables (nft) and root"),
    ({"isolation": "sandbox", "egress": "allowlist"},
     {**CAPS, "egress_controls": ["all", "allowlist"]},
     "egress allowlist: no network namespace was made for it"),
    ({"isolation": "sandbox", "egress": "all"}, {}, "no capability report yet"),
    (SANDBOX, {"bwrap": "/usr/bin/bwrap", "bwrap_usable": True,
               "confinement": {"capabilities": "kept", "no_new_privs": True,
                               "pid_namespace": True, "user_namespace": False}},
     "the sandbox cannot drop its capabilities"),
])
def test_an_unmet_policy_raises_instead_of_running_with_less(policy, caps, missing, workspace):
    with pytest.raises(IsolationUnavailable) as raised:
        build(["true"], policy=policy, workspace=workspace, env=_env(), state_dir=None,
              capabilities=caps)
    assert raised.value.missing == missing
    assert str(raised.value) == missing


def test_the_workspace_cannot_be_hidden(workspace):
    with pytest.raises(ValueError, match="cannot be hidden"):
        build(["true"], policy=SANDBOX, workspace=workspace, env=_env(), state_dir=workspace,
              capabilities={"bwrap": "/usr/bin/bwrap", "bwrap_usable": True,
                            "confinement": CONFINED})


# -- containers (argv only: no engine runs here) ----------------------------------------------

ENGINE = {"container_engine": "podman", "bwrap": None, "bwrap_usable": False, "netns": False}


@pytest.mark.parametrize("egress, offline", [("none", True), ("all", False)])
def test_container_mounts_the_workspace_and_cuts_egress_on_request(egress, offline, workspace):
    env = {**_env(), "GG_FLIGHT": "f_1", "API_TOKEN": "s3cret"}
    launch = build(["make", "test"], policy={"isolation": "container", "egress": egress},
                   workspace=workspace, env=env, state_dir=None, capabilities=ENGINE,
                   container_name="gg-f1")
    argv = launch.argv
    assert argv[:3] == ["podman", "run", "--name"]
    assert "--rm" not in argv  # kept until the runner read how it ended (gg.runner.containers)
    assert launch.cwd == launch.private  # where podman 4's conmon leaves its oom mark
    assert f"{workspace}:{CONTAINER_WORKSPACE}" in argv
    assert argv[argv.index("--workdir") + 1] == CONTAINER_WORKSPACE
    assert ("--network" in argv and argv[argv.index("--network") + 1] == "none") is offline
    assert argv[-3:] == ["sh", "make", "test"]
    assert argv[argv.index(DEFAULT_IMAGE) + 1:] == sourcing(["make", "test"])
    assert "s3cret" not in " ".join(argv)  # values travel in a bound file, not argv
    assert f"HOME={CONTAINER_WORKSPACE}" in argv
    assert launch.cleanup == ["podman", "rm", "--force", "--time", "0", "gg-f1"]
    launch.discard()


def _bound_environment(launch: Launch) -> Path:
    """The host file a container's launch binds at ENVIRONMENT_FILE."""
    argv = launch.argv
    mounts = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--volume"]
    return Path(next(m for m in mounts if m.endswith(f":{ENVIRONMENT_FILE}:ro")).split(":")[0])


def test_a_containers_engine_client_gets_the_runners_environment_and_the_container_the_flights(
        workspace, tmp_path):
    flights = {"LD_PRELOAD": "/nonexistent/libmark.so", "PATH": "/flight/bin",
               "PYTHONPATH": "/flight/py", "API_TOKEN": "s3cret", "MULTI": "one\ntwo",
               "TRICKY": "a=b # c 'd' \"e\" $(id) `id` \\", "EMPTY": ""}
    state = tmp_path / "state"
    launch = build(["make", "test"], policy={"isolation": "container", "egress": "all"},
                   workspace=workspace, env={**_env(), **flights}, state_dir=state,
                   capabilities=ENGINE, container_name="gg-f1")
    assert launch.env == runner_env()  # the client's: the runner's own, as bubblewrap's
    assert not {k for k, v in flights.items() if launch.env.get(k) == v}
    assert "s3cret" not in " ".join(launch.argv)
    bound = _bound_environment(launch)
    # in memory where a tmpfs is mounted (a flight's secrets never reach a disk), else the
    # state dir's
    assert bound.parent.parent == environments_root(state) and launch.private == bound.parent
    assert bound.parent.parent.parent in (state, MEMORY)
    assert stat.S_IMODE(bound.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(bound.stat().st_mode) == 0o444
    # What the container's shell makes of it: every value as it was, none but the host's
    # PATH (the image keeps its own)
    shown = subprocess.run(["/bin/sh", "-c", '. "$0" && exec "$1" -c "$2"', str(bound),
                            sys.executable, "import json, os; print(json.dumps(dict(os.environ)))"],
                           env={"PATH": "/image/bin"}, capture_output=True, text=True, timeout=30)
    inside = json.loads(shown.stdout)
    assert {k: inside.get(k) for k in flights if k != "PATH"} == {
        k: v for k, v in flights.items() if k != "PATH"}
    assert inside["PATH"] == "/image/bin"
    launch.discard()
    assert not bound.parent.exists()
    launch.discard()  # once more: nothing left, nothing happens


def test_a_containers_image_is_the_policys_unless_given_and_the_default_otherwise(workspace):
    policy = {"isolation": "container", "egress": "all", "image": "registry.example/ci:2"}
    for given, used in ((None, "registry.example/ci:2"), ("registry.example/ci:3",
                                                          "registry.example/ci:3")):
        launch = build(["true"], policy=policy, workspace=workspace, env={}, state_dir=None,
                       capabilities=ENGINE, image=given, container_name="gg-f1")
        assert launch.argv[-6] == used
        shutil.rmtree(launch.private or "/nonexistent", ignore_errors=True)
    launch = build(["true"], policy={"isolation": "container", "egress": "all"},
                   workspace=workspace, env={}, state_dir=None, capabilities=ENGINE,
                   container_name="gg-f1")
    assert launch.argv[-6] == DEFAULT_IMAGE
    shutil.rmtree(launch.private or "/nonexistent", ignore_errors=True)


def test_a_given_image_that_is_not_an_image_reference_is_refused_not_passed_to_the_engine(
        workspace):
    """The image a flight carries (its environment's) is checked again on the runner: an
    engine flag in its place never reaches the engine's command line."""
    with pytest.raises(IsolationUnavailable, match="must be an image reference"):
        build(["true"], policy={"isolation": "container", "egress": "all"}, workspace=workspace,
              env={}, state_dir=None, capabilities=ENGINE, image="--privileged",
              container_name="gg-f1")


def test_container_image_is_a_parameter(workspace):
    launch = build(["true"], policy={"isolation": "container", "egress": "all"},
                   workspace=workspace, env={}, state_dir=None,
                   capabilities={**ENGINE, "container_engine": "docker"},
                   image="registry.example/ci:1")
    assert launch.argv[0] == "docker"
    assert launch.argv[-6:] == ["registry.example/ci:1", *sourcing(["true"])]
    assert launch.container_name and launch.container_name.startswith("gg-workspace-")


def test_a_containers_resource_limits_are_the_engines_flags_before_its_image(workspace):
    launch = build(["true"], policy={"isolation": "container", "egress": "all"},
                   workspace=workspace, env=_env(), state_dir=None, capabilities=ENGINE,
                   container_name="gg-f1", limits={"memory": 256 << 20, "cpus": 0.5, "pids": 64})
    argv = launch.argv
    flags = ["--memory", str(256 << 20), "--memory-swap", str(256 << 20), "--cpus", "0.5",
             "--pids-limit", "64"]
    at = argv.index("--memory")
    assert argv[at:at + len(flags)] == flags and at < argv.index(DEFAULT_IMAGE)
    launch.discard()


def test_a_policy_is_read_once_until_it_changes_even_in_place():
    """The policy a runner's flights share is read once (its limits checked, its allowlist
    parsed), and read again whenever what it is read from differs: another dict, or the
    same dict changed in place."""
    read = _LastPolicy()
    given = {"isolation": "none", "egress": "allowlist", "workers": 2, "allow": ["a.test:443"]}
    first = read.policy(given)
    assert read.policy(dict(given)) is first
    given["allow"].append("b.test:443")  # changed in place: read again
    second = read.policy(given)
    assert second is not first and len(second.allow) == 2
    given["egress"] = "none"
    assert read.policy(given).egress == "none"
    with pytest.raises(ValueError):
        read.policy({**given, "workers": 0})
    with pytest.raises(ValueError):  # a refusal is never kept as if it were read
        read.policy({**given, "workers": 0})
    read.policy({**given, "workers": 2})
    for equal_but_refused in (2.0, True):  # == to 2, yet not a whole number: read, refused
        with pytest.raises(ValueError):
            read.policy({**given, "workers": equal_but_refused})


def test_the_runners_environment_drops_ggs_variables_but_those_kept(monkeypatch):
    """bwrap runs without any GG_ variable of the runner's (a token among them); a flight's
    environment starts from the same, keeping only what it is told to (GG_IMAGE_ROOT)."""
    monkeypatch.setenv("GG_TOKEN", "ggp_not-for-a-flight")
    monkeypatch.setenv("GG_IMAGE_ROOT", "/srv/image")
    monkeypatch.setenv("PLAIN", "kept")
    assert "GG_TOKEN" not in runner_env() and "GG_IMAGE_ROOT" not in runner_env()
    kept = runner_env(keeping=("GG_IMAGE_ROOT",))
    assert kept["GG_IMAGE_ROOT"] == "/srv/image" and kept["PLAIN"] == "kept"
    assert not any(k.startswith("GG_") for k in kept if k != "GG_IMAGE_ROOT")
