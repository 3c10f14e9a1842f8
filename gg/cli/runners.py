"""``gg runner up``, ``gg runners``, ``gg runner show``."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Optional

import typer

from gg import config
from gg.cli.context import (
    CliError,
    ago,
    client,
    console,
    emit_json,
    parse_labels,
    run_until_signalled,
    say,
    server_url,
    settings,
    state,
    table,
)
from gg.cli.exits import Exit
from gg.domain.runners import Liveness

runner_app = typer.Typer(help="Run this machine as a runner, and look at runners.",
                         no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(runner_app, name="runner")
    app.command("runners")(list_runners)


@runner_app.command("up")
def up(
    name: Optional[str] = typer.Option(None, "--name", help="Runner name (default: host name)."),
    labels: Optional[str] = typer.Option(None, "--labels", metavar="k=v,...",
                                         help="Labels this runner advertises."),
    workers: Optional[int] = typer.Option(
        None, "--workers", min=1, max=256,
        help="Concurrent flights at most (default: what the runner's policy last said, "
             "else 1)."),
    once: bool = typer.Option(False, "--once", help="Take one flight, then exit."),
    grace: float = typer.Option(30.0, "--grace", min=0, help="Seconds running flights get to finish on stop."),
    enrol: Optional[str] = typer.Option(None, "--enrol", metavar="TOKEN",
                                        help="Enrol with a gge_ token on first start "
                                             "(env GG_ENROL_TOKEN)."),
    enrol_file: Optional[Path] = typer.Option(None, "--enrol-file", metavar="FILE",
                                              help="Read the enrolment token from FILE."),
    flight_uids: Optional[str] = typer.Option(
        None, "--flight-uids", metavar="BASE[:COUNT]",
        help="A root runner's flights run as uid BASE+slot, never root (env GG_FLIGHT_UIDS; "
             "default: the runner user's /etc/subuid range, else 2000000000:65536)."),
    listen: Optional[str] = typer.Option(None, "--listen", metavar="HOST:PORT",
                                         help="Pull mode: serve on HOST:PORT and never dial "
                                              "out; an admin attaches it with gg runner "
                                              "attach (docs/runner-modes.md)."),
    cpus: Optional[str] = typer.Option(
        None, "--cpus", metavar="N",
        help="Cores this runner offers its flights (env GG_RUNNER_CPUS; default: the "
             "host's). Placement by size: docs/isolation.md."),
    memory: Optional[str] = typer.Option(
        None, "--memory", metavar="SIZE",
        help="Memory this runner offers its flights, like 8G (env GG_RUNNER_MEMORY; "
             "default: the host's)."),
) -> None:
    """Run this machine as a runner until stopped (SIGTERM or Ctrl-C)."""
    from gg.cli.fleet import enrol_token
    from gg.domain.services import ENV_SERVICE_PORTS, port_range

    try:  # each service generation's $PORT is drawn from it: refused now, not at a service
        port_range(os.environ.get(ENV_SERVICE_PORTS))
    except ValueError as exc:
        raise CliError(str(exc), Exit.USAGE) from None
    size = runner_size(cpus, memory)
    if listen is not None:
        if enrol or enrol_file or once:
            raise CliError("--listen runs a pull-mode runner: it is attached by an admin, "
                           "never enrolled, and has no --once", Exit.USAGE)
        raise typer.Exit(listen_up(listen, name=name, labels=labels, workers=workers or 1,
                                   grace=grace, size=size))
    from gg.runner.flight_identity import IdentityRangeError
    from gg.runner.loop import Runner, RunnerExit, RunnerOptions

    cfg = settings()
    runner_name = name or socket.gethostname().split(".")[0]
    token = enrol_token(enrol, enrol_file)  # enrolment: nobody signs in on this machine
    if token and labels:
        raise CliError("an enrolled runner's labels come from its fleet profile; drop --labels",
                       Exit.USAGE)
    label_map = {} if token else parse_labels(labels or os.environ.get("GG_RUNNER_LABELS"))
    options = RunnerOptions(server=server_url(), state_dir=config.state_dir(), name=runner_name,
                            labels=label_map, workers=workers, once=once, grace=grace,
                            person_token=None if token else config.resolve_token(cfg),
                            enrol_token=token, hidden=[config.config_dir()],
                            member_code=os.environ.pop(config.ENV_MEMBER_CODE, None),
                            flight_uids=flight_uids, size=size)

    try:
        runner = Runner(options, say=say)
    except IdentityRangeError as exc:
        raise CliError(str(exc), Exit.USAGE) from None
    try:
        code = run_until_signalled(runner)
    except RunnerExit as exc:
        raise CliError(str(exc), Exit.FAILURE) from None
    raise typer.Exit(code)


ENV_CPUS = "GG_RUNNER_CPUS"
ENV_MEMORY = "GG_RUNNER_MEMORY"


def runner_size(cpus: str | None, memory: str | None) -> dict | None:
    """The size a runner offers its flights (``--cpus``/``--memory``, else its environment),
    as its inventory reports it; None: the host's. A bad one is a usage error."""
    from gg.cli.limits import parse_limits

    size = parse_limits(cpus=cpus or os.environ.get(ENV_CPUS) or None,
                        memory=memory or os.environ.get(ENV_MEMORY) or None, pids=None)
    return size or None


RUNNERS_SHOWN = 500  # `gg runners` without --limit or --all: the oldest this many


def list_runners(json_: bool = typer.Option(False, "--json",
                                            help="Every runner's fields (every runner unless "
                                                 "--limit)."),
                 limit: Optional[int] = typer.Option(
                     None, "--limit", min=1, max=1000000,
                     help=f"Show the oldest N (the table's default: {RUNNERS_SHOWN})."),
                 all_: bool = typer.Option(False, "--all",
                                           help="Every runner (follows the listing's pages)."),
                 watch_: bool = typer.Option(False, "--watch", "-w",
                                             help="Draw it again as it changes (q or Ctrl-C "
                                                  "quits).")) -> None:
    """Runners, oldest first: admin state, liveness and health side by side."""
    api = client()
    if json_:  # a script's look-up: the whole fleet unless it asks for a page
        emit_json(api.runners(None if all_ else limit))
        return
    shown = None if all_ else (limit or RUNNERS_SHOWN)
    if watch_:
        from gg.cli.watch import watch

        watch(lambda: _runners_shown(api, shown), "runners")
        return
    console().print(_runners_shown(api, shown))


def _runners_shown(api, limit: int | None):
    """The table of the oldest ``limit`` runners (every one when None), saying so when there
    are more."""
    rows = api.runners(None if limit is None else limit + 1)
    if limit is None or len(rows) <= limit:
        return _runners_table(rows)
    from rich.console import Group
    from rich.text import Text

    return Group(_runners_table(rows[:limit]),
                 Text(f"the oldest {limit} runners shown; more: gg runners --all"))


def _runners_table(rows):
    if not rows:
        from rich.text import Text

        return Text("no runners yet: start one with gg runner up")
    t = table("NAME", "ID", "MODE", "STATE", "ONLINE", "HEALTH", "CHECKS", "LABELS", "FLIGHTS",
              "CPU", "MEM", "SEEN", "SKEW")
    now = time.time()
    for r in rows:
        readings = r.readings
        t.add_row(r.name, r.id, r.mode, state(r.state), state(Liveness.of(r.online).value),
                  state(r.health), state(r.checks_verdict or "-"),
                  ",".join(f"{k}={v}" for k, v in sorted(r.labels.items())) or "-",
                  " ".join(f.id for f in r.current_flights) or "-",
                  _pct(readings.get("cpu_percent")), _pct(readings.get("memory_percent")),
                  ago(r.last_seen_at, now), r.version_skew)
    return t


@runner_app.command("show")
def show(ref: Optional[str] = typer.Argument(None, metavar="[RUNNER]", help="Runner id or name."),
         fingerprint: Optional[str] = typer.Option(
             None, "--fingerprint", metavar="SHA256:...",
             help="Find the runner by its key fingerprint (as ssh-keygen -l prints it)."),
         json_: bool = typer.Option(False, "--json")) -> None:
    """One runner in detail: identity, state, liveness, health, inventory."""
    if (ref is None) == (fingerprint is None):
        raise CliError("name one runner: RUNNER, or --fingerprint SHA256:...", Exit.USAGE)
    r = client().runner(ref) if ref is not None else client().runner_by_fingerprint(fingerprint)
    if json_:
        emit_json(r)
        return
    inv = r.inventory
    commit = inv.get("gg_commit") or "unknown"
    lines = [
        f"runner {r.name} ({r.id})" + (", ephemeral: one flight, then retired"
                                        if r.ephemeral else ""),
        f"  key        {r.public_key_fingerprint or '?'}",
        f"  mode       {r.mode}" + (f", polled at {r.url}" if r.url else " (dials out)"),
        f"  state      {r.state}",
        f"  liveness   {Liveness.of(r.online).value} (last seen {ago(r.last_seen_at)})",
        f"  health     {r.health}" + "".join(f" ({note})" for note in r.health_notes),
        f"  labels     {','.join(f'{k}={v}' for k, v in sorted(r.labels.items())) or '-'}",
        f"  workers    {r.workers} (started with {r.started_workers})",
        f"  flights    {len(r.current_flights) or '-'}",
        *[f"    {f.id} attempt {f.attempt}, epoch {f.epoch}, taken {ago(f.started_at)}"
          + (f": {f.title}" if f.title else "") for f in r.current_flights],
        f"  ownership  {r.ownership}" + (f" (owner {r.owner_name}"
                                         f"{', reserved' if r.reserved else ''})"
                                         if r.owner_name else ""),
        f"  policy     {', '.join(_policy_item(k, v) for k, v in sorted(r.policy.items()))}",
        f"  version    {r.version or '?'} commit {commit} (skew {r.version_skew})",
        f"  host       {inv.get('hostname', '?')} {r.os or ''}/{r.arch or ''}, "
        f"{inv.get('cpu_count', '?')} CPUs, peer {r.peer_address or '?'}",
        f"  size       {_size_line(inv)}",
    ]
    lines.append(f"  checks     {r.checks_verdict or '-'}"
                 + (f" (last judged {ago(r.checks_at)})" if r.checks_at else ""))
    for check in r.checks:
        mark = "✓" if check["passed"] else "✗"
        lines.append(f"    {mark} {check['name']:<22} {check['detail']}")
    typer.echo("\n".join(lines))


def _size_line(inv: dict) -> str:
    """What it offers its flights (placement by size), and whether its operator set it."""
    from gg.domain.sizes import runner_size, size_text

    size = runner_size(inv)
    if size is None:
        return "- (it reports none: never held back by size)"
    return size_text(size) + (" (set with --cpus/--memory)" if inv.get("size") else "")


def _pct(value) -> str:
    return "-" if value is None else f"{value:.0f}%"


def _policy_item(key: str, value: object) -> str:
    """One policy key as words: the egress allowlist as its entries, space-separated."""
    if isinstance(value, list):
        return f"{key} {' '.join(str(v) for v in value)}"
    return f"{key} {value}"


def listen_up(listen: str, *, name: str | None, labels: str | None, workers: int,
              grace: float, size: dict | None = None) -> int:
    """Serve a pull-mode runner on ``listen`` (HOST:PORT) until stopped."""
    from gg.runner.listen import ListeningRunner
    from gg.runner.pull import PullOptions, PullRunner
    from gg.settings import Settings

    host, sep, port = listen.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise CliError(f"--listen takes HOST:PORT, like 0.0.0.0:7400 (got {listen!r})",
                       Exit.USAGE)
    try:  # a bad GG_* setting is the operator's to mend: one sentence, as for gg server
        settings = Settings.from_env()
    except ValueError as exc:
        raise CliError(str(exc), Exit.USAGE) from None
    options = PullOptions(host=host.strip("[]"), port=int(port), state_dir=config.state_dir(),
                          name=name or socket.gethostname().split(".")[0],
                          labels=parse_labels(labels or os.environ.get("GG_RUNNER_LABELS")),
                          workers=workers, grace=grace, hidden=[config.config_dir()],
                          size=size)
    try:
        return run_until_signalled(ListeningRunner(PullRunner(options, say=say, settings=settings)))
    except OSError as exc:
        raise CliError(f"cannot listen on {listen}: {exc.strerror or exc}", Exit.FAILURE) \
            from None
