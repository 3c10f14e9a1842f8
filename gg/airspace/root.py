"""``airspace/root.yaml``: the root envelope, the environments flights may use (SPEC 8).

::

    environments: [ui, api, nightly]

``environments`` is required and may be empty (then no flight may name an environment once
the root is applied). Whether each name is charted, or advertised by a live runner, is for
the control plane to decide when the root is applied; this module only checks the file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gg.airspace.errors import AirspaceError
from gg.airspace.fields import Checked, Fields, sort_errors
from gg.airspace.yamlfile import Document, document_from_mapping, read_yaml
from gg.domain.profiles import name_problem

__all__ = ["Root", "load_root", "read_root", "root_from_mapping"]


@dataclass(frozen=True)
class Root:
    """The root envelope: environment names in the order written."""

    environments: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"environments": list(self.environments)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Root:
        return cls(environments=tuple(data.get("environments", ())))


def read_root(doc: Document) -> Checked[Root]:
    """Every problem in a parsed root document, or the Root it describes."""
    errors: list[AirspaceError] = []
    fields = Fields.top(doc, errors, "the root envelope needs environments: [names]")
    if fields is None:
        return Checked(None, sort_errors(errors))
    names = fields.texts("environments", required=True, check=name_problem)
    fields.finish()
    if errors or names is None:
        return Checked(None, sort_errors(errors))
    return Checked(Root(environments=names))


def load_root(path: str | Path) -> Root:
    """Load ``airspace/root.yaml``; the first problem (by line) is raised as AirspaceError."""
    return read_root(read_yaml(path)).unwrap()


def root_from_mapping(mapping: Any, source: str = "<request>") -> Root:
    """Validate an already-parsed root (e.g. posted over HTTP); errors carry no line."""
    return read_root(document_from_mapping(mapping, source)).unwrap()
