"""What every benchmark shares: figures, a real control plane, and docs/performance.md.

Each benchmark is a script of its own (``python bench/NAME.py [--quick] [--json]``) that
prints its figures and rewrites its own section of ``docs/performance.md`` — the text
between ``<!-- bench:NAME -->`` and ``<!-- /bench:NAME -->`` — together with the exact
command that produced them. Everything runs on loopback, bounded in count and time.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "performance.md"
sys.path.insert(0, str(ROOT))  # the gg of this checkout, also for child processes
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])

from gg import keys  # noqa: E402
from gg.launch import LocalRunner, LocalServer, free_port, sign_in  # noqa: E402


def cpu_of(processes) -> float:
    """User + system CPU seconds of ``processes`` (psutil processes), skipping any that ended."""
    import psutil

    total = 0.0
    for one in processes:
        try:
            used = one.cpu_times()
        except psutil.NoSuchProcess:  # it ended meanwhile
            continue
        total += used.user + used.system
    return total


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, -(-int(q * len(ordered)) // 100) - 1))
    return ordered[k]


def summary(values: list[float], digits: int = 1) -> dict:
    if not values:
        return {"p50": None, "p99": None, "min": None, "max": None, "n": 0}
    return {"p50": round(statistics.median(values), digits),
            "p99": round(percentile(values, 99), digits),
            "min": round(min(values), digits), "max": round(max(values), digits),
            "n": len(values)}


def row(label: str, s: dict, unit: str = "ms") -> str:
    def f(v):
        return "–" if v is None else f"{v:g}"
    return f"| {label} | {f(s['p50'])} | {f(s['p99'])} | {f(s['min'])} | {f(s['max'])} | {s['n']} | {unit} |"


TABLE_HEAD = "| figure | median | p99 | min | max | n | unit |\n|---|---|---|---|---|---|---|"


def command_line() -> str:
    script = Path(sys.argv[0]).resolve()
    try:
        shown = script.relative_to(ROOT)
    except ValueError:
        shown = script
    return "python " + " ".join(shlex.quote(a) for a in [str(shown), *sys.argv[1:]])


LOAD_AT_START = os.getloadavg()[0]  # when the benchmark's process started, not when it writes


# What ``python -c pass`` cost in CPU on the day of the first figures (bench/startup.py,
# 2026-11-30): the machine's speed then, against which :func:`yardstick` reads it now.
YARDSTICK_FIRST_MS = 33.0
YARDSTICK_RUNS = 5


def yardstick() -> float:
    """The machine's speed as a figure: the median CPU time (user + system, ms) of
    ``python -c pass``, which does the same work every time, so that figures taken on
    different days can be read side by side (the shared machine has been measured from
    1 to 3.5 times slower from one day to the next). CPU time, not wall clock, though what
    else runs still moves it (34 to 52 ms over one day): it places a figure within a factor."""
    import resource

    taken = []
    for _ in range(YARDSTICK_RUNS):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        taken.append((after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000)
    return statistics.median(taken)


# What a section's first line says of the noise (issue 30: every figure says whether it ran)
from noise import NO_NOISE, NOISE_RAN  # noqa: E402


def machine(noise: bool | str = False) -> str:
    """The machine as a figure's first line gives it: cores, Python, the hour, the load at
    the start, whether the bench's noise ran beside it (a bench with noise of its own says it
    in its own words), and the yardstick's reading."""
    load = LOAD_AT_START
    said = noise if isinstance(noise, str) else NOISE_RAN if noise else NO_NOISE
    return (f"{os.cpu_count()} cores, Python {platform.python_version()}, "
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average {load:.2f} at start, "
            f"{said}; "
            f"`python -c pass` {yardstick():.0f} ms of CPU, {YARDSTICK_FIRST_MS:g} on 2026-11-30")


def write_section(name: str, body: str, command: str | None = None, *,
                  noise: bool | str = False) -> None:
    """Replace this benchmark's section of docs/performance.md (created when missing);
    ``noise``: whether bench/noise.py's noise ran while it measured (``--noise``), or the
    bench's own words for a noise of its own."""
    text = DOC.read_text() if DOC.exists() else "# Performance\n"
    command = command or command_line()
    block = (f"<!-- bench:{name} -->\n_Measured with `{command}` ({machine(noise)})._\n\n"
             f"{body.strip()}\n<!-- /bench:{name} -->")
    pattern = re.compile(rf"<!-- bench:{re.escape(name)} -->.*?<!-- /bench:{re.escape(name)} -->", re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text)
    else:
        text = text.rstrip() + f"\n\n{block}\n"
    DOC.write_text(text)


def emit(result: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(result))


def publish(section: str, text: str, result: dict, args, *, noise: bool | str | None = None) -> None:
    """A bench's ending: ``text`` printed (on stderr under ``--json``, so that standard output
    is the JSON alone), its section of docs/performance.md written unless ``--no-write``, and
    ``result`` as JSON under ``--json``. ``noise``: as :func:`write_section` takes it; by
    default the bench's ``--noise`` flag."""
    print(text, file=sys.stderr if args.json else sys.stdout)
    if not args.no_write:
        write_section(section, text,
                      noise=bool(getattr(args, "noise", False)) if noise is None else noise)
    emit(result, args.json)


def store_options(ap, *, replicas: bool = True) -> None:
    """``--database URL`` and ``--replicas N``: where the control plane keeps its store, and
    how many ``gg server`` replicas share it (``replicas=False``: a bench of one store in its
    own process, without servers, takes ``--database`` alone)."""
    ap.add_argument("--database", metavar="URL", default=None,
                    help="a PostgreSQL server (postgresql://USER@HOST:PORT/DB) on which each "
                         "run creates a fresh database of its own and drops it afterwards "
                         "(the user may create databases); default: SQLite in a temporary dir")
    if replicas:
        ap.add_argument("--replicas", type=int, default=1,
                        help="gg server replicas sharing the store (more than 1 needs "
                             "--database)")
    else:
        ap.set_defaults(replicas=1)


def fresh_database(url: str) -> tuple[str, str]:
    """A new database of its own on ``url``'s PostgreSQL server: its URL and its name (for
    :func:`drop_database`)."""
    import uuid
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    name = "gg_bench_" + uuid.uuid4().hex[:12]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return urlunsplit(urlsplit(url)._replace(path="/" + name)), name


def drop_database(url: str, name: str) -> None:
    """What :func:`fresh_database` made, dropped (its connections ended with it)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def check_store_options(args) -> None:
    if args.replicas < 1:
        raise SystemExit("--replicas takes a number of at least 1")
    if args.replicas > 1 and not args.database:
        raise SystemExit("--replicas needs --database postgresql://… (SQLite serves one server)")
    if args.database and not args.database.startswith(("postgresql://", "postgres://")):
        raise SystemExit("--database takes a postgresql:// URL")


def store_label(database: str | None, replicas: int) -> str:
    """How a figure's store is named in docs/performance.md."""
    if not database:
        return "SQLite, 1 server"
    return f"PostgreSQL, {replicas} replica{'s' if replicas != 1 else ''}"


class Bench:
    """A real control plane (and optionally real runners) in a temporary folder: one server
    on SQLite, or ``replicas`` servers on a fresh PostgreSQL database made on ``database``'s
    server (dropped by :meth:`stop`)."""

    def __init__(self, root: Path, env: dict[str, str] | None = None, *,
                 database: str | None = None, replicas: int = 1):
        self.root = root
        # thousands of simulated runners register from this one address: no limit per address
        self.env = {"GG_KEY_NONCE_RATE": "0", **(env or {})}
        self._database_made: tuple[str, str] | None = None
        self.database_url: str | None = None
        if database:
            self.database_url = self._fresh_database(database)
            self.env["GG_DATABASE_URL"] = self.database_url
        self.servers = [LocalServer(root / ("data" if i == 0 else f"data{i}"), free_port(),
                                    env=self.env, dev=True,
                                    log=root / ("server.log" if i == 0 else f"server{i}.log"))
                        for i in range(max(1, replicas))]
        self.server = self.servers[0]
        self.runners: list[LocalRunner] = []
        self.config = root / "config"

    def _fresh_database(self, url: str) -> str:
        made, name = fresh_database(url)
        self._database_made = (url, name)
        return made

    def start(self) -> "Bench":
        for server in self.servers:  # the first makes the organisation, the others find it
            server.start(timeout=60)
        sign_in(self.config, self.server.url, self.server.owner_token())
        return self

    @property
    def url(self) -> str:
        return self.server.url

    def url_of(self, i: int) -> str:
        """Replica ``i`` (modulo their number)."""
        return self.servers[i % len(self.servers)].url

    def url_list(self, first: int = 0) -> str:
        """Every replica's URL, comma-separated, replica ``first`` first (a runner's list)."""
        urls = [s.url for s in self.servers]
        first %= len(urls)
        return ",".join(urls[first:] + urls[:first])

    @property
    def token(self) -> str:
        return self.server.owner_token()

    def runner(self, name: str, workers: int = 1, server: str | None = None,
               labels: str | None = None) -> LocalRunner:
        r = LocalRunner(name, server or self.url, self.root / f"state-{name}", self.config,
                        labels=labels, workers=workers, env=self.env,
                        log=self.root / f"runner-{name}.log")
        self.runners.append(r.start())
        return r

    def wait_online(self, count: int, timeout: float = 120.0) -> None:
        import httpx

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            rows = httpx.get(self.url + "/v1/runners", timeout=30,
                             headers={"authorization": f"Bearer {self.token}"}).json()
            if sum(1 for r in rows if r["online"]) >= count:
                return
            time.sleep(0.2)
        raise RuntimeError(f"{count} runners did not come online within {timeout:g}s")

    def stop(self) -> None:
        for r in self.runners:
            r.stop(timeout=15)
        for server in self.servers:
            server.stop()
        if self._database_made is not None:
            drop_database(*self._database_made)
            self._database_made = None


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                              capture_output=True).stdout.strip()
    except OSError:
        return "unknown"


def proved(http, purpose: str, key) -> dict:
    """``public_key``, ``nonce`` and ``signature`` proving ``key`` for one registration
    (``purpose`` register), enrolment or pool join; ``http`` is an httpx client on the server."""
    answer = http.post("/v1/key-nonces", json={"purpose": purpose,
                                                "public_key": keys.public_text(key)})
    answer.raise_for_status()
    return keys.prove(key, purpose, answer.json()["nonce"])
