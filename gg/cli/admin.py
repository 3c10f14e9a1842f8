"""``gg runner cordon|drain|resume|retire|forget|policy``: what admins do to runners."""

from __future__ import annotations

from typing import Optional

import typer

from gg.api.runners import StateChange
from gg.cli.context import CliError, client, confirm, emit_json
from gg.cli.exits import Exit
from gg.cli.limits import parse_limits, policy_limits_text
from gg.cli.runners import runner_app
from gg.domain.egress import parse_allow
from gg.domain.policy import EGRESSES, ISOLATIONS, MAX_WORKERS, image_problem

RUNNER = typer.Argument(..., metavar="RUNNER", help="Runner id or name.")
JSON = typer.Option(False, "--json")
YES = typer.Option(False, "--yes", "-y", help="Do not ask (needed when stdin is not a terminal).")


def register(app: typer.Typer) -> None:
    """Commands join the ``gg runner`` group that :mod:`gg.cli.runners` owns."""


def _say_change(change: StateChange, json_: bool) -> None:
    if json_:
        emit_json(change)
    else:
        typer.echo(change.message)


@runner_app.command("cordon")
def cordon(ref: str = RUNNER, json_: bool = JSON) -> None:
    """No new work for RUNNER; what it runs goes on (admin)."""
    _say_change(client().change_runner_state(ref, "cordon"), json_)


@runner_app.command("drain")
def drain(
    ref: Optional[str] = typer.Argument(None, metavar="[RUNNER]", help="Runner id or name."),
    label: Optional[str] = typer.Option(None, "--label", metavar="k=v,...",
                                        help="Drain every runner advertising these labels."),
    json_: bool = JSON,
) -> None:
    """Finish current work, take nothing new; reads drained when its last lease ends (admin)."""
    if (ref is None) == (label is None):
        raise CliError("name one runner, or select runners with --label k=v (not both)", Exit.USAGE)
    api = client()
    if ref is not None:
        _say_change(api.change_runner_state(ref, "drain"), json_)
        return
    from gg.domain.labels import parse_labels

    assert label is not None  # one of the two, said above
    try:
        selector = parse_labels(label)
    except ValueError as exc:
        raise CliError(f"--label: {exc}", Exit.USAGE) from None
    if not selector:
        raise CliError("--label: give at least one k=v", Exit.USAGE)
    changes = api.drain_labelled(selector)
    if json_:
        emit_json(changes)
        return
    for change in changes:
        typer.echo(change.message)


@runner_app.command("resume")
def resume(ref: str = RUNNER, json_: bool = JSON) -> None:
    """Back to active: RUNNER may take work again at once (admin)."""
    _say_change(client().change_runner_state(ref, "resume"), json_)


@runner_app.command("retire")
def retire(ref: str = RUNNER, json_: bool = JSON, yes: bool = YES) -> None:
    """Irreversibly retire RUNNER: its credential is refused, its key never registers again (admin)."""
    confirm(yes, f"retire runner {ref}? its credential dies and its key can never register "
                 "again; this cannot be undone", "retire")
    answer = client().retire_runner(ref)
    if json_:
        emit_json(answer)
        return
    typer.echo(f"{answer.name} ({answer.runner}) is retired: its credential is refused from "
               "its next request, its key can never register again, and its history is kept")
    stopping = answer.stopping
    if stopping:
        typer.echo(f"it is stopping {len(stopping)} flight(s) ({', '.join(stopping)}): each "
                   "becomes ready again when the runner hands it back, or when its lease ends")


@runner_app.command("forget")
def forget(ref: str = RUNNER, json_: bool = JSON, yes: bool = YES) -> None:
    """Delete a stale registration without a tombstone; refused while online or leasing (admin)."""
    confirm(yes, f"forget runner {ref}? its registration and credential are deleted", "forget")
    answer = client().forget_runner(ref)
    if json_:
        emit_json(answer)
        return
    typer.echo(f"{answer.name} ({answer.runner}) is forgotten; the machine may register again")


def _allowlist(values: list[str]) -> list[str]:
    """--allow entries, checked here: a bad one is one sentence and exit 2."""
    try:
        return list(parse_allow(values))
    except ValueError as exc:
        raise CliError(f"--allow: {exc}", Exit.USAGE) from None


@runner_app.command("policy")
def policy(
    ref: str = RUNNER,
    isolation: Optional[str] = typer.Option(None, "--isolation", metavar="|".join(ISOLATIONS)),
    egress: Optional[str] = typer.Option(None, "--egress", metavar="|".join(reversed(EGRESSES))),
    workers: Optional[int] = typer.Option(None, "--workers", min=1, max=MAX_WORKERS),
    cpus: Optional[str] = typer.Option(None, "--cpus", metavar="N",
                                       help="Cores a flight gets unless it asks (0.5, 2)."),
    memory: Optional[str] = typer.Option(None, "--memory", metavar="SIZE",
                                         help="Memory a flight gets unless it asks (512M)."),
    pids: Optional[str] = typer.Option(None, "--pids", metavar="N",
                                       help="Processes a flight gets unless it asks."),
    max_cpus: Optional[str] = typer.Option(None, "--max-cpus", metavar="N"),
    max_memory: Optional[str] = typer.Option(None, "--max-memory", metavar="SIZE"),
    max_pids: Optional[str] = typer.Option(None, "--max-pids", metavar="N"),
    image: Optional[str] = typer.Option(None, "--image", metavar="REF",
                                        help="The image isolation container runs flights from."),
    allow: Optional[list[str]] = typer.Option(
        None, "--allow", metavar="HOST[:PORT]|CIDR[:PORT]",
        help="What egress allowlist lets a flight reach (repeat; replaces the list)."),
    no_allow: bool = typer.Option(False, "--no-allow", help="Empty the egress allowlist."),
    json_: bool = JSON,
) -> None:
    """Show RUNNER's assigned policy, or change it (admin); applied at its next check-in."""
    _one_of("--isolation", isolation, ISOLATIONS)
    _one_of("--egress", egress, EGRESSES)
    limits = parse_limits(cpus=cpus, memory=memory, pids=pids)
    limits.update({f"max_{k}": v for k, v in parse_limits(
        cpus=max_cpus, memory=max_memory, pids=max_pids, prefix="--max-").items()})
    if allow and no_allow:
        raise CliError("give --allow or --no-allow, not both", Exit.USAGE)
    allowed = [] if no_allow else _allowlist(allow) if allow else None
    api = client()
    if image is not None and image_problem(image):
        raise CliError(f"--image: {image_problem(image)}", Exit.USAGE)
    if isolation is None and egress is None and workers is None and not limits \
            and image is None and allowed is None:
        r = api.runner(ref)
    else:
        r = api.set_policy(ref, isolation=isolation, egress=egress, workers=workers, image=image,
                           allow=allowed, **limits)
    if json_:
        emit_json(r)
        return
    p = r.policy
    typer.echo(f"{r.name}: isolation {p.get('isolation')}, egress {p.get('egress')}, "
               f"workers {p.get('workers')}" + policy_limits_text(p)
               + (f"; image {p['image']}" if p.get("image") else "")
               + (f", allow {', '.join(p['allow'])}" if p.get("allow") else ""))
    typer.echo(f"  health {r.health}" + "".join(f" ({n})" for n in r.health_notes)
               + f"; {r.checks_verdict}")


def _one_of(flag: str, value: str | None, allowed: tuple[str, ...]) -> None:
    if value is not None and value not in allowed:
        raise CliError(f"{flag} must be one of {', '.join(allowed)} (got {value!r})", Exit.USAGE)
