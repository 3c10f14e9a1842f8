#!/usr/bin/env python3
"""Slurm side of gg's side-by-side benchmark: one controller and one node daemon on loopback.

    python bench/slurm.py [--config default|high-throughput|both] [--repeats R] [--jobs N]
                          [--cpus 1,4] [--json]

What it does, in order:

1. Installs Debian's ``slurm-wlm`` and ``munge`` with apt-get when ``slurmctld`` is absent
   (root only; nothing else needs them, CI never runs this).
2. For each configuration and each node size: makes a temporary folder with its own munge
   key, starts ``munged`` on a socket in that folder, writes a ``slurm.conf`` for one node
   on 127.0.0.1 (free ports, state and spool in the folder, ``proctrack/linuxproc`` and
   ``task/none`` so that no cgroup is set up), starts ``slurmctld -D`` and ``slurmd -D`` as
   children of the benchmark and waits (bounded) until ``sinfo`` shows the node idle.
3. Measures, with the definitions of docs/peer-benchmark.md:

   * **dispatch**: ``sbatch --wrap 'date +%s.%N'`` returned → the instant the job's first
     instruction printed (read from the job's output file), one job at a time on an idle
     node (the queue empty before each);
   * **throughput**: N trivial jobs (the same one-instruction job), first submit → the last
     job's instruction, submitted two ways: a loop of N ``sbatch`` calls back to back, and
     one job array ``sbatch --array=1-N``. The time ``squeue`` first showed the queue empty
     is reported beside it (polled every 20 ms).

4. Stops slurmd, slurmctld and munged (SIGTERM, then SIGKILL) in a ``finally``, also on
   Ctrl-C and SIGTERM, and deletes the folder (kept on failure, for the logs).

Slots: the node is declared with ``CPUs=L`` (``SlurmdParameters=config_overrides`` lets it
declare more CPUs than the machine has, as gg's ``--workers 4`` runs four flights on two
cores) and every job asks for one CPU, so at most L jobs run at once: the equivalent of a gg
runner with ``--workers L``.

Configurations: ``default`` is Slurm's built-in defaults plus only what this host needs to run
it (paths, ports, the munge socket, no cgroups); ``high-throughput`` adds what SchedMD's High
Throughput Computing Administration Guide recommends that applies to one node (see
``HIGH_THROUGHPUT`` and docs/peer-benchmark.md).
"""

from __future__ import annotations

import argparse
import contextlib
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
from pathlib import Path

# What SchedMD's High Throughput Computing Administration Guide recommends, kept to what
# applies to a single node of a benchmark: accounting and job completion records off, the
# FIFO scheduler and priority, deferred scheduling, purging finished jobs after a few seconds,
# quiet daemons, several controller ports and a munged with ten threads. Two of the guide's
# example scheduler values are left out because on one node they only add waiting: its
# `batch_sched_delay=20` made every job wait ~20 s for its scheduling pass here (0.05 jobs/s;
# 0 lets the controller's once-a-second pass start it), and `sched_min_interval=2000000` would
# allow one start every two seconds where CPUs free one job at a time (the guide's clusters
# start hundreds of jobs in one pass). The backfill settings do not apply to sched/builtin.
HIGH_THROUGHPUT = {
    "AccountingStorageType": "accounting_storage/none",
    "JobAcctGatherType": "jobacct_gather/none",
    "JobCompType": "jobcomp/none",
    "SchedulerType": "sched/builtin",
    "PriorityType": "priority/basic",
    "SchedulerParameters": "defer,batch_sched_delay=0,sched_max_job_start=200,"
                           "partition_job_depth=500",
    "MinJobAge": "2",
    "SlurmctldDebug": "error",
    "SlurmdDebug": "error",
}
CONTROLLER_PORTS = {"default": 1, "high-throughput": 4}
MUNGE_THREADS = {"default": 2, "high-throughput": 10}
NODE = "ggnode"


def say(msg: str) -> None:
    print(f"[slurm] {msg}", file=sys.stderr, flush=True)


def ensure_installed() -> None:
    """Debian's slurm-wlm and munge, installed with apt-get when absent."""
    if all(shutil.which(b) for b in ("slurmctld", "slurmd", "sbatch", "munged")):
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise SystemExit("slurm.py: Slurm is not installed and apt-get cannot install it here "
                         "(needs root on Debian): apt-get install slurm-wlm munge")
    say("Installing Debian's slurm-wlm and munge (one-time, about a minute).")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update", "-q"], env=env, check=False,
                   stdout=subprocess.DEVNULL)
    subprocess.run(["apt-get", "install", "-y", "-q", "--no-install-recommends",
                    "slurm-wlm", "munge"], env=env, check=True, stdout=subprocess.DEVNULL)


def free_ports(count: int) -> int:
    """The first of ``count`` consecutive ports free on every address, below the ephemeral
    range (a port the kernel hands out for outgoing connections may be taken before the
    daemon binds it)."""
    import random

    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for _ in range(200):
        base = random.randrange(10000, max(10001, low - count))
        held = []
        try:
            for port in range(base, base + count):
                s = socket.socket()
                held.append(s)
                s.bind(("", port))
            return base
        except OSError:
            continue
        finally:
            for s in held:
                s.close()
    raise RuntimeError(f"no {count} consecutive free ports")


def slurm_conf(config: str, cpus: int, root: Path, controller_port: int, node_port: int,
               host: str) -> str:
    """The slurm.conf of one benchmark cluster (pure: the text only)."""
    ports = CONTROLLER_PORTS[config]
    lines = {
        "ClusterName": "ggbench",
        "SlurmctldHost": f"{host}(127.0.0.1)",
        "SlurmctldPort": str(controller_port) if ports == 1
        else f"{controller_port}-{controller_port + ports - 1}",
        "SlurmdPort": str(node_port),
        "SlurmUser": "root",
        "AuthType": "auth/munge",
        "CredType": "cred/munge",
        "AuthInfo": f"socket={root / 'munge.socket'}",
        "StateSaveLocation": str(root / "state"),
        "SlurmdSpoolDir": str(root / "spool"),
        "SlurmctldPidFile": str(root / "slurmctld.pid"),
        "SlurmdPidFile": str(root / "slurmd.pid"),
        "SlurmctldLogFile": str(root / "slurmctld.log"),
        "SlurmdLogFile": str(root / "slurmd.log"),
        # this host: no cgroup set-up (a hybrid cgroup v1/v2 tree), a node as large as asked
        "ProctrackType": "proctrack/linuxproc",
        "TaskPlugin": "task/none",
        "SlurmdParameters": "config_overrides",
        # one CPU a job: Slurm's built-in select/linear gives each job the whole node, which
        # would make a node of 4 CPUs run one job at a time
        "SelectType": "select/cons_tres",
        "SelectTypeParameters": "CR_CPU",
        "ReturnToService": "2",
    }
    if config == "high-throughput":
        lines.update(HIGH_THROUGHPUT)
    elif config != "default":
        raise ValueError(f"unknown configuration {config!r}")
    text = "".join(f"{k}={v}\n" for k, v in lines.items())
    return (text + f"NodeName={NODE} NodeHostname={host} NodeAddr=127.0.0.1 CPUs={cpus} "
            "State=UNKNOWN\nPartitionName=bench Nodes=" + NODE
            + " Default=YES MaxTime=INFINITE State=UP\n")


def _die_with_parent() -> None:
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class Cluster:
    """munged, slurmctld and slurmd of one configuration and node size, in ``root``."""

    def __init__(self, root: Path, config: str, cpus: int):
        self.root, self.config, self.cpus = root, config, cpus
        self.procs: list[subprocess.Popen] = []
        self.env = dict(os.environ, SLURM_CONF=str(root / "slurm.conf"))
        self.out = root / "out"
        self.count = 0

    # -- life cycle ----------------------------------------------------------------------

    def start(self, timeout: float = 120.0) -> "Cluster":
        for d in ("state", "spool", "out"):
            (self.root / d).mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o700)
        key = self.root / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        host = socket.gethostname().split(".")[0]
        (self.root / "slurm.conf").write_text(slurm_conf(
            self.config, self.cpus, self.root, free_ports(CONTROLLER_PORTS[self.config]),
            free_ports(1), host))
        self._spawn("munged", ["munged", "-F", "--force", f"--key-file={key}",
                               f"--socket={self.root / 'munge.socket'}",
                               f"--pid-file={self.root / 'munged.pid'}",
                               f"--log-file={self.root / 'munged.log'}",
                               f"--seed-file={self.root / 'munged.seed'}",
                               f"--num-threads={MUNGE_THREADS[self.config]}"])
        self._until(lambda: (self.root / "munge.socket").exists(), 20, "munged did not start")
        conf = str(self.root / "slurm.conf")
        self._spawn("slurmctld", ["slurmctld", "-D", "-c", "-f", conf])
        self._spawn("slurmd", ["slurmd", "-D", "-N", NODE, "-f", conf])
        self._until(self._node_idle, timeout, "the Slurm node did not become idle")
        return self

    def _spawn(self, name: str, argv: list[str]) -> None:
        with open(self.root / f"{name}.stderr", "ab") as log:
            self.procs.append(subprocess.Popen(
                argv, env=self.env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                start_new_session=True, preexec_fn=_die_with_parent))

    def _until(self, ready, timeout: float, failure: str) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            dead = [p.args[0] for p in self.procs if p.poll() is not None]
            if dead:
                raise RuntimeError(f"{failure}: {', '.join(dead)} exited (logs in {self.root})")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{failure} within {timeout:g} s (logs in {self.root})")
            time.sleep(0.2)

    def _node_idle(self) -> bool:
        done = subprocess.run(["sinfo", "-h", "-N", "-o", "%t"], env=self.env,
                              capture_output=True, text=True)
        return done.returncode == 0 and done.stdout.strip() == "idle"

    def stop(self) -> None:
        for p in reversed(self.procs):  # slurmd, slurmctld, then munged
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGTERM)
                try:
                    p.wait(15)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(p.pid, signal.SIGKILL)
                    p.wait(5)
        self.procs.clear()

    # -- jobs --------------------------------------------------------------------------

    def queue_empty(self) -> bool:
        done = subprocess.run(["squeue", "-h", "-o", "%i"], env=self.env, capture_output=True,
                              text=True)
        return done.returncode == 0 and not done.stdout.strip()

    def wait_idle(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.queue_empty():
            if time.monotonic() > deadline:
                raise RuntimeError("the Slurm queue did not empty")
            time.sleep(0.02)

    def sbatch(self, output: str, *extra: str) -> float:
        """Submit the one-instruction job; the driver's clock right after sbatch returned."""
        done = subprocess.run(["sbatch", "--parsable", "--quiet", "-n", "1", "-c", "1",
                               f"--chdir={self.root}", f"--output={output}", *extra,
                               "--wrap", "date +%s.%N"],
                              env=self.env, capture_output=True, text=True)
        accepted = time.time()
        if done.returncode != 0:
            raise RuntimeError(f"sbatch failed: {done.stderr.strip()}")
        return accepted

    @staticmethod
    def stamp(path: Path) -> float | None:
        with contextlib.suppress(OSError, ValueError):
            return float(path.read_text().strip())
        return None

    def wait_stamps(self, paths: list[Path], timeout: float) -> list[float]:
        deadline = time.monotonic() + timeout
        stamps: dict[Path, float] = {}
        while len(stamps) < len(paths):
            for p in paths:
                if p not in stamps and (t := self.stamp(p)) is not None:
                    stamps[p] = t
            if len(stamps) < len(paths):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{len(paths) - len(stamps)} Slurm jobs never ran")
                time.sleep(0.005)
        return [stamps[p] for p in paths]

    def dispatch_once(self) -> float:
        """ms from sbatch returned to the job's first instruction, on an idle node."""
        self.wait_idle()
        self.count += 1
        out = self.out / f"d{self.count}"
        accepted = self.sbatch(str(out))
        began = self.wait_stamps([out], 60)[0]
        return (began - accepted) * 1000

    def throughput(self, jobs: int, how: str) -> dict:
        """N jobs by a loop of sbatch calls (``loop``) or one job array (``array``)."""
        self.wait_idle()
        self.count += 1
        run = self.out / f"t{self.count}"
        run.mkdir()
        first = time.time()
        if how == "loop":
            for i in range(jobs):
                self.sbatch(str(run / str(i)))
            paths = [run / str(i) for i in range(jobs)]
        elif how == "array":
            self.sbatch(str(run / "%a"), f"--array=0-{jobs - 1}")
            paths = [run / str(i) for i in range(jobs)]
        else:
            raise ValueError(how)
        submitted = time.time()
        last = max(self.wait_stamps(paths, 60 + 5 * jobs))
        deadline = time.monotonic() + 60
        while not self.queue_empty():
            if time.monotonic() > deadline:
                raise RuntimeError("the Slurm queue did not empty after the run")
            time.sleep(0.02)
        emptied = time.time()
        return {"jobs_per_s": round(jobs / (last - first), 2),
                "to_queue_empty_jobs_per_s": round(jobs / (emptied - first), 2),
                "submit_all_s": round(submitted - first, 3)}


def summary(values: list[float]) -> dict:
    if not values:
        return {"p50": None, "p99": None, "min": None, "max": None, "n": 0}
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, -(-99 * len(ordered) // 100) - 1))
    return {"p50": round(statistics.median(values), 1), "p99": round(ordered[k], 1),
            "min": round(min(values), 1), "max": round(max(values), 1), "n": len(values)}


@contextlib.contextmanager
def cluster(config: str, cpus: int):
    """A started cluster, stopped and removed afterwards (its folder kept on failure)."""
    for attempt in range(3):  # a port taken between the probe and the bind: new ports
        root = Path(tempfile.mkdtemp(prefix=f"gg-bench-slurm-{config}-{cpus}-"))
        c = Cluster(root, config, cpus)
        try:
            c.start()
            break
        except RuntimeError:
            c.stop()
            if attempt == 2 or "Address already in use" not in _logs(root):
                say(f"logs kept in {root}")
                raise
            shutil.rmtree(root, ignore_errors=True)
    ok = False
    try:
        yield c
        ok = True
    finally:
        c.stop()
        if ok:
            shutil.rmtree(root, ignore_errors=True)
        else:
            say(f"logs kept in {root}")


def _logs(root: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in root.glob("*.stderr"))


def version() -> str:
    done = subprocess.run(["slurmd", "-V"], capture_output=True, text=True)
    return done.stdout.strip() or "slurm"


def measure(configs: list[str], repeats: int, jobs: int, slots: list[int]) -> dict:
    """The Slurm side alone (side_by_side.py interleaves the same calls with gg's)."""
    load = os.getloadavg()[0]
    result: dict = {"peer": version(), "configs": {}}
    for config in configs:
        entry: dict = {"throughput": {}}
        for cpus in slots:
            with cluster(config, cpus) as c:
                say(f"{config}, CPUs={cpus}: started")
                if cpus == slots[0]:
                    c.dispatch_once()  # warm-up
                    entry["dispatch_ms"] = summary([c.dispatch_once() for _ in range(repeats)])
                c.throughput(2, "loop")  # warm-up
                entry["throughput"][str(cpus)] = {how: c.throughput(jobs, how)
                                                  for how in ("loop", "array")}
        result["configs"][config] = entry
    result["loadavg_1m"] = [round(load, 2), round(os.getloadavg()[0], 2)]
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", choices=("default", "high-throughput", "both"), default="both")
    ap.add_argument("--repeats", type=int, default=8)
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--cpus", default="1,4", help="node sizes (concurrent slots), default 1,4")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if not (1 <= args.repeats <= 500 and 1 <= args.jobs <= 1000):
        ap.error("--repeats must be within 1..500 and --jobs within 1..1000")
    try:
        slots = [int(x) for x in args.cpus.split(",") if x.strip()]
    except ValueError:
        ap.error("--cpus takes a comma list of numbers, e.g. 1,4")
    if not slots or any(not 1 <= s <= 64 for s in slots):
        ap.error("--cpus values must be within 1..64")
    configs = ["default", "high-throughput"] if args.config == "both" else [args.config]
    ensure_installed()
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda s, _f: (_ for _ in ()).throw(KeyboardInterrupt(f"signal {s}")))
    try:
        result = measure(configs, args.repeats, args.jobs, slots)
    except (RuntimeError, KeyboardInterrupt) as e:
        say(f"FAILED: {e}")
        if args.json:
            print(json.dumps({"peer": "slurm", "error": str(e)}))
        return 1
    print(json.dumps(result, indent=None if args.json else 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
