"""``gg approve``, ``gg reject``, ``gg force``, ``gg flights --pending`` (its table), and
``gg environment approval``."""

from __future__ import annotations

import re
import shlex
import time
from typing import Optional

import typer

from gg.cli.context import CliError, ago, client, console, emit_json, table
from gg.cli.exits import Exit


def register(app: typer.Typer) -> None:
    app.command("approve")(approve)
    app.command("reject")(reject)
    app.command("force")(force)


def approve(flight_id: str = typer.Argument(..., metavar="FLIGHT"),
            digest: Optional[str] = typer.Option(
                None, "--digest", metavar="sha256:HEX",
                help="Approve only this spec (gg show F names it); refused if it changed."),
            json_: bool = typer.Option(False, "--json")) -> None:
    """Approve a flight waiting for approval (an admin or its named approver; never its opener,
    nor whoever changed it)."""
    if digest is not None and not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
        raise CliError("--digest takes sha256: and 64 hex digits, as gg show F prints it",
                       Exit.USAGE)
    f = client().approve(flight_id, digest)
    if json_:
        emit_json(f)
        return
    given = f.approval.approved if f.approval else None
    typer.echo(f"{f.id} approved: {f.stage}" + (f" ({f.waiting})" if f.waiting else ""))
    if given is not None:
        typer.echo(f"  approved {given.digest}: {shlex.join(f.command)}")


def reject(flight_id: str = typer.Argument(..., metavar="FLIGHT"),
           reason: Optional[str] = typer.Option(None, "--reason", metavar="WHY"),
           json_: bool = typer.Option(False, "--json")) -> None:
    """Refuse a flight's approval: it ends cancelled, with the reason."""
    if reason is not None and len(reason) > 500:
        raise CliError("--reason is at most 500 characters", Exit.USAGE)
    f = client().reject(flight_id, reason)
    if json_:
        emit_json(f)
        return
    typer.echo(f"{f.id} {f.stage}: {f.ended_reason}")


def force(flight_id: str = typer.Argument(..., metavar="FLIGHT"),
          json_: bool = typer.Option(False, "--json")) -> None:
    """Clear every gate a person may clear on a flight at once (admin; recorded)."""
    answer = client().force(flight_id)
    if json_:
        emit_json(answer)
        return
    f = answer.flight
    typer.echo(f"{f.id} forced: cleared {', '.join(answer.cleared)}; now {f.stage}"
               + (f" ({f.waiting})" if f.waiting else ""))


def list_pending(json_: bool) -> None:
    """Flights that wait for a person, oldest first."""
    rows = client().pending()
    if json_:
        emit_json(rows)
        return
    if not rows:
        typer.echo("nothing waits for a person")
        return
    t = table("ID", "OPENED", "BY", "TITLE", "WHO MAY CLEAR", "YOU", "WHY IT WAITS")
    now = time.time()
    for f in rows:
        who = "; ".join(dict.fromkeys(g.who_may_clear for g in f.pending))
        you = "yes" if any(g.you_may_clear for g in f.pending) else "no"
        t.add_row(f.id, ago(f.opened_at, now), f.opened_by_name or "-", f.title, who, you,
                  f.waiting or "-")
    console().print(t)
    for f in rows:  # what approving runs, whole: a table cell would cut it short
        for g in f.pending:
            if g.digest is None:
                continue
            typer.echo(f"{f.id}: approving runs {g.digest}: {shlex.join(g.command or [])}")
            for change in g.changes:
                typer.echo(f"  changed by {g.changed_by}: {change}")


def set_environment_approval(name: str, approval: str, json_: bool) -> None:
    if approval not in ("required", "none"):
        raise CliError(f"approval must be required or none (got {approval!r})", Exit.USAGE)
    env = client().set_environment_approval(name, approval == "required")
    if json_:
        emit_json(env)
        return
    if not env.changed:
        typer.echo(f"environment {name} approval is {env.approval} already; nothing changed")
    elif env.approval == "required":
        typer.echo(f"every new flight in {name} now waits for an approval (gg approve F)")
    else:
        typer.echo(f"flights in {name} no longer need an approval (unless the root envelope "
                   "lists it under approvals)")
