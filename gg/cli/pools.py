"""``gg pools``, ``gg pool show|allow``, and ``gg runner maintain POOL``."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Optional

import typer

from gg import config
from gg.api.pools import Pool
from gg.cli.context import (
    CliError,
    ago,
    client,
    console,
    emit_json,
    run_until_signalled,
    say,
    server_url,
    settings,
    short,
    table,
)
from gg.cli.context import state as coloured
from gg.cli.exits import Exit
from gg.domain.runners import Liveness

pool_app = typer.Typer(help="Pools: managed sets of identical machines on one or more hosts.",
                       no_args_is_help=True)


def register(app: typer.Typer) -> None:
    from gg.cli.runners import runner_app

    app.command("pools")(list_pools)
    app.add_typer(pool_app, name="pool")
    runner_app.command("maintain")(maintain)


def list_pools(json_: bool = typer.Option(False, "--json"),
               watch_: bool = typer.Option(False, "--watch", "-w",
                                           help="Draw it again as it changes (q or Ctrl-C "
                                                "quits).")) -> None:
    """Every pool: its members, its last attestation, and the flights waiting on it."""
    api = client()
    if watch_:
        from gg.cli.watch import watch

        watch(lambda: _pools_view(api.pools()), "pools")
        return
    rows = api.pools()
    if json_:
        emit_json(rows)
        return
    console().print(_pools_view(rows))


def _pools_view(rows):
    from rich.console import Group
    from rich.text import Text

    if not rows:
        return Text("no pools: apply a strategy with gg strategy apply NAME FILE")
    now = time.time()
    parts = []
    for i, row in enumerate(rows):
        if i:
            parts.append(Text(""))
        parts.extend(_pool_parts(row, now))
    return Group(*parts)


@pool_app.command("show")
def show(pool: str = typer.Argument(..., metavar="POOL"),
         json_: bool = typer.Option(False, "--json")) -> None:
    """One pool, as gg pools shows it."""
    row = client().pool(pool)
    if json_:
        emit_json(row)
        return
    from rich.console import Group

    console().print(Group(*_pool_parts(row, time.time())))


@pool_app.command("allow")
def allow(pool: str = typer.Argument(..., metavar="POOL"),
          runner: str = typer.Argument(..., metavar="RUNNER", help="Runner id or name."),
          json_: bool = typer.Option(False, "--json")) -> None:
    """Let a registered (not enrolled) runner maintain POOL (admin)."""
    answer = client().allow_maintainer(pool, runner)
    if json_:
        emit_json(answer)
        return
    typer.echo(f"runner {answer.runner_name} ({answer.runner}) may maintain pool {pool}: "
               f"on that host, gg runner maintain {pool}")


def _pool_parts(row: Pool, now: float) -> list:
    """One pool as lines and a members table (Rich renderables, never markup)."""
    from rich.text import Text

    hours = f", active {row.active_hours}" if row.active_hours else ""
    digest = short(row.digest) if row.digest else "no image pinned"
    head = (f"pool {row.name}: environment {row.environment}, {row.driver} driver, "
            f"image {digest}, {len(row.members)} ")
    if row.scale:
        sc = row.scale
        step = f", step {sc['step']}" if sc.get("step") else ""
        cool = f", cool-down {sc['cool_down']:g}s" if sc.get("cool_down") else ""
        head += (f"member(s) (scale {sc['min']}-{sc['max']}, idle-after {sc['idle_after']:g}s"
                 f"{step}{cool}, ")
    else:
        head += f"member(s) (warm {row.warm}, "
    parts: list = [Text(head + f"pool-max {row.pool_max}, size {row.size}{hours})")]
    c = row.counts
    desired = f"desired {c.desired}, " if c.desired is not None else ""
    parts.append(Text(f"  {desired}starting {c.starting}, warm {c.warm}, busy {c.busy}"))
    if row.scaled_reason:
        parts.append(Text(f"  last scaled {ago(row.scaled_at, now)}: {row.scaled_reason}"))
    maintainer = row.maintainer
    who = (f"maintained by {maintainer.name} ({Liveness.of(maintainer.online).value})"
           if maintainer else "no maintainer yet")
    if len(row.maintainers) > 1:
        who = f"maintained by {len(row.maintainers)} hosts"
    parts.append(Text(f"  {who}, last attested {ago(row.last_attested_at, now)}"))
    if len(row.maintainers) > 1:
        names = {m.id: m.name for m in row.members}
        for host in row.maintainers:
            room = f", capacity {host.capacity}" if host.capacity is not None else ""
            held = ", ".join(names.get(i, i) for i in host.members) or "no member"
            parts.append(Text(f"    {host.name} ({Liveness.of(host.online).value}{room}): "
                              f"{held}"))
    if row.unplaced:
        parts.append(Text(f"  {row.unplaced} start(s) wait: no live maintainer has room",
                          style="red"))
    if row.members:
        t = table("  MEMBER", "STATE", "ONLINE", "FLIGHT", "IMAGE", "RESETS")
        for m in row.members:
            t.add_row(f"  {m.name}", coloured(m.state), coloured(Liveness.of(m.online).value),
                      m.flight or "-", short(m.digest), str(m.resets))
        parts.append(t)
    backoff = (row.last_attestation or {}).get("backoff")
    if backoff:
        times = "once" if backoff["failures"] == 1 else f"{backoff['failures']} times in a row"
        parts.append(Text(f"  failing {times}: {backoff.get('error') or 'no reason given'}; "
                          f"next try {backoff['retry_in']:.0f}s after the last attestation",
                          style="red"))
    if row.needs_attention:
        parts.append(Text(f"  needs attention: {row.attention}", style="red"))
    for waiting in row.waiting:
        parts.append(Text(f"  {waiting.flight} {waiting.sentence}"))
    return parts


def maintain(
    pool: str = typer.Argument(..., metavar="POOL", help="The pool (its strategy's inventory.name)."),
    name: Optional[str] = typer.Option(None, "--name", help="Runner name (default: HOST-maintain-POOL)."),
    images: Optional[Path] = typer.Option(None, "--images", metavar="DIR",
                                          help="Pool images on this host (env GG_IMAGES_DIR)."),
    state: Optional[Path] = typer.Option(None, "--state-dir", metavar="DIR",
                                         help="This maintainer's own state (default: GG_STATE_DIR, "
                                              "else a maintain-POOL dir beside the runner's)."),
    enrol: Optional[str] = typer.Option(None, "--enrol", metavar="TOKEN",
                                        help="Enrol with a gge_ token whose profile has the "
                                             "maintain role (env GG_ENROL_TOKEN)."),
    enrol_file: Optional[Path] = typer.Option(None, "--enrol-file", metavar="FILE",
                                              help="Read the enrolment token from FILE."),
    once: bool = typer.Option(False, "--once", help="One plan, carried out and attested; then exit."),
    commands: Optional[Path] = typer.Option(None, "--commands", metavar="DIR",
                                            envvar="GG_POOL_COMMANDS_DIR",
                                            help="Driver command: the directory holding the "
                                                 "strategy's create, delete and list "
                                                 "executables (env GG_POOL_COMMANDS_DIR)."),
    capacity: Optional[int] = typer.Option(None, "--capacity", metavar="N", min=0,
                                           envvar="GG_POOL_CAPACITY",
                                           help="The most members this host holds (env "
                                                "GG_POOL_CAPACITY; default: no limit of its "
                                                "own). Several maintainers share one pool."),
) -> None:
    """Maintain POOL on this host: ask for the plan, carry it out, attest.

    Needs the maintain role in this runner's fleet profile, or gg pool allow POOL RUNNER."""
    from gg.cli.fleet import enrol_token
    from gg.pool.maintainer import Maintainer, MaintainerExit, MaintainerOptions, default_name

    token = enrol_token(enrol, enrol_file)  # enrolled: nobody signs in on this host
    cfg = settings()
    host = socket.gethostname().split(".")[0]
    options = MaintainerOptions(
        server=server_url(), pool=pool, state_dir=_state_dir(pool, state),
        name=name or default_name(host, pool), images_dir=images or config.images_dir(),
        person_token=None if token else config.resolve_token(cfg), enrol_token=token,
        max_cycles=1 if once else None,
        commands_dir=commands.resolve() if commands else None, capacity=capacity)

    maintainer = Maintainer(options, say=say)
    try:
        code = run_until_signalled(maintainer)
    except MaintainerExit as exc:
        raise CliError(str(exc), int(Exit.FORBIDDEN if exc.forbidden else Exit.FAILURE)) from None
    raise typer.Exit(code)


def _state_dir(pool: str, flag: Path | None) -> Path:
    """The maintainer's own identity: --state-dir or GG_STATE_DIR when given (absolute from
    where it was started), else beside the runner's."""
    if flag is not None:
        return config.absolute(flag)
    if os.environ.get(config.ENV_STATE_DIR):
        return config.state_dir()
    return config.state_dir().parent / f"maintain-{pool}"


@pool_app.command("delete")
def delete(pool: str = typer.Argument(..., metavar="POOL"),
           json_: bool = typer.Option(False, "--json")) -> None:
    """Delete a pool and its strategy (admin): its maintainer stops every member first (a
    busy one when its flight ends); the strategy goes when the pool is empty."""
    from gg.cli.context import removed

    removed(client().delete_pool(pool), json_)
