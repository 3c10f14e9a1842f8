"""Shared fixtures: real control planes and runners on loopback, with shrunk protocol constants.

Nothing here fakes gg's own parts: ``server`` is a real ``gg server`` process with its
SQLite file in a temporary folder, ``runners`` start real ``gg runner up`` processes, and
``gg`` runs the real CLI. Waiting is always :func:`wait_until` (a bounded poll of a
condition), never a sleep that hopes. ``clock`` is the hand-moved clock that use cases and
in-process apps are built with (``tests/control/conftest.py``, ``tests/server/conftest.py``).
"""

from __future__ import annotations

import os
import sys

import pytest

import pg_support
from support import FAST, Clock, Fleet


def keep_bytecode() -> None:
    """The suite starts hundreds of ``python -m gg`` processes (servers, runners, CLI calls).
    Where PYTHONDONTWRITEBYTECODE is set (many container images set it), each of them would
    compile every gg module from source again, about 0.4 s of CPU per server start: they
    keep their bytecode in a cache folder of the suite's own instead (PYTHONPYCACHEPREFIX,
    outside the source tree, checked against each source's mtime as usual). A prefix the
    caller set is kept."""
    import tempfile

    if not os.environ.get("PYTHONDONTWRITEBYTECODE") or os.environ.get("PYTHONPYCACHEPREFIX"):
        return
    prefix = os.path.join(tempfile.gettempdir(), f"gg-tests-pycache-{os.getuid()}")
    os.makedirs(prefix, mode=0o700, exist_ok=True)
    held = os.stat(prefix)
    if held.st_uid != os.getuid() or held.st_mode & 0o077:  # another's folder: compile as before
        return
    os.environ["PYTHONPYCACHEPREFIX"] = prefix
    del os.environ["PYTHONDONTWRITEBYTECODE"]


keep_bytecode()  # before any process is started, the workers' included


def share_probes() -> str | None:
    """Every runner the suite starts probes its host; the dear part of it (asking the
    container engine, a flight under runsc: about 0.8 s of CPU) is measured by the first
    runner and kept for the others in a folder for this run (gg.runner.probe_cache: only
    answers that found the thing usable, keyed by the binaries and their configuration; a
    runner's later probes still measure). Returns the folder this process made, to remove."""
    import tempfile

    from gg.runner.probe_cache import ENV_PROBE_CACHE

    if os.environ.get(ENV_PROBE_CACHE):  # the controller's, inherited by a worker
        return None
    os.environ[ENV_PROBE_CACHE] = tempfile.mkdtemp(prefix="gg-tests-probes-")
    return os.environ[ENV_PROBE_CACHE]


PROBES_MADE = share_probes()


def pytest_unconfigure(config):
    if PROBES_MADE is not None:
        import shutil

        shutil.rmtree(PROBES_MADE, ignore_errors=True)


# A worker runs a thousand tests: one that leaves a descriptor open (a store never closed)
# leaves it for the rest, until a select() past 1024 fails a test far from the leak.
DESCRIPTORS_HELD_AT_MOST = 512


_told_of_leak = False


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    """Said once, at the first test past the bound, not at every test after it."""
    global _told_of_leak
    held = len(os.listdir("/proc/self/fd"))
    if held > DESCRIPTORS_HELD_AT_MOST and not _told_of_leak:
        _told_of_leak = True
        raise AssertionError(
            f"this test process holds {held} open descriptors after {item.nodeid} "
            f"(at most {DESCRIPTORS_HELD_AT_MOST}): a test leaves files or sockets open")


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", help="also run the larger (slow) runs")


def pytest_generate_tests(metafunc):
    """A test module about storage semantics names the stores it runs on in ``STORES``
    (``("sqlite", "postgresql")``): every test of it that uses ``store_kind`` (the ``core``
    and ``app`` fixtures do) runs once on each."""
    if "store_kind" in metafunc.fixturenames:
        kinds = getattr(metafunc.module, "STORES", ("sqlite",))
        if os.environ.get("GG_TEST_STORES"):  # e.g. "sqlite,postgresql": every such test on each
            kinds = tuple(k.strip() for k in os.environ["GG_TEST_STORES"].split(",") if k.strip())
        metafunc.parametrize("store_kind", kinds, scope="function")


# The files whose tests take longest (each over half a minute on two busy cores, measured
# with --durations): they are handed to the workers first, so that none of them starts last
# and runs alone while the other workers have nothing left to do.
LONGEST_FIRST = (
    "tests/test_release.py",
    "tests/server/test_schemathesis.py",
    "tests/cli/test_terminal.py",
    "tests/chaos/",
    "tests/integration/test_faults.py",
    "tests/integration/test_pools.py",
    "tests/integration/test_rolling_upgrade.py",
    "tests/integration/test_replicas.py",
    "tests/cli/test_install.py",
    "tests/test_client.py",
    "tests/server/test_stalls.py",
)


def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: not item.nodeid.startswith(LONGEST_FIRST))  # stable
    if config.getoption("--runslow"):
        return
    skip = pytest.mark.skip(reason="larger run: use --runslow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True, scope="session")
def trees_registry(tmp_path_factory):
    """Every gg process the suite starts records its trees (gg.trees) in a registry of the
    suite's own, never in the registry of the host's root."""
    from gg.trees import ENV_TREES

    saved = os.environ.get(ENV_TREES)
    os.environ[ENV_TREES] = str(tmp_path_factory.mktemp("trees") / "trees")
    try:
        yield os.environ[ENV_TREES]
    finally:
        if saved is None:
            os.environ.pop(ENV_TREES, None)
        else:
            os.environ[ENV_TREES] = saved


@pytest.fixture(autouse=True, scope="session")
def forked_starts(trees_registry):
    """The servers and runners this worker starts through gg.launch, and its fleets' CLI
    calls, are forked from one process that has gg imported (tests/zygote.py), not each
    imported afresh: a server's start 0.2-0.3 s of CPU, not 1.5 s; a CLI call 60 ms, not
    80-220. GG_TESTS_FORK=0 starts each with Popen."""
    import gg.launch

    from zygote import Starts

    if os.environ.get("GG_TESTS_FORK") == "0":
        yield
        return
    starts = Starts()
    gg.launch.starter = starts
    try:
        yield
    finally:
        gg.launch.starter = gg.launch.popen_gg
        starts.close()


@pytest.fixture
def fleet(tmp_path, request):
    f = Fleet(tmp_path, {**FAST, **pg_support.fleet_store(request)}).start()
    try:
        yield f
    finally:
        f.stop()


@pytest.fixture
def fleet_env():
    """Override protocol constants for one test: ``fleet_env.update(...)`` before ``make_fleet``."""
    return dict(FAST)


@pytest.fixture
def make_fleet(tmp_path, request):
    made = []

    def make(env: dict[str, str] | None = None) -> Fleet:
        root = tmp_path / f"fleet{len(made)}"
        root.mkdir(parents=True, exist_ok=True)
        f = Fleet(root, {**FAST, **pg_support.fleet_store(request), **(env or {})}).start()
        made.append(f)
        return f

    yield make
    for f in made:
        f.stop()


@pytest.fixture
def python() -> str:
    return sys.executable


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(scope="session")
def pg_cluster():
    """A throwaway PostgreSQL cluster for this test process (tests/pg_support.py)."""
    bindir = pg_support.binaries()
    if bindir is None:
        pytest.skip("no PostgreSQL on this machine (initdb and pg_ctl: install the postgresql "
                    "package, as .ci/run does)")
    cluster = pg_support.Cluster(bindir).start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def pg_url(pg_cluster) -> str:
    """The URL of a new, migrated database of its own for this test."""
    return pg_cluster.new_database()


@pytest.fixture
def store_kind() -> str:
    return "sqlite"


@pytest.fixture
def store_url(request, store_kind) -> str:
    """Where ``store_kind``'s store lives: "" (SQLite in the data dir) or a PostgreSQL URL."""
    if store_kind == "postgresql":
        return request.getfixturevalue("pg_url")
    return ""


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory):
    """An SQLite store file migrated once for this test process, the template of
    ``store_dir``."""
    from gg.store import open_store

    folder = tmp_path_factory.mktemp("migrated")
    open_store(folder).close()
    return folder / "gg.sqlite3"


@pytest.fixture
def store_dir(tmp_path, store_url, migrated_sqlite):
    """``tmp_path``, the data dir of an in-process store: on SQLite it holds a copy of the
    store migrated once per test process (as ``pg_url`` copies a migrated template database).
    Running every migration again on an empty file cost about 0.12 s of CPU per test; the
    migrations themselves are run by every real ``gg server`` a test starts on a new data
    dir, and checked in tests/store/test_migrations.py."""
    import shutil

    if not store_url:
        shutil.copyfile(migrated_sqlite, tmp_path / "gg.sqlite3")
    return tmp_path


@pytest.fixture
def make_replicas(tmp_path, pg_cluster):
    """``make_replicas(n, env)``: n real ``gg server`` replicas on one new PostgreSQL database
    (tests/replica_support.py), stopped after the test with every runner started on them."""
    from replica_support import ReplicaSet

    made = []

    def make(count: int = 2, env: dict[str, str] | None = None) -> ReplicaSet:
        root = tmp_path / f"replicas{len(made)}"
        replicas = ReplicaSet(root, pg_cluster.new_database(), count, {**FAST, **(env or {})})
        made.append(replicas)
        return replicas.start()

    yield make
    for replicas in made:
        replicas.stop()
