"""Faults of the host answered well (docs/server.md, "Faults"): a full disk, a database that
went down, and a runner that may not read other users' homes. Real processes throughout: a
real ``gg server`` on a real (small) file system or a real PostgreSQL cluster that is stopped
and started again, and real ``gg runner up`` processes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from gg.client import ApiError, Client, Unreachable
from gg.launch import sign_in, stop_process

import pg_support
from support import FAST, Fleet, wait_until


def _mount_tmpfs(where: Path, size: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting a small file system needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not permitted here: {done.stderr.strip()}")


def _umount(where: Path) -> None:
    if subprocess.run(["umount", str(where)], capture_output=True, check=False).returncode:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, check=False)


def _fill(path: Path) -> None:
    """Write ``path`` until its file system has no byte left."""
    chunk = b"\0" * (1 << 16)
    with open(path, "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(chunk)
        except OSError:
            pass
        for size in (4096, 512, 1):  # the last pages, to the brim
            try:
                while True:
                    fh.write(chunk[:size])
            except OSError:
                pass


def test_a_full_disk_is_503_insufficient_storage_with_nothing_stored_and_the_server_recovers(
        tmp_path):
    root = tmp_path / "fleet"
    disk = root / "data"  # the server's --data-dir is the small file system itself
    disk.mkdir(parents=True)
    _mount_tmpfs(disk, "16m")
    try:
        fleet = Fleet(root, dict(FAST)).start()  # its log lies outside the full disk
        try:
            api = Client(fleet.url, fleet.server.owner_token())
            before = len(api.flights())
            filler = disk / "filler"
            _fill(filler)
            big = "x" * 60_000  # a write that needs pages the full disk does not have
            refused = []
            for i in range(3):
                for write in (lambda: api.open_flight({"command": ["echo", big, big, big], "title": f"t{i}"}),
                              lambda: api.add_person(f"late{i}-{big[:30]}", False)):
                    with pytest.raises(ApiError) as caught:
                        write()
                    refused.append(caught.value)
            for exc in refused:
                assert (exc.status, exc.code) == (503, "insufficient_storage"), exc
                assert exc.message.count(".") <= 1 and "\n" not in exc.message, exc.message
                assert "disk is full" in exc.message
            assert api.health().ok  # reading still works
            filler.unlink()
            # the same writes are stored again, and none of the refused ones was
            opened = api.open_flight({"command": ["echo", "after"], "title": "after"})
            api.add_person("after", False)
            titles = [f.title for f in api.flights()]
            assert len(titles) == before + 1 and "after" in titles and opened.id
            names = {p.name for p in api.people()}
            assert "after" in names and not any(n.startswith("late") for n in names)
            log = (root / "server.log").read_text()
            assert "Traceback" not in log and "insufficient_storage" in log
            assert "internal error" not in log
        finally:
            fleet.stop()
    finally:
        _umount(disk)


def test_postgresql_down_for_20_s_leaves_the_flying_flight_alone_and_health_says_so(tmp_path):
    bindir = pg_support.binaries()
    if bindir is None:
        pytest.skip("no PostgreSQL on this machine (initdb and pg_ctl: install the postgresql "
                    "package, as .ci/run does)")
    cluster = pg_support.Cluster(bindir).start()  # a cluster of its own: this test stops it
    try:
        # A lease of 60 s renewed every 5 s: renewals and reports fall in the outage, which
        # the lease outlasts; each is answered 503 and tried again, and none loses the flight.
        env = {**FAST, "GG_DATABASE_URL": cluster.new_database(), "GG_LEASE_TTL": "60",
               "GG_LEASE_RENEW_AT": "55"}
        fleet = Fleet(tmp_path / "fleet", env).start()
        try:
            fleet.runner("r1")
            fleet.wait_online("r1")
            api = fleet.api()
            starts = tmp_path / "starts"
            script = (f"echo started >> {starts}; i=0; while [ $i -lt 450 ]; do "
                      "echo tick $i; i=$((i+1)); sleep 0.1; done")
            flight = api.open_flight({"command": ["sh", "-c", script]})["id"]
            wait_until(lambda: starts.exists() and api.flight(flight)["stage"] == "flying",
                       timeout=60, what="the flight to fly")
            plain = Client(fleet.url)
            answers: list[tuple[int, float]] = []

            def health() -> int:
                began = time.monotonic()
                try:
                    plain.health(timeout=4.0)
                    status = 200
                except Unreachable:  # the first look after the halt may wait on the pool
                    status = 0
                except ApiError as exc:
                    assert exc.code == "database_unavailable", exc
                    assert "database is unavailable" in exc.message
                    status = exc.status
                answers.append((status, time.monotonic() - began))
                return status

            cluster.halt()
            down_until = time.monotonic() + 20
            try:
                wait_until(lambda: health() == 503, timeout=15, interval=0.2,
                           what="health to say the database is unavailable")
                # ...and it keeps saying so, promptly, for the rest of the outage
                wait_until(lambda: health() == 503 and time.monotonic() > down_until,
                           timeout=40, interval=0.5, what="the outage to last 20 s")
            finally:
                cluster.resume()
            wait_until(lambda: health() == 200, timeout=30, interval=0.2,
                       what="health to answer 200 again")
            down = [took for status, took in answers if status == 503]
            assert down and max(down) < 4.0, answers
            print(f"health while the database was down: {len(down)} answers, "
                  f"slowest {max(down):.3f} s")
            wait_until(lambda: api.flight(flight)["stage"] in ("landed", "failed"), timeout=90,
                       what="the flight to land")
            shown = api.flight(flight)
            assert shown["stage"] == "landed", shown
            assert len(shown["attempts"]) == 1, shown["attempts"]
            assert starts.read_text() == "started\n"  # its command never started again
            assert fleet.runners[0].alive()
        finally:
            fleet.stop()
    finally:
        cluster.stop()


NOBODY = 65534


def _as_nobody() -> list[str]:
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]


def _nobody_reaches(path: Path, env: dict | None = None) -> bool:
    return subprocess.run([*_as_nobody(), "test", "-r", str(path), "-a", "-x", str(path)],
                          env=env, check=False).returncode == 0


def test_an_unprivileged_runner_whose_home_it_cannot_read_starts_and_checks_in(fleet):
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to become an unprivileged user")
    import gg

    source = Path(gg.__file__).resolve().parent.parent
    if not _nobody_reaches(source / "gg"):
        pytest.skip(f"uid {NOBODY} cannot reach gg's source at {source}")
    base = Path(tempfile.mkdtemp(prefix="gg-nobody-", dir="/tmp"))  # reachable by uid 65534
    bound = None
    try:
        os.chmod(base, 0o755)
        python, env = Path(sys.executable), {}
        if not _nobody_reaches(python):
            # The Python lives under a private home (pyenv under /root, 0700): the same
            # installation bound at a path uid 65534 can reach, and its libpython found there.
            prefix = Path(sys.base_prefix).resolve()
            bound = base / "python"
            bound.mkdir()
            if subprocess.run(["mount", "--bind", str(prefix), str(bound)], capture_output=True,
                              check=False).returncode:
                bound = None
                pytest.skip(f"uid {NOBODY} cannot reach {python} and a bind mount is not "
                            "permitted here")
            python = bound / Path(sys.executable).resolve().relative_to(prefix)
            env["LD_LIBRARY_PATH"] = str(bound / "lib")
        home = base / "home"  # root's, 0700: the runner's HOME, which it may not read
        home.mkdir(mode=0o700)
        state, config = base / "state", base / "config"
        sign_in(config, fleet.url, fleet.server.owner_token())
        state.mkdir(mode=0o700)
        for root, dirs, files in os.walk(base):
            if Path(root) in (home, bound):
                dirs[:] = []
                continue
            for name in [root, *(os.path.join(root, n) for n in files)]:
                if not name.startswith(str(home)):
                    os.chown(name, NOBODY, NOBODY)
        os.chown(base, 0, 0)
        env.update({"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
                    "PYTHONPATH": str(source), "GG_STATE_DIR": str(state),
                    "GG_CONFIG_DIR": str(config), **FAST})
        log = base / "runner.log"
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                [*_as_nobody(), str(python), "-m", "gg", "--server", fleet.url, "runner", "up",
                 "--name", "nobody", "--workers", "1"], env=env, cwd="/", stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            try:
                fleet.wait_online("nobody", timeout=60)
            except AssertionError:
                raise AssertionError(log.read_text()[-3000:]) from None
            assert proc.poll() is None, log.read_text()
            assert "PermissionError" not in log.read_text()
        finally:
            stop_process(proc, 15, 20)
    finally:
        if bound is not None:
            _umount(bound)
        shutil.rmtree(base, ignore_errors=True)
