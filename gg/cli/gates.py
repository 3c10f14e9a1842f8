"""``gg gates``, ``gg gate show``, ``gg gate clear``."""

from __future__ import annotations

import time

import typer

from gg.cli.context import ago, client, console, emit_json, table

gate_app = typer.Typer(help="Gates: open questions that need a yes.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.command("gates")(list_gates)
    app.add_typer(gate_app, name="gate")


def list_gates(
    all_: bool = typer.Option(False, "--all", help="Also cleared and superseded gates."),
    json_: bool = typer.Option(False, "--json"),
) -> None:
    """Open gates: what each guards, why, and who may clear it."""
    rows = client().gates("all" if all_ else "open")
    if json_:
        emit_json(rows)
        return
    if not rows:
        typer.echo("no open gates" if not all_ else "no gates")
        return
    t = table("GATE", "STATUS", "GUARDS", "WHY", "WHO MAY CLEAR", "OPENED", "HOLDS")
    now = time.time()
    for g in rows:
        t.add_row(g.id, g.status, g.guards, g.why, g.who_may_clear, ago(g.opened_at, now),
                  str(len(g.flights_held)))
    console().print(t)


@gate_app.command("show")
def show(gate_id: str = typer.Argument(..., metavar="GATE"),
         json_: bool = typer.Option(False, "--json")) -> None:
    """One gate in full."""
    g = client().gate(gate_id)
    if json_:
        emit_json(g)
        return
    lines = [f"gate {g.id} ({g.kind}): {g.status}",
             f"  guards   {g.guards}",
             f"  why      {g.why}",
             f"  clears   {g.who_may_clear}" + ("" if g.clearer == "machine"
                                                else f": gg gate clear {g.id}"),
             f"  opened   {ago(g.opened_at)} by {g.opened_by or '-'}"]
    if g.cleared_at:
        lines.append(f"  {g.status:<8} {ago(g.cleared_at)} by {g.cleared_by or '-'}")
    if g.flights_held:
        lines.append(f"  holds    {' '.join(g.flights_held)}")
    typer.echo("\n".join(lines))


@gate_app.command("clear")
def clear(gate_id: str = typer.Argument(..., metavar="GATE"),
          json_: bool = typer.Option(False, "--json")) -> None:
    """Clear a gate (and record who did)."""
    g = client().clear_gate(gate_id)
    if json_:
        emit_json(g)
        return
    typer.echo(f"gate {g.id} cleared: {g.guards}")
