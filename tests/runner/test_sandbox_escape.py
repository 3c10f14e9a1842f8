"""Attacks on the sandbox, played for real: a flight tries to undo its confinement and to read
every gg secret on the host. Each must fail, as root (the usual runner) and, where the machine
allows, as an unprivileged user."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil
import pytest

from gg import trees
from gg.launch import LocalServer, free_port, gg_argv, stop_process
from gg.pool.drivers import MemberLaunch
from gg.pool.drivers.process import ProcessDriver
from gg.pool.image import build_image
from gg.runner import isolation
from gg.runner.capabilities import probe
from gg.runner.flight_identity import shared
from gg.runner.isolation import ENV_HIDE, Launch, build

from support import FAST, Fleet, flight_workspace, run_launch, wait_until

CAPS = probe()
needs_sandbox = pytest.mark.skipif(
    not CAPS["bwrap_usable"],
    reason=f"a bubblewrap sandbox cannot start here ({CAPS['bwrap_error']})")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the attack needs a root runner")
SANDBOX = {"isolation": "sandbox", "egress": "all", "workers": 1}
KEY = ("-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIsecret-key-material\n"
       "-----END PRIVATE KEY-----\n")
CREDENTIAL = "ggr_the-runner-credential-0123456789"
TOKEN = "ggp_the-person-token-0123456789"
NOBODY = 65534
# Each variant of the sandbox the runner may build: with a user namespace of its own, and
# with bubblewrap dropping the capabilities alone (a host that refuses user namespaces).
VARIANTS = [pytest.param(True, id="user-namespace"), pytest.param(False, id="cap-drop")]
# The same attacks under isolation gvisor (runsc, a root runner's): "gvisor" in place of the
# user-namespace choice.
GVISOR = pytest.param("gvisor", id="gvisor", marks=pytest.mark.skipif(
    not (CAPS.get("gvisor") or {}).get("usable"),
    reason=f"gVisor cannot run a flight here ({(CAPS.get('gvisor') or {}).get('error')})"))


@pytest.fixture
def host_dir(tmp_path):
    """A directory on the host outside /tmp (a sandbox's /tmp is private, so a secret under the
    host's /tmp would prove nothing): where the tests put what a flight must not read."""
    base = Path("/var/tmp") if os.path.isdir("/var/tmp") else tmp_path
    path = Path(tempfile.mkdtemp(prefix="gg-escape-", dir=base))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _caps(user_namespace: bool) -> dict:
    confinement = dict(CAPS["confinement"] or {})
    confinement["user_namespace"] = user_namespace
    return {**CAPS, "confinement": confinement}


def _env(*path: Path) -> dict[str, str]:
    dirs = [str(p) for p in path] + os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep)
    return {"PATH": os.pathsep.join(dirs), "LANG": "C.UTF-8"}


@contextlib.contextmanager
def _runner_path(*dirs: Path):
    """This process, playing the runner, with ``dirs`` first on its own PATH: the runner's
    PATH directories are what a sandbox binds (a flight's PATH binds nothing)."""
    saved = os.environ["PATH"]
    os.environ["PATH"] = _env(*dirs)["PATH"]
    try:
        yield
    finally:
        os.environ["PATH"] = saved


def _launch(script: str, workspace: Path, *, state_dir: Path | None = None, hidden=(),
            env: dict | None = None, user_namespace: bool = True, bound=()) -> Launch:
    """A sandboxed ``sh -c script``; ``bound``: directories on the runner's own PATH."""
    gvisor = user_namespace == "gvisor"
    with _runner_path(*bound):
        return build(["sh", "-c", script],
                     policy={**SANDBOX, "isolation": "gvisor"} if gvisor else SANDBOX,
                     workspace=workspace, env=env or _env(), state_dir=state_dir,
                     capabilities=CAPS if gvisor else _caps(bool(user_namespace)),
                     hidden=list(hidden))


def _run(launch: Launch, prefix: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    try:
        return run_launch(launch, prefix=prefix, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL)
    finally:
        if launch.private is not None:  # a gvisor flight's bundle, runsc's record of it
            subprocess.run(launch.cleanup or ["true"], capture_output=True, check=False)
            launch.discard()


def _state_dir(path: Path, key: str = KEY) -> Path:
    """A runner's state directory as the runner writes it: key, credential, workspaces."""
    (path / "workspaces").mkdir(parents=True)
    (path / "key.pem").write_text(key)
    (path / "runner.json").write_text(json.dumps({"credential": CREDENTIAL}))
    return path


def _config_dir(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({"server": "http://x", "token": TOKEN}))
    return path


def _no_secret(result: subprocess.CompletedProcess[str]) -> None:
    seen = result.stdout + result.stderr
    for secret in ("secret-key-material", CREDENTIAL, TOKEN, "BEGIN PRIVATE KEY"):
        assert secret not in seen, seen


def _status(text: str) -> dict[str, str]:
    return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in text.splitlines())}


# -- confinement --------------------------------------------------------------------------------

@needs_sandbox
@needs_root
@pytest.mark.parametrize("user_namespace", VARIANTS)
def test_a_root_runners_sandbox_has_no_capabilities_and_no_new_privs(tmp_path, user_namespace):
    result = _run(_launch("cat /proc/self/status; echo Pid: $$", tmp_path,
                          user_namespace=user_namespace))
    status = _status(result.stdout)
    assert result.returncode == 0, result.stderr
    assert int(status["CapEff"], 16) == 0 and int(status["CapPrm"], 16) == 0
    assert status["NoNewPrivs"] == "1"
    assert int(status["Pid"]) <= 2  # a pid namespace of its own
    assert int(status["Uid"].split()[0]) != 0 and int(status["Gid"].split()[0]) != 0
    assert CAPS["confinement"] == {"layout": "allowlist", "capabilities": "dropped",
                                   "no_new_privs": True, "pid_namespace": True,
                                   "user_namespace": False, "uid": shared().first().uid,
                                   "proc_sys_writable": False}


ESCAPE = """
umount {state} && echo umounted
umount -l {state} && echo umounted-lazily
mount -o remount,rw / && echo remounted
mount -o remount,rw {state} && echo remounted-mask
unshare -Urm sh -c 'umount {state} && echo nested-umounted; cat {state}/key.pem'
cat {state}/key.pem {state}/runner.json
touch /etc/gg-escape && echo wrote-etc
echo done
"""


@needs_sandbox
@needs_root
@pytest.mark.parametrize("user_namespace", [*VARIANTS, GVISOR])
def test_a_flight_cannot_umount_the_mask_nor_remount_root_read_write(host_dir, user_namespace):
    # The state dir sits inside a directory the sandbox binds (a PATH directory), so only the
    # mask stands between the flight and the key.
    tools = host_dir / "tools"
    state = _state_dir(tools / "state")
    workspace = state / "workspaces" / "f1"
    workspace.mkdir()
    result = _run(_launch(ESCAPE.format(state=state), workspace, state_dir=state,
                          bound=[tools], user_namespace=user_namespace))
    out = result.stdout.split()
    assert out[-1] == "done", result.stderr
    # Every attack really ran and was refused: a missing tool would make it pass for nothing.
    assert "not found" not in result.stderr, result.stderr
    for escaped in ("umounted", "umounted-lazily", "remounted", "remounted-mask",
                    "nested-umounted", "wrote-etc"):
        assert escaped not in out, result.stderr
    _no_secret(result)
    assert not Path("/etc/gg-escape").exists()


# -- every gg tree on the host ------------------------------------------------------------------

@pytest.fixture
def fake_host(tmp_path, host_dir, monkeypatch):
    """A host with a second user whose home sits inside a directory the sandbox binds, holding
    another runner's state, a maintainer's state, a person's config and a server's data where
    platformdirs puts them; plus trees named by GG_STATE_DIR, GG_CONFIG_DIR and GG_DATA_DIR."""
    tools = host_dir / "tools"
    home = tools / "home" / "alice"
    other = _state_dir(home / ".local/state/gg/runner")
    maintainer = _state_dir(home / ".local/state/gg/maintain-ui")
    person = _config_dir(home / ".config/gg")
    data = home / ".local/share/gg/server"
    data.mkdir(parents=True)
    (data / "gg.db").write_text(TOKEN)
    passwd = tmp_path / "passwd"
    passwd.write_text(f"root:x:0:0:root:/root:/bin/sh\nalice:x:1000:1000::{home}:/bin/sh\n")
    monkeypatch.setattr(isolation, "PASSWD", str(passwd))
    named_state = _state_dir(tools / "named-state")
    named_config = _config_dir(tools / "named-config")
    named_data = tools / "named-data"
    named_data.mkdir()
    (named_data / "gg.db").write_text(CREDENTIAL)
    monkeypatch.setenv("GG_STATE_DIR", str(named_state))
    monkeypatch.setenv("GG_CONFIG_DIR", str(named_config))
    monkeypatch.setenv("GG_DATA_DIR", str(named_data))
    return {"tools": tools, "home": home, "other": other, "maintainer": maintainer,
            "person": person, "data": data, "named": [named_state, named_config, named_data]}


def _reader(paths) -> str:
    return "".join(f"ls -A {p}; cat {p}/key.pem {p}/runner.json {p}/config.json {p}/gg.db;\n"
                   for p in paths) + "echo done\n"


@needs_sandbox
@pytest.mark.parametrize("user_namespace", [*VARIANTS, GVISOR])
def test_another_runners_key_a_persons_config_and_a_servers_data_are_hidden(
        fake_host, tmp_path, user_namespace):
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    elsewhere = _state_dir(tmp_path / "elsewhere" / "state")  # in the host's /tmp, unnamed
    paths = [fake_host[k] for k in ("other", "maintainer", "person", "data")]
    paths += [*fake_host["named"], elsewhere, fake_host["home"]]
    result = _run(_launch(_reader(paths), workspace, bound=[fake_host["tools"]],
                          user_namespace=user_namespace))
    assert result.stdout.split()[-1] == "done", result.stderr
    _no_secret(result)
    # The bound directory itself is there (so the masks, not its absence, hide the trees);
    # listed from inside it: runsc 20221219 refuses `ls DIR` (docs/isolation.md).
    listed = _run(_launch(f"cd {fake_host['home']}/.local/state && ls", workspace,
                          bound=[fake_host["tools"]], user_namespace=user_namespace))
    assert listed.stdout.split() == ["gg"]


def _environ_of(pid: int) -> bytes:
    # Popen returns once exec has begun; the kernel shows the new environment only a moment
    # later (an empty /proc/PID/environ until then): wait for the process itself.
    return wait_until(lambda: Path(f"/proc/{pid}/environ").read_bytes(),
                      what="the process's environment to be readable")


@needs_sandbox
@needs_root
def test_a_process_naming_gg_hide_usr_and_etc_does_not_change_what_flights_see(
        tmp_path, host_dir):
    """Issue 32: a service ran `env GG_HIDE=/usr:/etc sleep 600`, and every later flight on
    the host failed (`bwrap: execvp /bin/sh`): runners read other processes' environments."""
    tools = host_dir / "tools"
    named = _state_dir(tools / "named-by-a-neighbour")
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    neighbour = subprocess.Popen(["sleep", "120"], env={
        **os.environ, "GG_HIDE": "/usr:/etc", "GG_STATE_DIR": str(named)})
    try:
        assert b"GG_HIDE=/usr:/etc" in _environ_of(neighbour.pid)
        trees = isolation.gg_trees(environ={})
        result = _run(_launch("ls /usr/bin/env /etc/passwd; "
                              f"cat {named}/runner.json; echo; echo ran", workspace, bound=[tools]))
    finally:
        neighbour.kill()
        neighbour.wait()
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-1] == "ran"
    assert Path("/usr") not in trees and Path("/etc") not in trees and named not in trees
    assert "/usr/bin/env" in result.stdout and "/etc/passwd" in result.stdout
    assert CREDENTIAL in result.stdout  # a path named by nobody but a neighbour: not masked


@needs_sandbox
def test_a_runners_state_dir_given_as_a_relative_path_is_hidden_from_every_flight(
        tmp_path, host_dir):
    """Issue 31: a runner started with GG_STATE_DIR=state in a bound tree (an editable
    checkout; here a directory on the runners' PATH): its key and credential were readable."""
    fleet = Fleet(tmp_path / "fleet", dict(FAST)).start()
    tools = host_dir / "tools"
    tools.mkdir()
    runner = subprocess.Popen(
        gg_argv("--server", fleet.url, "runner", "up", "--name", "relative"),
        env={**os.environ, **fleet.env, "GG_STATE_DIR": "state",
             "GG_CONFIG_DIR": str(fleet.config_dir)},
        cwd=tools, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)
    try:
        fleet.wait_online("relative")
        state = tools / "state"
        assert (state / "key.pem").exists() and (state / "runner.json").exists()
        workspace = tmp_path / "workspace"
        workspace.mkdir()
        result = _run(_launch(f"ls -A {state}; cat {state}/key.pem {state}/runner.json; "
                              "echo; echo done", workspace, bound=[tools]))
    finally:
        stop_process(runner)
        fleet.stop()
    assert result.stdout.split()[-1] == "done", result.stderr
    assert state in trees.recorded()  # recorded by the runner, as an absolute path
    key = (state / "key.pem").read_text().splitlines()[1]
    credential = json.loads((state / "runner.json").read_text())["credential"]
    assert key not in result.stdout and credential not in result.stdout, result.stdout


@needs_sandbox
def test_a_servers_data_dir_under_a_bound_tree_is_hidden_from_every_flight(tmp_path, host_dir):
    """Issue 31: `gg server --data-dir` under a bound tree (/usr/local, a checkout): its store
    and the owner's token were readable from a sandboxed flight."""
    tools = host_dir / "tools"
    data = tools / "data"
    server = LocalServer(data, free_port(), env=dict(FAST), log=tmp_path / "server.log").start()
    try:
        token = server.owner_token()
        workspace = tmp_path / "workspace"
        workspace.mkdir()
        result = _run(_launch(f"ls -A {data}; cat {data}/owner-token {data}/*.db; echo done",
                              workspace, bound=[tools]))
    finally:
        server.stop()
    assert result.stdout.split()[-1] == "done", result.stderr
    assert token not in result.stdout and "owner-token" not in result.stdout, result.stdout


def _is_stranger(pid: int) -> bool:
    process = psutil.Process(pid)
    return (process.uids().real == NOBODY and process.name() == "sleep"
            and b"GG_HIDE" in Path(f"/proc/{pid}/environ").read_bytes())


def test_another_users_process_does_not_decide_what_a_flight_sees(tmp_path):
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to start another user's process")
    named = tmp_path / "named-by-nobody"
    stranger = subprocess.Popen([*_unprivileged(), "sleep", "120"],
                                env={**os.environ, "GG_STATE_DIR": "/usr",
                                     "GG_HIDE": str(named)})
    try:
        # Until setpriv has exec'd sleep, the process is still root's (whose environment a
        # runner does trust): wait for the stranger itself.
        wait_until(lambda: _is_stranger(stranger.pid), what="the stranger to start")
        trees = isolation.gg_trees(environ={})
    finally:
        stranger.kill()
        stranger.wait()
    assert Path("/usr") not in trees and named not in trees


def test_the_trees_found_are_the_platformdirs_roots_of_every_home_and_the_named_ones(fake_host):
    trees = isolation.gg_trees(passwd=isolation.PASSWD)
    home = fake_host["home"]
    for sub in (".config/gg", ".local/state/gg", ".local/share/gg"):
        assert home / sub in trees and Path("/root") / sub in trees
    assert all(p in trees for p in fake_host["named"])


# -- a pool member's flights and its maintainer -------------------------------------------------

@needs_sandbox
def test_a_pool_members_flight_cannot_read_its_maintainers_key(tmp_path, host_dir, monkeypatch):
    """The process driver starts the member the way a maintainer does; the member's runner then
    builds its flight's sandbox from the environment it was handed."""
    tools = host_dir / "tools"  # bound into the sandbox: only masks can hide what is in it
    maintainer = _state_dir(tools / "maintain-ui")
    maintainer_config = _config_dir(tools / "maintainer-config")
    context = tmp_path / "context"
    context.mkdir()
    (context / "hello.txt").write_text("hello\n")
    image = build_image(context, tmp_path / "images")
    driver = ProcessDriver(maintainer / "members", tmp_path / "images", stop_grace=5,
                           hide=[maintainer, maintainer_config])
    member = "m_0123456789"
    driver.start(MemberLaunch(member_id=member, name="ui-pool-1", digest=image.digest,
                              code="ggm_code", server="http://127.0.0.1:9", image_ref="ui"))
    try:
        pid = driver.pid(member)
        # Until the member's exec is done its environment reads empty (see tests/pool).
        raw = wait_until(lambda: Path(f"/proc/{pid}/environ").read_text(),
                         what="the member's environment")
        environ = dict(e.split("=", 1) for e in raw.split("\0") if "=" in e)
    finally:
        driver.remove(member)
    hidden = environ[ENV_HIDE].split(os.pathsep)
    assert str(maintainer) in hidden and str(maintainer_config) in hidden
    assert str(maintainer / "members") in hidden
    # The member's own directories, as its runner sees them (made again: remove wiped them).
    home = maintainer / "members" / member
    state = _state_dir(home / "state", key=KEY.replace("secret", "member"))
    (home / "image").mkdir()
    (home / "image" / "hello.txt").write_text("hello from the image\n")
    flight_workspace(home / "image")  # the member's runner hands it to its flight, as its workspace
    sibling = _state_dir(maintainer / "members" / "m_9876543210" / "state")
    workspace = flight_workspace(state / "workspaces" / "f1")
    monkeypatch.setenv(ENV_HIDE, environ[ENV_HIDE])
    monkeypatch.setenv("GG_STATE_DIR", environ["GG_STATE_DIR"])
    monkeypatch.setenv("GG_CONFIG_DIR", environ["GG_CONFIG_DIR"])
    monkeypatch.setenv("GG_IMAGE_ROOT", environ["GG_IMAGE_ROOT"])  # the member's own
    script = (_reader([maintainer, maintainer_config, sibling, state]).replace("echo done\n", "")
              + 'cat "$GG_IMAGE_ROOT/hello.txt"; echo left > "$GG_IMAGE_ROOT/left"; echo done\n')
    result = _run(_launch(script, workspace, state_dir=state,
                          hidden=[Path(environ["GG_CONFIG_DIR"])], bound=[tools],
                          env={**_env(), "GG_IMAGE_ROOT": environ["GG_IMAGE_ROOT"]}))
    assert result.stdout.split()[-1] == "done", result.stderr
    _no_secret(result)
    assert "member-key-material" not in result.stdout
    assert "hello from the image" in result.stdout  # its own machine stays its own
    assert (home / "image" / "left").read_text() == "left\n"


# -- gg installed under /tmp ----------------------------------------------------------------

_RUNNER = """
import os, subprocess, sys
from pathlib import Path
import gg
from gg.runner.capabilities import probe
from gg.runner.isolation import build
from gg.runner.launching import LAUNCHER
workspace = Path(sys.argv[1])
launch = build([sys.executable, "-c", "import gg; print(gg.__file__)"],
               policy={"isolation": "sandbox", "egress": "all"}, workspace=workspace,
               env=dict(os.environ), state_dir=None, capabilities=probe())
done = LAUNCHER.start(launch.argv, env=launch.env, cwd=launch.cwd, stdout=subprocess.PIPE,
                      stderr=subprocess.STDOUT, handed=launch.handed)
print(gg.__file__)
print(done.stdout.read().decode().strip())
"""


@needs_sandbox
def test_gg_installed_under_tmp_runs_inside_the_sandbox(tmp_path):
    import gg

    assert str(tmp_path).startswith("/tmp/")
    install = tmp_path / "install"
    shutil.copytree(Path(gg.__file__).parent, install / "gg",
                    ignore=shutil.ignore_patterns("__pycache__"))
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    env = {**os.environ, "PYTHONPATH": str(install)}
    done = subprocess.run([sys.executable, "-c", _RUNNER, str(workspace)], env=env, cwd="/",
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    outside, inside = done.stdout.strip().splitlines()
    assert outside == str(install / "gg" / "__init__.py")
    assert inside == outside  # the same gg, imported inside the sandbox


# -- as an unprivileged user --------------------------------------------------------------

def _unprivileged() -> list[str]:
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]


@needs_sandbox
def test_the_attacks_fail_as_an_unprivileged_runner_too(host_dir):
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to become an unprivileged user")
    base = host_dir / "nobody"
    tools = base / "tools"
    state = _state_dir(tools / "state")
    person = _config_dir(tools / "config")
    workspace = state / "workspaces" / "f1"
    workspace.mkdir()
    os.chmod(host_dir, 0o755)
    for root, dirs, files in os.walk(base):
        for name in [root, *(os.path.join(root, n) for n in dirs + files)]:
            os.chown(name, NOBODY, NOBODY)
    launch = _launch(ESCAPE.format(state=state) + _reader([person]), workspace, state_dir=state,
                     hidden=[person], bound=[tools])
    bound = [a for i, a in enumerate(launch.argv) if launch.argv[i - 1] in ("--ro-bind",)]
    unreachable = [p for p in bound if subprocess.run(
        [*_unprivileged(), "test", "-r", p, "-a", "-x", p], check=False).returncode]
    if unreachable:
        pytest.skip(f"uid {NOBODY} cannot reach {unreachable[0]}, which the sandbox binds "
                    "(the runner's Python or gg lives under a private directory)")
    result = _run(launch, prefix=_unprivileged())
    out = result.stdout.split()
    assert out[-1] == "done", result.stderr
    assert not {"umounted", "umounted-lazily", "remounted", "remounted-mask",
                "nested-umounted", "wrote-etc"} & set(out)
    _no_secret(result)


# -- end to end: a real server, a real runner ---------------------------------------------------

@needs_sandbox
def test_a_flight_on_a_real_root_runner_shows_no_key_material(tmp_path, host_dir):
    fleet = Fleet(tmp_path / "prod", dict(FAST))
    fleet.server.dev = False  # every runner is sandboxed by default
    fleet.start()
    try:
        # The runner's state dir inside a directory on its PATH (so bound into the sandbox):
        # only the mask, and the confinement that keeps it in place, hide the key.
        tools = host_dir / "tools"
        tools.mkdir()
        fleet.runner("r1", env={"GG_STATE_DIR": str(tools / "state"),
                                         "PATH": f"{tools}{os.pathsep}{os.environ['PATH']}"})
        fleet.wait_online("r1")
        api = fleet.api()
        row = next(r for r in api.runners() if r["name"] == "r1")
        assert row["policy"]["isolation"] == "sandbox" and row["health"] == "ok"
        state, config = tools / "state", fleet.config_dir
        attack = (ESCAPE.format(state=state).replace("echo done\n", "")
                  + f"umount {config}; cat {config}/config.json; ls -A {state} {config}\n"
                  + "echo done\n")
        flight = api.open_flight({"command": [attack]})
        wait_until(lambda: api.flight(flight["id"])["stage"] in ("landed", "failed"),
                   timeout=40, what="the attacking flight to end")
        shown = subprocess.run(gg_argv("show", flight["id"]), capture_output=True, text=True,
                               env={**os.environ, **fleet.env, "GG_CONFIG_DIR": str(config),
                                    "GG_SERVER": fleet.url}, timeout=60, check=False)
        assert shown.returncode == 0, shown.stderr
        assert "done" in shown.stdout
        key = (state / "key.pem").read_text().strip().splitlines()
        secrets = [line for line in key if not line.startswith("-----")]
        secrets.append(json.loads((state / "runner.json").read_text())["credential"])
        secrets.append(json.loads((config / "config.json").read_text())["token"])
        for secret in secrets:
            assert secret not in shown.stdout
        assert "BEGIN" not in shown.stdout, shown.stdout
        output = "".join(f["body"]["text"] for f in api.flight(flight["id"])["facts"]
                         if f["kind"] == "output").split()
        assert output[-1] == "done", output
        assert not {"umounted", "umounted-lazily", "remounted", "remounted-mask",
                    "nested-umounted", "wrote-etc"} & set(output), output
    finally:
        fleet.stop()
