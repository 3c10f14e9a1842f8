"""``gg group``, ``gg groups``, ``gg attribute``, ``gg attributes``, ``gg runner group`` and
``gg fleet quiesce|resume`` (docs/groups.md)."""

from __future__ import annotations

from typing import Optional

import typer

from gg.cli.context import CliError, ago, client, console, emit_json, table
from gg.cli.exits import Exit

group_app = typer.Typer(help="Runner groups: where machines are, whose zone they serve.",
                        no_args_is_help=True)
attribute_app = typer.Typer(help="The attribute keys groups and --where may use.",
                            no_args_is_help=True)


def register(app: typer.Typer) -> None:
    from gg.cli.fleet import fleet_app
    from gg.cli.runners import runner_app

    app.add_typer(group_app, name="group")
    app.command("groups")(list_groups)
    app.add_typer(attribute_app, name="attribute")
    app.command("attributes")(list_attributes)
    runner_app.command("group")(move_runner)
    fleet_app.command("quiesce")(quiesce)
    fleet_app.command("resume")(resume)


def parse_pairs(flag: str, text: Optional[str]) -> dict[str, str]:
    from gg.domain.groups import parse_pairs as parse

    try:
        return parse(text, flag)
    except ValueError as exc:
        raise CliError(str(exc), Exit.USAGE) from None


def _list(text: Optional[str]) -> list[str]:
    return [item.strip() for item in (text or "").split(",") if item.strip()]


def _posture(g) -> str:
    parts = [",".join(f"{k}={v}" for k, v in sorted(g.attributes.items())) or "-"]
    return parts[0]


@group_app.command("set")
def set_group(name: str = typer.Argument(..., metavar="NAME"),
              attr: Optional[str] = typer.Option(None, "--attr", metavar="k=v,...",
                                                 help="Its attributes (replaces them; '' for none)."),
              bind: Optional[str] = typer.Option(None, "--bind", metavar="ENV|REPO-PREFIX,...",
                                                 help="Work there goes only to bound groups "
                                                      "(replaces them; '' for none)."),
              exclusive: Optional[bool] = typer.Option(None, "--exclusive/--open",
                                                       help="Take only its own work, or any."),
              json_: bool = typer.Option(False, "--json")) -> None:
    """Make or change group NAME (admin); what you leave out keeps its value."""
    body: dict = {}
    if attr is not None:
        body["attributes"] = parse_pairs("--attr", attr)
    if bind is not None:
        body["bindings"] = _list(bind)
    if exclusive is not None:
        body["exclusive"] = exclusive
    g = client().set_group(name, body)
    if json_:
        emit_json(g)
        return
    typer.echo(f"group {g.name}: {_describe(g)}")


def _describe(g) -> str:
    words = [f"attributes {_posture(g)}"]
    words.append(f"bound to {', '.join(g.bindings)}" if g.bindings else "unbound")
    words.append("exclusive" if g.exclusive else "open")
    if g.draining:
        words.append(f"draining (by {g.drain_by})")
    return "; ".join(words)


def list_groups(json_: bool = typer.Option(False, "--json")) -> None:
    """Runner groups: attributes, bindings, exclusive, draining, how many runners."""
    rows = client().groups()
    if json_:
        emit_json(rows)
        return
    t = table("GROUP", "RUNNERS", "ATTRIBUTES", "BOUND TO", "EXCLUSIVE", "DRAINING")
    for g in rows:
        t.add_row(g.name, str(g.runners), _posture(g), ", ".join(g.bindings) or "-",
                  "yes" if g.exclusive else "no",
                  f"yes (by {g.drain_by})" if g.draining else "no")
    console().print(t)


@group_app.command("show")
def show_group(name: str = typer.Argument(..., metavar="NAME"),
               json_: bool = typer.Option(False, "--json")) -> None:
    """One group: its placement contract, its runners and its demand."""
    g = client().group(name)
    if json_:
        emit_json(g)
        return
    typer.echo(f"group {g.name}: {_describe(g)}")
    members = ", ".join(m.name for m in g.members) or "none"
    typer.echo(f"runners ({len(g.members)}): {members}")
    typer.echo(f"demand: {g.queued} queued, {g.running} running")
    if g.updated_by:
        typer.echo(f"set by {g.updated_by} {ago(g.updated_at)}")


@group_app.command("delete")
def delete_group(name: str = typer.Argument(..., metavar="NAME")) -> None:
    """Delete a group nothing references any more (admin)."""
    client().delete_group(name)
    typer.echo(f"group {name} deleted")


@group_app.command("drain")
def drain_group(name: str = typer.Argument(..., metavar="NAME"),
                json_: bool = typer.Option(False, "--json")) -> None:
    """Offer the group's runners nothing new (admin); running work continues."""
    _drain(name, True, json_)


@group_app.command("resume")
def resume_group(name: str = typer.Argument(..., metavar="NAME"),
                 json_: bool = typer.Option(False, "--json")) -> None:
    """Lift a group's drain (admin)."""
    _drain(name, False, json_)


def _drain(name: str, draining: bool, json_: bool) -> None:
    g = client().group_drain(name, draining)
    if json_:
        emit_json(g)
        return
    state = "draining" if g.draining else "not draining"
    typer.echo(f"group {g.name} is {state}" + ("" if g.changed else " (it already was)"))


@group_app.command("demand")
def demand(name: str = typer.Argument(..., metavar="NAME"),
           json_: bool = typer.Option(False, "--json")) -> None:
    """Flights the group could take now, and flights its runners fly (an autoscaler's signal)."""
    d = client().group_demand(name)
    if json_:
        emit_json(d)
        return
    typer.echo(f"group {d.group}: {d.queued} queued, {d.running} running")


@attribute_app.command("set")
def set_attribute(key: str = typer.Argument(..., metavar="KEY"),
                  values: Optional[str] = typer.Option(None, "--values", metavar="a,b,...",
                                                       help="The only values it takes "
                                                            "(default: any)."),
                  json_: bool = typer.Option(False, "--json")) -> None:
    """Register an attribute key groups and --where may use (admin)."""
    a = client().set_attribute(key, _list(values))
    if json_:
        emit_json(a)
        return
    typer.echo(f"attribute {a.key}: " + (", ".join(a.values) if a.values else "any value"))


def list_attributes(json_: bool = typer.Option(False, "--json")) -> None:
    """Registered attribute keys and the values each takes."""
    rows = client().attributes()
    if json_:
        emit_json(rows)
        return
    if not rows:
        typer.echo("no attribute keys are registered: gg attribute set KEY")
        return
    t = table("KEY", "VALUES")
    for a in rows:
        t.add_row(a.key, ", ".join(a.values) or "any")
    console().print(t)


def move_runner(runner: str = typer.Argument(..., metavar="RUNNER"),
                group: str = typer.Argument(..., metavar="GROUP"),
                json_: bool = typer.Option(False, "--json")) -> None:
    """Move RUNNER to GROUP (admin)."""
    moved = client().move_runner(runner, group)
    if json_:
        emit_json(moved)
        return
    if moved.changed:
        typer.echo(f"runner {moved.name} moved from group {moved.from_} to {moved.group}")
    else:
        typer.echo(f"runner {moved.name} is in group {moved.group} already")


def quiesce(json_: bool = typer.Option(False, "--json")) -> None:
    """Stop every new offer, fleet-wide (admin); running work continues."""
    _stop(True, json_)


def resume(json_: bool = typer.Option(False, "--json")) -> None:
    """Lift a fleet-wide quiesce (admin)."""
    _stop(False, json_)


def _stop(quiesced: bool, json_: bool) -> None:
    state = client().fleet_stop(quiesced)
    if json_:
        emit_json(state)
        return
    if state.quiesced:
        typer.echo(f"the fleet is quiesced (by {state.quiesced_by}): nothing new starts; "
                   f"{state.running} flight{'s' if state.running != 1 else ''} still running")
    else:
        typer.echo("the fleet is not quiesced: offers go out again")
