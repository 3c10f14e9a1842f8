"""``gg fly --file flights.yaml``: many flights opened at once, all or none
(docs/work-graphs.md, "Many flights in one file").

Each flight's options are written under the names of ``gg fly``'s flags, and read by
``gg fly`` itself: its keys become the flags they name (``timeout: 10m`` is
``--timeout 10m``, ``labels: {os: linux}`` is ``--labels os=linux``, ``attended: true`` is
``--attended``), the command is parsed as ``gg fly`` parses it, and its callback builds the
open's body and hands it back here instead of sending it. A flag added to ``gg fly`` is a
key of the file at once, read the same way; a bad value is refused with the flag's own
sentence, located at its key (file:line:key), before anything is sent.
"""

from __future__ import annotations

import re
from pathlib import Path

import typer

from gg.airspace.errors import describe
from gg.airspace.flights_file import FileFlight, FlightsFile, read_flights_file
from gg.cli import fly_bodies
from gg.cli.context import CliError, client, emit_json
from gg.cli.exits import Exit

# Flags that say how ``gg fly`` itself behaves, not what one flight is: no key of the file.
NOT_HERE = {
    "wait": "is no key of a flight: gg fly --file does not follow its flights "
            "(gg flights --graph F shows them)",
    "json": "is no key of a flight: give it on the command line (gg fly --file FILE --json)",
    "file": "is no key of a flight: a flights file does not name other files",
}
NOT_PER_FLIGHT = frozenset(NOT_HERE)


def fly_file(path: str | None, command: list[str] | None, json_: bool) -> None:
    """``gg fly`` without a command: the flights of ``path`` (``--file``), or a usage error."""
    from typer._click.core import ParameterSource
    from typer._click.exceptions import MissingParameter
    from typer._click.globals import get_current_context

    ctx = get_current_context()
    fly = ctx.command
    if path is None:
        raise MissingParameter(ctx=ctx, param=_param(fly, "command"))
    if command:
        raise CliError("--file takes each flight's command from the file: leave out -- CMD",
                       Exit.USAGE)
    for param in fly.params:
        if (param.name not in ("file", "json_", "command")
                and ctx.get_parameter_source(param.name) not in (ParameterSource.DEFAULT, None)):
            raise CliError(f"--file takes every flight's options from the file: leave out "
                           f"{param.opts[0]} (or set it under each flight)", Exit.USAGE)
    opened = client().open_graph(bodies_of(Path(path), fly)).flights
    if json_:
        emit_json([{"name": f.name, "id": f.id} for f in opened])
        return
    width = max(len(f.name) for f in opened)
    for f in opened:
        typer.echo(f"{f.name:<{width}}  {f.id}")


def bodies_of(path: Path, fly) -> list[dict]:
    """The bodies of ``POST /v1/graphs`` for the flights of ``path``, in the order written;
    the first problem in the file raised (an AirspaceError: file:line:key)."""
    options = option_keys(fly)
    graph = read_flights_file(path, tuple(options), NOT_HERE)
    return [dict(body_of(fly, options, graph, flight), name=flight.name,
                 needs=list(flight.needs)) for flight in graph.flights]


def option_keys(fly) -> dict:
    """The keys a flight of the file may set: ``gg fly``'s long flags, without their dashes
    (those of :data:`NOT_PER_FLIGHT` left out), each with its click parameter."""
    keys = {}
    for param in fly.params:
        if param.param_type_name != "option":
            continue
        for opt in param.opts:
            key = opt[2:]
            if opt.startswith("--") and key not in NOT_PER_FLIGHT:
                keys[key] = param
    return keys


def body_of(fly, options: dict, graph: FlightsFile, flight: FileFlight) -> dict:
    """The open's body of one flight of the file, made by ``gg fly``'s own parsing."""
    argv: list[str] = []
    for key, value in flight.options.items():
        if options[key].is_flag:
            if not isinstance(value, bool):
                raise graph.error(flight.name, key, f"must be true or false (got "
                                                    f"{describe(value)})")
            argv += [f"--{key}"] if value else []
        else:
            argv += [f"--{key}", _text(value)]
    argv += ["--", *flight.command]
    try:
        with fly_bodies.collecting() as bodies:
            sub = fly.make_context("fly", argv)
            with sub:
                fly.invoke(sub)
    except CliError as exc:
        raise _located(graph, flight, exc.message) from None
    except Exception as exc:
        if not (hasattr(exc, "format_message") and hasattr(exc, "exit_code")):
            raise
        raise _located(graph, flight, exc.format_message()) from None
    return bodies[0]


def _text(value) -> str:
    """A key's value as its flag takes it: ``k=v,…`` for a mapping, ``a,b`` for a list."""
    if isinstance(value, dict):
        return ",".join(f"{k}={_text(v)}" for k, v in value.items())
    if isinstance(value, list):
        return ",".join(_text(v) for v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _located(graph: FlightsFile, flight: FileFlight, message: str):
    """A flag's refusal, at the key it names first (the flight's name when it names none)."""
    found = []
    for key in flight.options:
        hit = re.search(rf"--{re.escape(key)}(?![\w-])", message)
        if hit:
            found.append((hit.start(), key))
    named: str | None = min(found)[1] if found else None
    if named is not None:
        message = re.sub(rf"^--{re.escape(named)}: ", "", message)
    return graph.error(flight.name, named, message.rstrip("."))


def _param(fly, name: str):
    return next(p for p in fly.params if p.name == name)
