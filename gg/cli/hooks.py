"""``gg hook add|show|remove`` and ``gg hooks``: notifications to URLs an admin added."""

from __future__ import annotations

from typing import Optional

import typer

from gg.cli.context import ago, client, console, emit_json, table
from gg.domain import hooks as rules

hook_app = typer.Typer(help="Hooks: signed POSTs to a URL when flights end (admin).",
                       no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(hook_app, name="hook")
    app.command("hooks")(hooks_list)


@hook_app.command("add")
def hook_add(
    url: str = typer.Argument(..., help="Where to POST each event (http:// or https://)."),
    on: str = typer.Option(..., "--on", metavar="EVENTS",
                           help=f"Comma-separated: {', '.join(rules.HOOK_EVENTS)}."),
    env: Optional[str] = typer.Option(None, "--env", metavar="ENV",
                                      help="Only events of flights in this environment."),
    json_: bool = typer.Option(False, "--json"),
) -> None:
    """Add a hook (admin); its signing secret is shown once, now."""
    names = rules.parse_on(on)  # an unknown name is refused here, in one sentence
    answer = client().add_hook(url, names, env)
    if json_:
        emit_json(answer)
        return
    hook = answer.hook
    scope = f" in {hook.environment}" if hook.environment else ""
    typer.echo(f"added hook {hook.id}: {', '.join(hook.events)}{scope} to {hook.url}. "
               f"Each POST carries {rules.SIGNATURE_HEADER}: sha256=HMAC-SHA256 of the body "
               "under this secret, shown this once:")
    typer.echo(answer.secret)


def hooks_list(json_: bool = typer.Option(False, "--json")) -> None:
    """The hooks (admin): where they POST and what they hear."""
    rows = client().hooks()
    if json_:
        emit_json(rows)
        return
    t = table("ID", "URL", "ON", "ENV", "ADDED")
    t.columns[1].overflow = "fold"  # a URL is shown whole, over several lines if need be
    for h in rows:
        t.add_row(h.id, h.url, ",".join(h.events), h.environment or "-",
                  f"{ago(h.created_at)} by {h.created_by}")
    console().print(t)


@hook_app.command("show")
def hook_show(
    hook_id: str = typer.Argument(..., help="The hook's id (gg hooks)."),
    json_: bool = typer.Option(False, "--json"),
) -> None:
    """A hook and its last deliveries, with every attempt's answer."""
    detail = client().hook(hook_id)
    if json_:
        emit_json(detail)
        return
    hook = detail.hook
    typer.echo(f"hook {hook.id} -> {hook.url} on {','.join(hook.events)}"
               f"{' in ' + hook.environment if hook.environment else ''}")
    t = table("DELIVERY", "EVENT", "FLIGHT", "ATTEMPT", "AT", "ANSWER", "STATE")
    t.columns[0].overflow = t.columns[5].overflow = "fold"  # ids and errors shown whole
    for d in detail.deliveries:
        state = ("delivered" if d.delivered_at else "dropped" if d.dropped_at
                 else f"next try {ago(d.next_at)}")
        answers = d.answers or [None]
        for a in answers:
            answer = ("-" if a is None else str(a.status) if a.status is not None
                      else a.error or "-")
            t.add_row(d.id, d.event, d.flight_id or "-", str(a.attempt) if a else "-",
                      ago(a.at) if a else "-", answer, state)
    console().print(t)


@hook_app.command("remove")
def hook_remove(
    hook_id: str = typer.Argument(..., help="The hook's id (gg hooks)."),
    json_: bool = typer.Option(False, "--json"),
) -> None:
    """Remove a hook (admin): nothing more is sent to it, undelivered events included."""
    removed = client().remove_hook(hook_id)
    if json_:
        emit_json(removed)
        return
    typer.echo(f"removed hook {removed.id}: nothing more is sent to {removed.url}")
