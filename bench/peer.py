#!/usr/bin/env python3
"""Peer side of gg's side-by-side benchmark: a Prefect 3 process worker, fully offline.

    python bench/peer.py [--jobs N] [--repeats R] [--json] [--poll SECONDS]

What it does, in order:

1. Makes sure ``bench/.peer-venv`` exists and holds the pinned versions from
   ``bench/peer-requirements.txt`` (created and installed on first use), then
   re-executes itself with that venv's interpreter, so Prefect never meets gg's
   own dependencies.
2. Starts a throw-away Prefect server on 127.0.0.1 (free port, its own SQLite
   file in a temp dir, UI, analytics and telemetry off, no cloud) and points
   ``PREFECT_API_URL`` at it.
3. Creates a ``process`` work pool and a deployment of a trivial flow whose
   body writes ``time.time()`` to a file and returns.
4. Starts ``prefect worker start --type process`` with
   ``PREFECT_WORKER_QUERY_SECONDS`` set to ``--poll`` and measures:
   * dispatch latency: R sequential runs, one at a time, on an idle worker:
     driver clock right after ``create_flow_run_from_deployment`` returned
     (run accepted, state Scheduled)  ->  ``time.time()`` at the first line of
     the flow body.  Also reported: "claim" = accepted -> the server's
     timestamp of the run's first Pending state (the worker took it).
   * throughput: N runs submitted at once; first submit -> the server
     timestamp of the last Completed state, with worker ``--limit 1`` and
     ``--limit 4`` (flow-run concurrency of one worker).
5. Stops everything it started (worker, flow-run processes, server) at the
   end, on error, on Ctrl-C and on SIGTERM, and deletes the temp dir.

Every wait is bounded by a per-step timeout and by ``--max-seconds`` overall.
With ``--json`` stdout carries exactly one JSON object (the table goes to
stderr); on failure that object has an ``"error"`` key and the exit code is 1.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
VENV = HERE / ".peer-venv"
REQS = HERE / "peer-requirements.txt"
VENV_PY = VENV / "bin" / "python"
INNER_FLAG = "GG_PEER_INNER"
TAG_VAR = "GG_PEER_BENCH_TAG"  # put in the env of everything we start, for cleanup

POOL = "gg-bench"
FLOW_FILE = "ggbench_flow.py"
FLOW_SRC = '''\
import os
import time

from prefect import flow


@flow(name="ggbench-job", persist_result=False, log_prints=False)
def ggbench_job(out: str) -> None:
    t = time.time()  # first thing the job does: "the worker started it"
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        f.write(repr(t))
    os.replace(tmp, out)
'''


def say(msg: str) -> None:
    print(f"[peer] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# outer half: venv bootstrap (runs under any Python >= 3.10)
# --------------------------------------------------------------------------


def _reqs_stamp() -> Path:
    digest = hashlib.sha256(REQS.read_bytes()).hexdigest()[:16]
    return VENV / f".installed-{digest}"


def ensure_venv() -> None:
    if VENV_PY.exists() and _reqs_stamp().exists():
        return
    say(
        f"Installing the pinned Prefect peer into {VENV} (one-time, about a minute; "
        "it is kept apart from gg's own dependencies)."
    )
    if sys.version_info < (3, 10):
        raise SystemExit("peer.py: Prefect 3 needs Python >= 3.10 to build bench/.peer-venv")
    if not VENV_PY.exists():
        r = subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)])
        if r.returncode != 0 and shutil.which("apt-get") and os.geteuid() == 0:
            say("python -m venv failed; installing Debian's python3-venv and retrying.")
            shutil.rmtree(VENV, ignore_errors=True)
            subprocess.run(["apt-get", "update", "-q"], check=False)
            subprocess.run(
                ["apt-get", "install", "-y", "-q", "python3-venv"], check=False
            )
            r = subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)])
        if r.returncode != 0:
            raise SystemExit("peer.py: could not create the virtualenv " + str(VENV))
    subprocess.run(
        [str(VENV_PY), "-m", "pip", "install", "-q", "-r", str(REQS)], check=True
    )
    for old in VENV.glob(".installed-*"):
        old.unlink()
    _reqs_stamp().touch()


def bootstrap() -> None:
    """Re-exec under the peer venv unless we already run there."""
    if os.environ.get(INNER_FLAG) == "1" and Path(sys.prefix).resolve() == VENV.resolve():
        return
    ensure_venv()
    env = dict(os.environ, **{INNER_FLAG: "1"})
    os.execve(str(VENV_PY), [str(VENV_PY), str(Path(__file__).resolve()), *sys.argv[1:]], env)


# --------------------------------------------------------------------------
# process bookkeeping
# --------------------------------------------------------------------------


class Procs:
    """Everything we start, so that it can all be stopped at the end."""

    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.procs: list[subprocess.Popen] = []

    def start(self, argv: list[str], env: dict, log: Path) -> subprocess.Popen:
        fh = open(log, "ab")
        p = subprocess.Popen(
            argv,
            env=dict(env, **{TAG_VAR: self.tag}),
            stdin=subprocess.DEVNULL,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # our Ctrl-C does not hit it; we stop it ourselves
            preexec_fn=_die_with_parent,
        )
        fh.close()
        self.procs.append(p)
        return p

    def stop(self, p: subprocess.Popen, grace: float = 8.0) -> None:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.wait(5)
        if p in self.procs:
            self.procs.remove(p)

    def stop_all(self) -> None:
        for p in reversed(list(self.procs)):
            self.stop(p)
        # flow-run processes get their own process group: find them by our tag
        for _ in range(3):
            left = self._tagged_pids()
            if not left:
                return
            for pid in left:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.3)

    def _tagged_pids(self, cmd_contains: bytes | None = None) -> list[int]:
        needle = f"{TAG_VAR}={self.tag}".encode()
        me = os.getpid()
        found = []
        for d in Path("/proc").iterdir():
            if not d.name.isdigit() or int(d.name) == me:
                continue
            try:
                if needle not in (d / "environ").read_bytes().split(b"\0"):
                    continue
                if cmd_contains and cmd_contains not in (d / "cmdline").read_bytes():
                    continue
                found.append(int(d.name))
            except OSError:
                pass
        return found

    def flow_run_pids(self) -> list[int]:
        """Live flow-run processes (`python -m prefect.engine`) started by our worker."""
        return self._tagged_pids(b"prefect.engine")


def _die_with_parent() -> None:
    """Child-side: get SIGTERM if the benchmark driver dies (Linux only)."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Deadline:
    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def left(self, cap: float) -> float:
        return max(0.0, min(cap, self.end - time.monotonic()))


def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(-(-q * len(s) // 100)) - 1))
    return s[k]


def summary(values: list[float]) -> dict:
    return {
        "p50": round(statistics.median(values), 1),
        "p99": round(pct(values, 99), 1),
        "min": round(min(values), 1),
        "max": round(max(values), 1),
        "n": len(values),
    }


# --------------------------------------------------------------------------
# inner half: runs inside the peer venv
# --------------------------------------------------------------------------


def prefect_env(home: Path, port: int, poll: float) -> dict:
    env = dict(os.environ)
    env.pop(INNER_FLAG, None)
    for k in list(env):  # nothing from an outer Prefect profile leaks in
        if k.startswith("PREFECT_"):
            del env[k]
    env.update(
        PREFECT_HOME=str(home),
        PREFECT_PROFILES_PATH=str(home / "profiles.toml"),
        PREFECT_API_URL=f"http://127.0.0.1:{port}/api",
        PREFECT_SERVER_API_HOST="127.0.0.1",
        PREFECT_SERVER_API_PORT=str(port),
        PREFECT_SERVER_DATABASE_CONNECTION_URL=f"sqlite+aiosqlite:///{home / 'prefect.db'}",
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        PREFECT_SERVER_UI_ENABLED="false",
        DO_NOT_TRACK="1",
        PREFECT_WORKER_QUERY_SECONDS=repr(poll),
        PREFECT_CLI_COLORS="false",
        PYTHONUNBUFFERED="1",
    )
    return env


async def wait_http_ok(url: str, deadline: Deadline, timeout: float, proc) -> None:
    import httpx

    end = time.monotonic() + deadline.left(timeout)
    async with httpx.AsyncClient(timeout=2.0) as c:
        while time.monotonic() < end:
            if proc.poll() is not None:
                raise RuntimeError(f"prefect server exited early (code {proc.returncode})")
            with contextlib.suppress(httpx.HTTPError):
                if (await c.get(url)).status_code == 200:
                    return
            await _sleep(0.25)
    raise TimeoutError(f"prefect server did not answer {url} in time")


async def _sleep(s: float) -> None:
    import asyncio

    await asyncio.sleep(s)


async def wait_file(path: Path, deadline: Deadline, timeout: float) -> float:
    end = time.monotonic() + deadline.left(timeout)
    while time.monotonic() < end:
        with contextlib.suppress(FileNotFoundError, ValueError):
            return float(path.read_text())
        await _sleep(0.005)
    raise TimeoutError(f"job did not start in time ({path.name})")


async def wait_final(
    client, ids: list, deadline: Deadline, timeout: float, every: float, partial_ok=False
):
    """Wait until every run is in a final state; returns the runs. With partial_ok,
    a timeout returns what has finished so far instead of raising."""
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    end = time.monotonic() + deadline.left(timeout)
    while True:
        runs = await client.read_flow_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=list(ids))),
            limit=len(ids),
        )
        done = [r for r in runs if r.state and r.state.is_final()]
        if len(done) == len(ids):
            return runs
        if time.monotonic() >= end:
            if partial_ok and done:
                return done
            raise TimeoutError(f"only {len(done)}/{len(ids)} flow runs finished in time")
        await _sleep(every)


async def first_state_ts(client, run_id, type_name: str) -> float | None:
    states = await client.read_flow_run_states(run_id)
    ts = [s.timestamp.timestamp() for s in states if s.type.value == type_name]
    return min(ts) if ts else None


SUBMIT_ATTEMPTS = 4
submit_retries = 0  # 503s retried by create_run (the Prefect client already retried them)


async def create_run(client, dep_id, out: str):
    """create_flow_run_from_deployment, retrying a bounded number of times on 503:
    a starved SQLite-backed Prefect server answers 503 when a statement times out."""
    global submit_retries
    from prefect.exceptions import PrefectHTTPStatusError

    for attempt in range(SUBMIT_ATTEMPTS):
        try:
            return await client.create_flow_run_from_deployment(dep_id, parameters={"out": out})
        except PrefectHTTPStatusError as e:
            if e.response.status_code != 503 or attempt + 1 == SUBMIT_ATTEMPTS:
                raise
            submit_retries += 1
            say("  server answered 503 to create_flow_run; retrying")
            await _sleep(1.0)


async def wait_worker_idle(procs: Procs, poll: float, deadline: Deadline) -> None:
    """Idle = no flow-run process left (the worker frees its slot when it exits),
    then a couple of poll periods so the worker is back in its wait/poll loop."""
    end = time.monotonic() + deadline.left(60)
    while procs.flow_run_pids() and time.monotonic() < end:
        await _sleep(0.05)
    await _sleep(max(0.3, 2 * poll))


async def start_worker(procs, client, env, tmp, limit, deadline, dep_id):
    name = f"gg-bench-limit{limit}-{uuid.uuid4().hex[:6]}"
    argv = [
        str(VENV / "bin" / "prefect"), "worker", "start",
        "--pool", POOL, "--type", "process", "--limit", str(limit), "--name", name,
    ]
    proc = procs.start(argv, env, tmp / f"worker-{limit}.log")
    # warm-up run: proves the worker polls, and leaves it idle and waiting
    out = tmp / f"warmup-{limit}"
    fr = await create_run(client, dep_id, str(out))
    try:
        await wait_file(out, deadline, 120)
    except TimeoutError as e:
        if proc.poll() is not None:
            msg = f"prefect worker exited (code {proc.returncode}); see its log"
            raise RuntimeError(msg) from e
        raise
    await wait_final(client, [fr.id], deadline, 60, 0.1)
    await wait_worker_idle(procs, env_poll(env), deadline)
    return proc


def env_poll(env: dict) -> float:
    return float(env["PREFECT_WORKER_QUERY_SECONDS"])


async def measure(args, tmp: Path, procs: Procs) -> dict:
    import asyncio

    deadline = Deadline(args.max_seconds)
    load_before = os.getloadavg()[0]
    port = free_port()
    home = tmp / "home"
    home.mkdir()
    env = prefect_env(home, port, args.poll)
    os.environ.clear()
    os.environ.update(env)  # the driver's own Prefect client uses the same settings

    say(f"Starting a local Prefect server on 127.0.0.1:{port} (SQLite in {home}).")
    t0 = time.monotonic()
    server = procs.start(
        [str(VENV / "bin" / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env,
        tmp / "server.log",
    )
    await wait_http_ok(f"http://127.0.0.1:{port}/api/health", deadline, 120, server)
    server_start_s = time.monotonic() - t0

    import prefect
    from prefect import flow
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.workers.process import ProcessWorker

    src = tmp / "flowsrc"
    src.mkdir()
    (src / FLOW_FILE).write_text(FLOW_SRC)

    result: dict = {
        "peer": f"prefect {prefect.__version__}",
        "setup": {
            "worker": "prefect process worker (one subprocess per flow run)",
            "poll_seconds": args.poll,
            "server": "prefect server on 127.0.0.1, SQLite, services on, UI/analytics off",
            "server_start_s": round(server_start_s, 1),
        },
    }

    partial: list[str] = []  # phases cut short by the time budget
    async with get_client() as client:
        await client.create_work_pool(
            WorkPoolCreate(
                name=POOL,
                type="process",
                base_job_template=ProcessWorker.get_default_base_job_template(),
            ),
            overwrite=True,
        )
        dep = await flow.from_source(source=str(src), entrypoint=f"{FLOW_FILE}:ggbench_job")
        with contextlib.redirect_stdout(io.StringIO()):  # deploy() prints a banner
            dep_id = await dep.deploy(
                name="ggbench", work_pool_name=POOL, print_next_steps=False,
                ignore_warnings=True,
            )

        # ---- dispatch latency (worker --limit 1, idle, one job at a time) ----
        say(f"Starting a process worker (poll {args.poll}s, limit 1) and a warm-up run.")
        worker = await start_worker(procs, client, env, tmp, 1, deadline, dep_id)

        say(f"Dispatch: {args.repeats} sequential runs on the idle worker.")
        dispatch, claim, submit_rpc, start_to_done = [], [], [], []
        # dispatch gets at most ~40% of --max-seconds (after 3 samples), throughput the rest
        dispatch_end = time.monotonic() + 0.4 * args.max_seconds
        for i in range(args.repeats):
            if i >= 3 and time.monotonic() > dispatch_end:
                partial.append(f"dispatch: {i}/{args.repeats} samples")
                break
            out = tmp / f"d{i}"
            t_sub = time.time()
            fr = await create_run(client, dep_id, str(out))
            t_acc = time.time()
            t_job = await wait_file(out, deadline, 120)
            runs = await wait_final(client, [fr.id], deadline, 60, 0.1)
            t_pend = await first_state_ts(client, fr.id, "PENDING")
            dispatch.append((t_job - t_acc) * 1000)
            submit_rpc.append((t_acc - t_sub) * 1000)
            if t_pend is not None:
                claim.append((t_pend - t_acc) * 1000)
            st = runs[0].state
            if st.type.value == "COMPLETED":
                start_to_done.append((st.timestamp.timestamp() - t_job) * 1000)
            if i == 0 or (i + 1) % 5 == 0 or i + 1 == args.repeats:
                say(f"  {i + 1}/{args.repeats}: dispatch {dispatch[-1]:.0f} ms")
            await wait_worker_idle(procs, args.poll, deadline)

        result["dispatch_ms"] = summary(dispatch)
        result["claim_ms"] = summary(claim) if claim else None
        result["submit_rpc_ms"] = summary(submit_rpc)
        result["job_start_to_completed_ms"] = summary(start_to_done) if start_to_done else None

        # ---- throughput: N at once, limit 1 then limit 4 ----
        throughput: dict = {}
        failed_total = 0
        worker_limit = 1
        for phase, limit in enumerate(args.concurrency):
            if worker is not None and worker_limit != limit:
                procs.stop(worker)
                worker = None
            if worker is None:
                say(f"Starting a process worker (poll {args.poll}s, limit {limit}) and a warm-up run.")
                worker = await start_worker(procs, client, env, tmp, limit, deadline, dep_id)
                worker_limit = limit
            await wait_worker_idle(procs, args.poll, deadline)
            say(f"Throughput: {args.jobs} runs submitted at once, worker limit {limit}.")
            outs = [str(tmp / f"t{limit}-{i}") for i in range(args.jobs)]
            t_first = time.time()
            if args.submit == "gather":
                frs = await asyncio.gather(*(create_run(client, dep_id, o) for o in outs))
            else:  # back-to-back: faster on Prefect's SQLite server than concurrent creates
                frs = [await create_run(client, dep_id, o) for o in outs]
            t_submitted = time.time()
            # leave time for the phases still to come (each needs a worker start too)
            phases_left = len(args.concurrency) - phase
            share = deadline.left(1e9) / phases_left - (20 if phases_left > 1 else 5)
            runs = await wait_final(
                client, [f.id for f in frs], deadline,
                max(10.0, min(60 + 30 * args.jobs, share)), 0.25, partial_ok=True,
            )
            t_last = max(r.state.timestamp.timestamp() for r in runs)
            failed = sum(1 for r in runs if r.state.type.value != "COMPLETED")
            failed_total += failed
            jps = len(runs) / (t_last - t_first)
            throughput[str(limit)] = round(jps, 3)
            result.setdefault("throughput_detail", {})[str(limit)] = {
                "jobs": args.jobs,
                "finished": len(runs),
                "wall_s": round(t_last - t_first, 2),
                "submit_all_s": round(t_submitted - t_first, 3),
                "failed": failed,
            }
            if len(runs) < args.jobs:
                partial.append(f"limit {limit}: {len(runs)}/{args.jobs}")
            say(
                f"  limit {limit}: {len(runs)} runs finished in {t_last - t_first:.1f} s"
                f" = {jps:.2f} jobs/s"
            )

        if worker is not None:
            procs.stop(worker)
        result["throughput"] = throughput
    result["setup"]["loadavg_1m"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]

    notes = [
        f"Prefect {prefect.__version__} process worker, PREFECT_WORKER_QUERY_SECONDS={args.poll}"
        " (no lower bound is enforced; the poll loop adds +-30% jitter).",
        "dispatch = driver time.time() right after create_flow_run_from_deployment returned"
        " -> time.time() on the first line of the flow body; claim = same start -> server"
        " timestamp of the run's first Pending state (worker took it).",
        "Every flow run is a fresh `python -m prefect.engine` process that imports Prefect and"
        " loads the flow, so most of dispatch is process start, not polling.",
        f"throughput = first of N runs submitted at once ({args.submit}) -> last Completed"
        " state;"
        f" key = worker --limit (concurrent flow-run processes); {os.cpu_count()} CPUs.",
    ]
    if failed_total:
        notes.append(f"{failed_total} throughput runs did not end Completed.")
    result["partial"] = bool(partial)
    if partial:
        notes.append(
            "Time budget (--max-seconds) cut phases short: " + ", ".join(partial) + "."
            " A cut throughput rate is finished runs / time to the last of them."
        )
    result["setup"]["submit_503_retries"] = submit_retries
    if submit_retries:
        notes.append(
            f"create_flow_run answered 503 {submit_retries} times and was retried"
            " (server starved; the dispatch clock starts after the successful call)."
        )
    with contextlib.suppress(OSError):
        locked = (tmp / "server.log").read_text(errors="replace").count("database is locked")
        result["setup"]["server_sqlite_locked_errors"] = locked
        if locked:
            notes.append(f"The server logged 'database is locked' {locked} times (SQLite write contention).")
    result["notes"] = " ".join(notes)
    return result


def table(r: dict) -> str:
    lines = [f"peer: {r['peer']}  ({r['setup']['worker']}, poll {r['setup']['poll_seconds']}s)"]
    row = "  {:<34} {:>9} {:>9} {:>9} {:>9} {:>4}"
    lines.append(row.format("latency (ms)", "p50", "p99", "min", "max", "n"))
    for key, label in (
        ("dispatch_ms", "dispatch: accepted -> job start"),
        ("claim_ms", "claim: accepted -> Pending"),
        ("submit_rpc_ms", "submit RPC (create_flow_run)"),
        ("job_start_to_completed_ms", "job start -> Completed state"),
    ):
        s = r.get(key)
        if s:
            lines.append(row.format(label, s["p50"], s["p99"], s["min"], s["max"], s["n"]))
    for k, v in r.get("throughput", {}).items():
        d = r["throughput_detail"][k]
        lines.append(
            f"  throughput, worker limit {k}: {v:.2f} jobs/s"
            f"  ({d['finished']}/{d['jobs']} jobs finished in {d['wall_s']} s,"
            f" {d['failed']} failed)"
        )
    return "\n".join(lines)


def inner(args) -> int:
    import asyncio

    json_out = None
    if args.json:
        # Prefect prints to stdout (e.g. deploy()); keep stdout for our one JSON object.
        json_out = os.fdopen(os.dup(1), "w")
        os.dup2(2, 1)
    tag = uuid.uuid4().hex
    procs = Procs(tag)
    tmp = Path(tempfile.mkdtemp(prefix="gg-peer-prefect-"))

    def on_signal(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGINT, on_signal)  # even if our parent ignored SIGINT
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)

    result: dict | None = None
    error = None
    try:
        result = asyncio.run(measure(args, tmp, procs))
    except KeyboardInterrupt as e:
        error = f"interrupted ({e or 'Ctrl-C'})"
    except Exception as e:  # noqa: BLE001 - reported, then exit code 1
        error = f"{type(e).__name__}: {e}"
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)  # finish cleaning up first
        say("Stopping the worker(s) and the Prefect server.")
        procs.stop_all()
        if args.keep_tmp or error:
            say(f"logs kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    if error:
        say(f"FAILED: {error}")
        if json_out:
            err = {"peer": "prefect", "error": error, "logs": str(tmp)}
            print(json.dumps(err), file=json_out, flush=True)
        return 1
    assert result is not None
    print(table(result), file=sys.stderr if args.json else sys.stdout, flush=True)
    if json_out:
        print(json.dumps(result), file=json_out, flush=True)
    return 0


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--jobs", "-n", type=int, default=8, help="throughput jobs per worker setting (default 8)"
    )
    ap.add_argument(
        "--repeats", "-r", type=int, default=8, help="sequential dispatch samples (default 8)"
    )
    ap.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    ap.add_argument(
        "--poll", type=float, default=0.1,
        help="PREFECT_WORKER_QUERY_SECONDS for the worker (default 0.1)",
    )
    ap.add_argument(
        "--concurrency", default="1,4",
        help="comma list of worker --limit values for throughput (default 1,4)",
    )
    ap.add_argument(
        "--submit", choices=("loop", "gather"), default="loop",
        help="throughput submission: back-to-back create calls (loop, default) or all"
        " concurrently (gather; slower on Prefect's SQLite server)",
    )
    ap.add_argument(
        "--max-seconds", type=float, default=600,
        help="hard cap on the whole run, seconds (default 600)",
    )
    ap.add_argument("--keep-tmp", action="store_true", help="keep the temp dir with server/worker logs")
    a = ap.parse_args(argv)
    if not (1 <= a.jobs <= 500 and 1 <= a.repeats <= 500):
        ap.error("--jobs and --repeats must be within 1..500")
    if not (0 <= a.poll <= 60):
        ap.error("--poll must be within [0, 60]")
    if a.concurrency.strip().lower() in ("", "none", "0"):
        a.concurrency = []  # dispatch only
    else:
        a.concurrency = [int(x) for x in a.concurrency.split(",") if x.strip()]
    if any(not 1 <= c <= 32 for c in a.concurrency):
        ap.error("--concurrency values must be within 1..32")
    return a


def main() -> int:
    args = parse_args()  # validate before any install work
    bootstrap()
    return inner(args)


if __name__ == "__main__":
    sys.exit(main())
