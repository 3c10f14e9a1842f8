"""Reading a flights file (``gg fly --file flights.yaml``), with file/line/key in every error.

::

    flights:
      build:
        command: [make]
      test-linux:
        command: [make, test]
        labels: {os: linux}
        needs: [build]

A top-level ``flights:`` maps a name to that flight's ``command:`` (a list, as after
``gg fly --``), ``needs:`` (names of this file's flights, or one name), and options under
the names of ``gg fly``'s flags (``env``, ``labels``, ``timeout``, …). This module checks
the file's shape, its names and its graph (an unknown need, a cycle: gg.domain.graphs); the
options' values are only collected with their keys here, and read by whoever parses
``gg fly``'s flags (gg.cli.flights_file), so that a flag and its key can never read apart.
The caller names the option keys (they are the flags' names): airspace loads no CLI.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gg.airspace.errors import AirspaceError, describe
from gg.airspace.fields import Fields, sort_errors
from gg.airspace.yamlfile import Document, join, read_yaml
from gg.domain import graphs

__all__ = ["FileFlight", "FlightsFile", "flights_from_document", "read_flights_file"]

TOP = "flights"
COMMAND = "command"
NEEDS = "needs"


@dataclass(frozen=True)
class FileFlight:
    """One flight of the file, as written: its options keyed by flag name, not yet read."""

    name: str
    command: tuple[str, ...]
    needs: tuple[str, ...] = ()
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class FlightsFile:
    doc: Document
    flights: tuple[FileFlight, ...]

    def error(self, flight: str, key: str | None, problem: str) -> AirspaceError:
        """``problem`` located at a flight's key (None: at its name)."""
        path = join(join(TOP, flight), key) if key else join(TOP, flight)
        lines = self.doc.value_lines if key else self.doc.key_lines
        line = lines.get(path, self.doc.key_lines.get(path))
        return AirspaceError(problem, file=self.doc.file, line=line, key=path)


def read_flights_file(path: str | Path, options: tuple[str, ...],
                      not_here: Mapping[str, str] | None = None) -> FlightsFile:
    """The file's flights in the order written; the first problem (by line) raised as an
    AirspaceError. ``options``: the keys a flight may set besides command and needs;
    ``not_here``: keys refused with a sentence of their own (a flag of the whole command)."""
    return flights_from_document(read_yaml(path), options, not_here or {})


def flights_from_document(doc: Document, options: tuple[str, ...],
                          not_here: Mapping[str, str]) -> FlightsFile:
    errors: list[AirspaceError] = []
    top = Fields.top(doc, errors, "a flights file needs flights: NAME: {command: [...]}")
    section = top.section(TOP, required=True) if top is not None else None
    if top is not None:
        top.finish()
    found: list[FileFlight] = []
    if section is not None:
        if len(section.data) > graphs.MAX_GRAPH_FLIGHTS:
            section.fail(None, f"holds {len(section.data)} flights; one file opens at most "
                               f"{graphs.MAX_GRAPH_FLIGHTS}", at="mapping")
        for name, value in section.data.items():
            flight = _flight(section, name, value, options, not_here)
            if flight is not None:
                found.append(flight)
        if not errors:
            _check_graph(section, found)
    if errors:
        raise sort_errors(errors)[0]
    return FlightsFile(doc, tuple(found))


def _flight(section: Fields, name: str, value: Any, options: tuple[str, ...],
            not_here: Mapping[str, str]) -> FileFlight | None:
    section.known.append(name)
    if (problem := graphs.name_problem(name)) is not None:
        section.fail(name, problem, at="key")
        return None
    if not isinstance(value, dict) or not value:
        section.fail(name, f"must be a mapping with a command: (got {describe(value)})")
        return None
    fields = Fields(section.doc, section.errors, join(section.path, name), value)
    before = len(section.errors)
    command = _command(fields)
    needs = _needs(fields)
    chosen = {}
    for key in options:
        fields.known.append(key)
        if value.get(key) is not None:  # a key with no value counts as absent
            chosen[key] = value[key]
    for key, sentence in not_here.items():
        if key in value:
            fields.known.append(key)
            fields.fail(key, sentence, at="key")
    fields.finish()
    if len(section.errors) > before or command is None or needs is None:
        return None
    return FileFlight(name=name, command=command, needs=needs, options=chosen)


def _command(fields: Fields) -> tuple[str, ...] | None:
    fields.known.append(COMMAND)
    value = fields.data.get(COMMAND)
    if value is None:
        fields.fail(COMMAND, "is required: the command as a list, as after gg fly --",
                    at="key" if COMMAND in fields.data else "mapping")
        return None
    if not isinstance(value, list) or not value:
        fields.fail(COMMAND, "must be a list of its words, as after gg fly -- (e.g. "
                             f"[make, test]; got {describe(value)})")
        return None
    for i, word in enumerate(value):
        if isinstance(word, bool) or not isinstance(word, (str, int)):
            fields.fail(f"{COMMAND}[{i}]", f"must be text (got {describe(word)})")
            return None
    return tuple(str(word) for word in value)


def _needs(fields: Fields) -> tuple[str, ...] | None:
    if isinstance(fields.data.get(NEEDS), str):  # one name, as GitHub Actions allows
        fields.known.append(NEEDS)
        return (fields.data[NEEDS].strip(),)
    return fields.texts(NEEDS)


def _check_graph(section: Fields, flights: list[FileFlight]) -> None:
    """Every need names a flight of the file; the needs hold no cycle."""
    names = [f.name for f in flights]
    for flight in flights:
        missing = graphs.unknown_need(flight.needs, names)
        if missing is not None:
            at = f"{NEEDS}[{flight.needs.index(missing)}]"
            if not isinstance(section.data[flight.name].get(NEEDS), list):
                at = NEEDS
            section.fail(join(flight.name, at), f"no flight {missing!r} in this file (its "
                                                f"flights are {', '.join(names)})")
            return
    found = graphs.cycle({f.name: f.needs for f in flights})
    if found is not None:
        section.fail(join(found[0], NEEDS), graphs.cycle_sentence(found))
