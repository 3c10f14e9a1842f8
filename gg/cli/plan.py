"""``gg plan F``: every prerequisite of a flight, held or not, and who can make it true."""

from __future__ import annotations

import typer

from gg.api.flights import Plan
from gg.cli.context import client, emit_json


def register(app: typer.Typer) -> None:
    app.command("plan")(plan)


def plan(flight_id: str = typer.Argument(..., metavar="FLIGHT"),
         json_: bool = typer.Option(False, "--json")) -> None:
    """Everything that must hold before FLIGHT can start, who can make it true, and how."""
    p = client().plan(flight_id)
    if json_:
        emit_json(p)
        return
    typer.echo("\n".join(render(p)))


def render(p: Plan) -> list[str]:
    lines = [f"flight {p.flight}: {p.title} ({p.stage})"]
    if p.state:
        lines.append(f"  {p.state}")
        return lines
    if p.waiting:
        lines.append(f"  {p.waiting}")
    lines.append("")
    for item in p.items:
        lines.extend(_item(item, "  "))
    lines.append("")
    lines.append("  it can start now" if p.startable else
                 "  it starts when every ✗ above is ✓")
    return lines


def _item(item: dict, indent: str) -> list[str]:
    mark = "✓" if item["held"] else "✗"
    note = f" ({item['note']})" if item.get("note") else ""
    out = [f"{indent}{mark} {item['need']}{note}"]
    for way in item.get("ways", []):
        how = f": {way['command']}" if way.get("command") else ""
        out.append(f"{indent}    {way['who']}{how}")
    for part in item.get("parts", []):
        out.extend(_item(part, indent + "    "))
    return out
