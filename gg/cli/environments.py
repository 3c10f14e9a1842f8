"""``gg environment chart``, ``gg environments``, ``gg environment show``."""

from __future__ import annotations

import typer

from gg.api.placement import EnvironmentView
from gg.cli.context import ago, client, console, emit_json, table

environment_app = typer.Typer(help="Environments: charted names with a meaning.",
                              no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(environment_app, name="environment")
    app.command("environments")(list_environments)


@environment_app.command("chart")
def chart(
    name: str = typer.Argument(..., metavar="NAME"),
    means: str = typer.Option(..., "--means", metavar="PREDICATE",
                              help='CEL over the runner\'s facts, e.g. os == "linux" && cpu_count >= 4'),
    json_: bool = typer.Option(False, "--json"),
) -> None:
    """Chart an environment (admin); its meaning is in force once its gate is cleared."""
    env = client().chart_environment(name, means)
    if json_:
        emit_json(env)
        return
    if not env.changed:
        typer.echo(f"environment {name} already means that; nothing changed")
        return
    typer.echo(f"charted environment {name}: {means}")
    typer.echo(f"gate {env.gate} is open; an admin clears it with gg gate clear {env.gate}")
    if env.meaning:
        typer.echo(f"until then the meaning in force stays: {env.meaning}, and waiting "
                   f"flights of {name} are held behind the gate")


@environment_app.command("approval")
def approval(
    name: str = typer.Argument(..., metavar="NAME"),
    required: str = typer.Argument(..., metavar="required|none"),
    json_: bool = typer.Option(False, "--json"),
) -> None:
    """Require an approval for every new flight in an environment, or stop (admin)."""
    from gg.cli.approvals import set_environment_approval

    set_environment_approval(name, required, json_)


def list_environments(json_: bool = typer.Option(False, "--json")) -> None:
    """Every environment: meaning, gate, and the runners that advertise it."""
    rows = client().environments()
    if json_:
        emit_json(rows)
        return
    if not rows:
        typer.echo("no environments: chart one with gg environment chart NAME --means PREDICATE")
        return
    t = table("NAME", "MEANING", "GATE", "ROOT", "APPROVAL", "ADVERTISED BY", "MEASURED",
              "REFUTED")
    for e in rows:
        t.add_row(e.name, _meaning(e), _gate(e),
                  {True: "yes", False: "no", None: "-"}[e.in_root], e.approval,
                  f"{e.advertising} ({e.online} online)", str(e.measured), str(e.refuted))
    console().print(t)


@environment_app.command("show")
def show(name: str = typer.Argument(..., metavar="NAME"),
         json_: bool = typer.Option(False, "--json")) -> None:
    """One environment in full."""
    e = client().environment(name)
    if json_:
        emit_json(e)
        return
    lines = [f"environment {e.name}",
             f"  meaning    {_meaning(e)}",
             f"  gate       {_gate(e)}",
             f"  approval   {e.approval}"]
    if e.charted_at:
        lines.append(f"  charted    {ago(e.charted_at)} by {e.charted_by or '-'}")
    lines.append(f"  runners    {' '.join(e.runners) or '-'} ({e.online} online, "
                 f"{e.measured} measured, {e.refuted} refuted)")
    typer.echo("\n".join(lines))


def _meaning(e: EnvironmentView) -> str:
    if not e.charted:
        return "(not charted)"
    shown = e.meaning or "(none in force yet)"
    if e.pending_meaning:
        shown += f" -> {e.pending_meaning} (waiting for its gate)"
    return shown


def _gate(e: EnvironmentView) -> str:
    return f"{e.gate} {e.gate_status}" if e.gate else "-"


@environment_app.command("remove")
def remove(name: str = typer.Argument(..., metavar="NAME"),
           json_: bool = typer.Option(False, "--json")) -> None:
    """Remove a charted environment (admin); refused while flights that have not ended use
    it or the root envelope lists it."""
    from gg.cli.context import client, removed

    removed(client().remove_environment(name), json_)
