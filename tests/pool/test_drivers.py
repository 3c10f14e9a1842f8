"""The drivers' contract: the process driver with real processes; podman and docker by the
argv they hand the engine (no engine runs here), and with a real engine where one answers."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gg.launch import free_port
from gg.pool.drivers import DriverError, MemberLaunch, make_driver
from gg.pool.drivers.container import ContainerDriver
from gg.pool.drivers.process import ProcessDriver
from gg.pool.image import build_image, image_path

from podman_support import engine_env
from support import wait_until

MEMBER = "m_0123456789"


def launch(digest: str, server: str = "http://127.0.0.1:9", member_id: str = MEMBER):
    return MemberLaunch(member_id=member_id, name=f"ui-pool-{member_id[2:]}", digest=digest,
                        code="ggm_secret-code", server=server, image_ref="ui-image")


@pytest.fixture
def image(tmp_path):
    context = tmp_path / "context"
    context.mkdir()
    (context / "hello.txt").write_text("hello\n")
    return build_image(context, tmp_path / "images")


# --------------------------------------------------------------------------- process


def _proc_file(pid: int, name: str) -> bytes:
    """/proc/PID/NAME once the process has finished its exec (empty before)."""
    return Path(f"/proc/{pid}/{name}").read_bytes()


def test_a_process_member_starts_from_its_image_and_a_new_driver_adopts_it(tmp_path, image):
    root = tmp_path / "members"
    maintainer = tmp_path / "maintainer-state"
    driver = ProcessDriver(root, tmp_path / "images", stop_grace=5, hide=[maintainer])
    driver.prepare(image.digest, "ui-image")
    # Nothing listens on the server's port: the member keeps trying to join, and runs.
    driver.start(launch(image.digest, server=f"http://127.0.0.1:{free_port()}"))
    home = root / MEMBER
    assert (home / "image" / "hello.txt").read_text() == "hello\n"
    assert driver.running(MEMBER) and driver.members() == [MEMBER]
    pid = json.loads((home / "member.json").read_text())["pid"]
    # Popen returns once the child's close-on-exec pipe shuts, which the kernel does before it
    # lays out the new program's argv and environment: until then both read empty.
    environ = wait_until(lambda: _proc_file(pid, "environ"), what="the member's environment")
    cmdline = wait_until(lambda: _proc_file(pid, "cmdline"), what="the member's command line")
    environ = environ.split(b"\0")
    assert f"GG_IMAGE_ROOT={home / 'image'}".encode() in environ
    assert b"GG_TOKEN" not in [e.split(b"=")[0] for e in environ]
    hide = next(e for e in environ if e.startswith(b"GG_HIDE=")).decode()[len("GG_HIDE="):]
    assert {str(maintainer), str(root)} <= set(hide.split(os.pathsep))  # masked in its flights
    assert b"runner" in cmdline.split(b"\0") and b"ggm_secret-code" not in cmdline

    adopter = ProcessDriver(root, tmp_path / "images", stop_grace=5)  # a restarted maintainer
    assert adopter.members() == [MEMBER] and adopter.running(MEMBER)
    assert adopter.pid(MEMBER) == pid
    adopter.remove(MEMBER)
    assert not home.exists() and adopter.members() == []
    wait_until(lambda: driver.running(MEMBER) is False, timeout=15, what="the member to stop")


def test_a_recorded_pid_that_now_names_another_process_is_not_adopted(tmp_path, image):
    home = tmp_path / "members" / MEMBER
    home.mkdir(parents=True)
    (home / "member.json").write_text(json.dumps({"pid": os.getpid(), "started": 1}))
    driver = ProcessDriver(tmp_path / "members", tmp_path / "images")
    assert not driver.running(MEMBER) and driver.pid(MEMBER) is None


def test_the_process_driver_refuses_a_missing_image_and_a_path_for_a_member_id(tmp_path):
    driver = ProcessDriver(tmp_path / "members", tmp_path / "images")
    with pytest.raises(DriverError, match="is not in .* on this host: build it here"):
        driver.prepare("sha256:" + "d" * 64, "ui-image")
    with pytest.raises(DriverError, match="not a member id"):
        driver.remove("../../etc")
    assert make_driver("process", pool="p", root=tmp_path, images_dir=tmp_path).name == "process"
    with pytest.raises(DriverError, match="one of process, podman, docker"):
        make_driver("lxc", pool="p", root=tmp_path, images_dir=tmp_path)


# --------------------------------------------------------------------------- containers


class FakeEngine:
    """Stands in for the engine's command line: records every call, answers from a script."""

    def __init__(self, answers=None):
        self.calls: list[tuple[list[str], dict | None]] = []
        self.answers = answers or {}

    def __call__(self, argv, env, timeout):
        self.calls.append((argv, env))
        for prefix, answer in self.answers.items():
            if " ".join(argv[1:]).startswith(prefix):
                return answer
        return 0, "", ""


D = "sha256:" + "e" * 64


@pytest.mark.parametrize("engine", ["podman", "docker"])
def test_a_container_member_is_run_from_the_pinned_image_with_its_code_never_on_argv(engine):
    fake = FakeEngine()
    driver = ContainerDriver(engine, "ui-pool", run=fake, which=lambda name: f"/usr/bin/{name}")
    driver.start(launch(D, server="http://10.0.0.1:8421"))
    argv, env = fake.calls[-1]
    assert argv[:4] == [engine, "run", "--detach", "--name"]
    assert argv[4] == f"gg-ui-pool-{MEMBER}"
    assert f"ui-image@{D}" in argv
    assert argv[argv.index(f"ui-image@{D}") + 1:] == [
        "gg", "--server", "http://10.0.0.1:8421", "runner", "up", "--once",
        "--name", f"ui-pool-{MEMBER[2:]}", "--grace", "10"]
    assert ["--env", "GG_MEMBER_CODE"] == argv[argv.index("GG_MEMBER_CODE") - 1:
                                               argv.index("GG_MEMBER_CODE") + 1]
    assert "ggm_secret-code" not in " ".join(argv)
    assert env == {"GG_MEMBER_CODE": "ggm_secret-code"}
    for label in ("gg.pool=ui-pool", f"gg.member={MEMBER}", f"gg.digest={D}"):
        assert label in argv


def test_a_container_driver_lists_removes_and_checks_its_members_through_the_engine():
    fake = FakeEngine({
        "ps": (0, f"{MEMBER}\nnot-a-member\nm_abc\n", ""),
        "inspect --format": (0, "true\n", ""),
        "image inspect": (1, "", "no such image"),
        "pull": (1, "", "Error: manifest unknown"),
    })
    driver = ContainerDriver("podman", "ui-pool", run=fake, which=lambda name: "/bin/podman")
    assert driver.members() == [MEMBER, "m_abc"]
    assert fake.calls[-1][0] == ["podman", "ps", "--all", "--filter", "label=gg.pool=ui-pool",
                                 "--format", '{{index .Labels "gg.member"}}']
    assert driver.running(MEMBER)
    driver.remove(MEMBER)
    assert [c[0][1] for c in fake.calls[-2:]] == ["stop", "rm"]
    assert fake.calls[-1][0] == ["podman", "rm", "--force", f"gg-ui-pool-{MEMBER}"]
    with pytest.raises(DriverError, match="cannot pull ui-image@sha256:e+: Error: manifest unknown"):
        driver.prepare(D, "ui-image")


def test_the_capability_report_says_when_no_engine_works():
    missing = ContainerDriver("docker", "p", run=FakeEngine(), which=lambda name: None)
    assert missing.problem() == "docker is not installed on this host"
    silent = ContainerDriver("docker", "p", which=lambda name: "/bin/docker", run=FakeEngine(
        {"info": (1, "", "Cannot connect to the Docker daemon at unix:///var/run/docker.sock.")}))
    assert silent.problem() == ("docker does not answer on this host: Cannot connect to the "
                                "Docker daemon at unix:///var/run/docker.sock.")
    healthy = ContainerDriver("docker", "p", run=FakeEngine(), which=lambda name: "/bin/docker")
    assert healthy.problem() is None


def _engine_answering() -> str | None:
    for engine in ("podman", "docker"):
        exe = shutil.which(engine)
        done = subprocess.run([exe, "info"], capture_output=True, timeout=10,
                              check=False) if exe else None
        if done is not None and done.returncode == 0:
            return engine
    return None


ENGINE = _engine_answering()
real_engine = pytest.mark.skipif(
    ENGINE is None, reason="no container engine answers on this host (podman or docker info "
                           "fails), so the real-engine contract cannot run here")


@pytest.fixture
def engine(tmp_path, monkeypatch):
    """The engine that answers, set up for this host through the maintainer's own
    environment (tests/podman_support.py): no file of the host changes."""
    assert ENGINE is not None
    if os.geteuid() != 0:
        pytest.skip("the real-engine contract runs its members as root")
    for key, value in engine_env(tmp_path).items():
        monkeypatch.setenv(key, value)
    return ENGINE


@real_engine
def test_a_real_engine_reports_itself_usable_and_lists_no_members_of_an_unknown_pool(engine):
    driver = ContainerDriver(engine, "gg-test-nonexistent-pool")
    assert driver.problem() is None
    assert driver.members() == []
    assert not driver.running(MEMBER)


@real_engine
def test_a_real_engine_runs_a_member_of_an_image_built_here_pinned_by_its_digest(
        engine, image, tmp_path):
    """Imported from the images dir, checked layer for digest; the member runs the host's
    gg from the host's Python, read-only, and sees the image's files at its root; a new
    driver adopts it; remove takes it away. A tarball changed after its build is refused."""
    pool = f"gg-test-{os.getpid()}"
    driver = ContainerDriver(engine, pool, images_dir=image.path.parent)
    name = driver.container(MEMBER)
    try:
        driver.prepare(image.digest, "ui-image")
        layers = subprocess.run([engine, "image", "inspect", "--format",
                                 "{{json .RootFS.Layers}}", driver.local(image.digest)],
                                capture_output=True, text=True, timeout=60, check=False)
        assert json.loads(layers.stdout) == [image.digest]  # the engine holds exactly it
        driver.start(launch(image.digest, server=f"http://127.0.0.1:{free_port()}"))
        wait_until(lambda: driver.running(MEMBER), what="the member's container to run")
        assert ContainerDriver(engine, pool).members() == [MEMBER]  # a restarted maintainer's
        inside = subprocess.run(
            [engine, "exec", name, "/bin/sh", "-c", 'cat "$GG_IMAGE_ROOT/hello.txt"; '
             "cat /proc/1/cmdline | tr '\\0' ' '; touch /usr/gg-test 2>&1 || echo read-only"],
            capture_output=True, text=True, timeout=60, check=False)
        assert inside.stdout.startswith("hello\n"), inside
        assert " -m gg --server http://127.0.0.1:" in inside.stdout
        assert " runner up --once --name ui-pool-0123456789 " in inside.stdout
        assert inside.stdout.rstrip().endswith("read-only")
        assert "ggm_secret-code" not in inside.stdout  # never on its command line
        driver.remove(MEMBER)
        assert driver.members() == [] and not driver.running(MEMBER)
    finally:
        subprocess.run([engine, "rm", "--force", name], capture_output=True, timeout=60)
        subprocess.run([engine, "rmi", "--force", driver.local(image.digest)],
                       capture_output=True, timeout=60)
    forged = "sha256:" + "b" * 64
    image_path(forged, image.path.parent).write_bytes(image.path.read_bytes())
    with pytest.raises(DriverError, match="does not match its digest"):
        driver.prepare(forged, "ui-image")
