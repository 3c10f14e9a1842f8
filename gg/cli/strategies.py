"""``gg strategy apply|build|show`` and ``gg strategies``."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from gg import config
from gg.cli.context import CliError, client, console, emit_json, plain, short, table
from gg.cli.exits import Exit

strategy_app = typer.Typer(help="Pool strategies: how a pool is furnished and bounded.",
                           no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.command("strategies")(list_strategies)
    app.add_typer(strategy_app, name="strategy")


@strategy_app.command("apply")
def apply(name: str = typer.Argument(..., metavar="NAME"),
          file: Path = typer.Argument(..., metavar="FILE", help="The strategy's YAML file."),
          json_: bool = typer.Option(False, "--json"),
          dry_run: bool = typer.Option(False, "--dry-run",
                                       help="Say what would apply at once and what would wait "
                                            "for a gate; change nothing.")) -> None:
    """Apply strategy NAME from FILE (admin). More machines, other hours or another image
    wait for a gate; fewer machines apply at once."""
    from gg.airspace.strategies import airspace_of, read_strategy
    from gg.airspace.yamlfile import read_yaml

    doc = read_yaml(file)
    # file, line and key, before anything is sent
    read_strategy(doc, name, airspace_of(file)).unwrap()
    answer = client().apply_strategy(name, doc.data, dry_run=dry_run)
    if json_:
        emit_json(answer)
        return
    if answer.dry_run:
        typer.echo(f"dry run: strategy {name}; nothing was changed")
        for change in answer.changes:
            typer.echo(f"  {change['change']} "
                       f"({'would open a gate' if change['gated'] else 'would apply at once'})")
        if answer.status == "gated":
            typer.echo(f"  the gate would be cleared by {answer.gate.who_may_clear}")
        elif not answer.changes:
            typer.echo("  nothing differs from the strategy in force")
        return
    for change in answer.changes:
        typer.echo(f"  {change['change']} ({'opens a gate' if change['gated'] else 'applies now'})")
    if answer.status == "gated":
        gate = answer.gate
        typer.echo(f"strategy {name}: waits for gate {gate.id} ({gate.who_may_clear} can "
                   f"clear it: gg gate clear {gate.id})")
    else:
        typer.echo(f"strategy {name}: {answer.status}")


@strategy_app.command("build")
def build(name: str = typer.Argument(..., metavar="NAME"),
          file: Optional[Path] = typer.Argument(None, metavar="[FILE]",
                                                help="The strategy's YAML file: build.context "
                                                     "starts at its airspace directory."),
          context: Optional[Path] = typer.Option(None, "--context", metavar="DIR",
                                                 help="Build from DIR instead of build.context."),
          base: Optional[Path] = typer.Option(None, "--base", metavar="DIR",
                                              help="The airspace directory: build.context starts "
                                                   "there and stays inside it (default: FILE's "
                                                   "airspace, else here)."),
          images: Optional[Path] = typer.Option(None, "--images", metavar="DIR",
                                                help="Pool images on this host (env GG_IMAGES_DIR)."),
          json_: bool = typer.Option(False, "--json")) -> None:
    """Build NAME's image on this host and pin its digest (admin); a new digest rolls the pool.
    Run it on the host that maintains the pool: the image stays in this host's images dir
    (the podman and docker drivers import it into the engine from there)."""
    from gg.airspace.strategies import airspace_of
    from gg.pool.image import build_image

    if base is None:  # the context is relative to the strategy file, as apply checked it
        base = airspace_of(file) if file is not None else Path(".")
    api = client()
    strategy = api.strategy(name)
    applied = strategy.applied
    if context is None:
        if not applied.get("build"):
            raise CliError(f"strategy {name} has no build.context; give --context DIR", Exit.USAGE)
        context = base / applied["build"]["context"]  # an absolute context stays itself
        try:
            inside = context.resolve().is_relative_to(base.resolve())
        except (OSError, RuntimeError, ValueError):  # a loop of links, a NUL
            inside = False
        if not inside:
            raise CliError(f"the build context {context} does not stay inside {base}: a "
                           "strategy builds only from inside its airspace directory (--base DIR)",
                           Exit.USAGE)
    if not context.is_dir():
        raise CliError(f"the build context {context} is not a directory", Exit.USAGE)
    image = build_image(context, images or config.images_dir())
    answer = api.pin_strategy_digest(name, image.digest)
    if json_:
        emit_json({"strategy": plain(answer.strategy), "digest": image.digest,
                   "path": str(image.path), "changed": answer.changed, "was": answer.was})
        return
    if answer.changed:
        rolls = " (the pool rolls to it)" if answer.was else ""
        typer.echo(f"strategy {name}: pinned {image.digest}{rolls}; image at {image.path}")
    else:
        typer.echo(f"strategy {name}: {image.digest} was pinned already; image at {image.path}")


@strategy_app.command("show")
def show(name: str = typer.Argument(..., metavar="NAME"),
         json_: bool = typer.Option(False, "--json")) -> None:
    """One strategy: what is applied, what is in force, and any change waiting for a gate."""
    s = client().strategy(name)
    if json_:
        emit_json(s)
        return
    lines = [f"strategy {s.name}: pool {s.pool}, environment {s.environment}, "
             f"{s.driver} driver",
             f"  in force  {'yes' if s.in_force else 'no'}",
             f"  image     {s.digest or 'no digest pinned (gg strategy build ' + s.name + ')'}"]
    if s.gate:
        lines.append(f"  waiting   gate {s.gate}: " + "; ".join(
            c["change"] for c in s.pending if c["gated"]))
    typer.echo("\n".join(lines))


def list_strategies(json_: bool = typer.Option(False, "--json")) -> None:
    """Every strategy: its pool, environment, bounds, image, and whether it is in force."""
    rows = client().strategies()
    if json_:
        emit_json(rows)
        return
    if not rows:
        typer.echo("no strategies: gg strategy apply NAME FILE")
        return
    t = table("STRATEGY", "POOL", "ENV", "DRIVER", "SIZE", "WARM", "POOL-MAX", "HOURS", "IMAGE",
              "IN FORCE")
    for s in rows:
        st = s.strategy_in_force or s.applied
        t.add_row(s.name, s.pool, s.environment, s.driver,
                  str(st["inventory"]["size"]), str(st["inventory"]["warm"]),
                  str(st["bounds"]["pool_max"]), st["bounds"]["active_hours"] or "always",
                  short(s.digest),
                  "yes" if s.in_force else f"no (gate {s.gate})")
    console().print(t)


@strategy_app.command("delete")
def delete(name: str = typer.Argument(..., metavar="NAME"),
           json_: bool = typer.Option(False, "--json")) -> None:
    """Delete a strategy whose pool holds no member (admin); gg pool delete stops them."""
    from gg.cli.context import removed

    removed(client().delete_strategy(name), json_)
