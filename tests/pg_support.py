"""A throwaway PostgreSQL cluster for the tests: ``initdb`` and ``pg_ctl`` from the machine's
PostgreSQL, in a temporary directory, on a free loopback port, its unix socket beside it.

PostgreSQL refuses to run as root: as root the cluster runs as the ``postgres`` user (Debian's
package makes it) or, without one, as ``nobody``, in a directory made theirs. One cluster per
test process (each xdist worker starts its own), stopped when the process's session ends.
Each test that asks gets a database of its own, copied from a template that was migrated once.
"""

from __future__ import annotations

import atexit
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

TEMPLATE = "gg_template"


def binaries() -> Path | None:
    """The directory of ``initdb`` and ``pg_ctl``: the newest of /usr/lib/postgresql/*/bin,
    else wherever PATH finds them; None when this machine has no PostgreSQL."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0)
    if found:
        return Path(found[-1]).parent
    initdb, pg_ctl = shutil.which("initdb"), shutil.which("pg_ctl")
    if initdb and pg_ctl:
        return Path(os.path.realpath(initdb)).parent
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    def __init__(self, bindir: Path):
        self.bindir = bindir
        self.user = None
        if os.geteuid() == 0:
            try:
                self.user = pwd.getpwnam("postgres")
            except KeyError:
                self.user = pwd.getpwnam("nobody")
        self.root = Path(tempfile.mkdtemp(prefix="gg-pg-"))
        os.chmod(self.root, 0o700)
        if self.user is not None:
            os.chown(self.root, self.user.pw_uid, self.user.pw_gid)
        self.data = self.root / "data"
        self.port = 0
        self.made = 0

    def _run(self, *args: str) -> None:
        kwargs = {}
        if self.user is not None:
            kwargs = dict(user=self.user.pw_uid, group=self.user.pw_gid, extra_groups=[])
        env = {**os.environ, "HOME": str(self.root), "LC_ALL": "C"}
        done = subprocess.run(args, cwd=self.root, env=env, capture_output=True, text=True,
                              timeout=120, **kwargs)
        if done.returncode != 0:
            log = self.root / "log"
            tail = log.read_text()[-2000:] if log.exists() else ""
            raise RuntimeError(f"{args[0]} failed: {done.stdout}{done.stderr}{tail}")

    def start(self) -> "Cluster":
        self._run(str(self.bindir / "initdb"), "-D", str(self.data), "-U", "gg",
                  "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C")
        for attempt in range(5):  # a port taken between the probe and the bind: another one
            self.port = _free_port()
            try:
                self._pg_ctl_start()
                break
            except RuntimeError:
                if attempt == 4:
                    raise
        atexit.register(self.stop)  # also when the session ends without its teardown
        import psycopg

        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {TEMPLATE}")
        from gg.store import Store

        Store(self.url(TEMPLATE)).close()  # the schema, once: each test's database copies it
        return self

    def _pg_ctl_start(self) -> None:
        options = (f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 "
                   "-c fsync=off -c full_page_writes=off -c max_connections=300 "
                   "-c shared_buffers=32MB")
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l",
                  str(self.root / "log"), "-o", options, "-w", "-t", "60", "start")

    def halt(self) -> None:
        """Stop the database server, keeping its data (a database that went down)."""
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w",
                  "stop")

    def resume(self) -> None:
        """Start it again after :meth:`halt`, on the same port, with the same data."""
        self._pg_ctl_start()

    def url(self, database: str) -> str:
        return f"postgresql://gg@127.0.0.1:{self.port}/{database}"

    def new_database(self, migrated: bool = True) -> str:
        """A new database's URL: the migrated template's copy, or empty (``migrated=False``)."""
        import psycopg

        self.made += 1
        name = f"gg_{os.getpid()}_{self.made}"
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            # FILE_COPY (PostgreSQL 15+) copies the template's few files instead of logging them
            copy = " STRATEGY FILE_COPY" if conn.info.server_version >= 150000 else ""
            template = f" TEMPLATE {TEMPLATE}{copy}" if migrated else ""
            conn.execute(f"CREATE DATABASE {name}{template}")
        return self.url(name)

    def stop(self) -> None:
        if not self.root.exists():
            return
        try:
            if (self.data / "postmaster.pid").exists():
                self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate",
                          "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def fleet_store(request) -> dict[str, str]:
    """The environment of a real fleet's server: with ``GG_TEST_STORES=postgresql`` its store
    is a new PostgreSQL database (the whole integration suite on PostgreSQL, on demand);
    otherwise nothing (SQLite in its data dir)."""
    if os.environ.get("GG_TEST_STORES", "").strip() != "postgresql":
        return {}
    return {"GG_DATABASE_URL": request.getfixturevalue("pg_cluster").new_database()}
