"""Reading YAML so that every key and value keeps the line it came from.

``yaml.safe_load`` forgets where things were, and quietly keeps the last of two equal keys.
Airspace files are reviewed by people and applied to a fleet, so an error must point at a line
and a duplicated key must be refused rather than half-ignored. We therefore compose the node
graph with a ``SafeLoader`` and walk it ourselves:

- scalars are built by the SafeLoader (so ``true``, ``3`` and ``"3"`` mean what YAML says);
- mapping keys are taken as written (``yes:`` is the key ``"yes"``, not True);
- anchors, aliases and ``<<`` merge keys work; explicit keys win over merged ones;
- a duplicate key, a non-text key, a custom tag, a self-referencing alias or an alias bomb
  is refused with its line;
- values nested more than ``MAX_DEPTH`` levels deep (counting lists, mappings, what an alias
  brings in and chains of ``<<`` merges) are refused with the line where the limit is passed,
  before anything recurses on them: ``[[[[…`` ten thousand deep is an error, not a crash.

The result is a ``Document``: plain Python data plus two maps from a dotted key path
(``policy.isolation``, ``roles[0]`` for list items, counted from 0) to the line of that key and
of its value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from gg.airspace.errors import AirspaceError

__all__ = ["MAX_DEPTH", "MAX_FILE_BYTES", "Document", "document_from_mapping", "join", "parse_yaml", "read_yaml"]

MAX_FILE_BYTES = 1024 * 1024
MAX_DEPTH = 32  # levels of nesting an airspace file may use; the deepest real key uses 3
_MAX_NODES = 50_000
_MAP_TAG = "tag:yaml.org,2002:map"
_SEQ_TAG = "tag:yaml.org,2002:seq"
_MERGE_TAG = "tag:yaml.org,2002:merge"


@dataclass(frozen=True)
class Document:
    """Parsed data and where each part of it was written. Line maps are empty for data that
    did not come from a file (a profile posted over HTTP), so errors then carry no line."""

    file: str
    data: Any
    key_lines: Mapping[str, int] = field(default_factory=dict)
    value_lines: Mapping[str, int] = field(default_factory=dict)


def join(path: str, key: str) -> str:
    """The dotted path of ``key`` inside the mapping at ``path``."""
    return f"{path}.{key}" if path else key


def document_from_mapping(data: Any, source: str) -> Document:
    """Wrap already-parsed data so the same validators read it (every line is then None)."""
    return Document(file=source, data=data)


def read_yaml(path: str | Path) -> Document:
    """Read and parse one file; any problem (missing, not UTF-8, malformed) is an AirspaceError."""
    name = str(path)
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
    except OSError as e:
        raise AirspaceError(f"cannot be read ({e.strerror or e})", file=name) from None
    if len(raw) > MAX_FILE_BYTES:
        raise AirspaceError("is larger than 1 MiB; airspace files are meant to be small", file=name)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise AirspaceError("is not UTF-8 text", file=name, line=line) from None
    return parse_yaml(text, name)


def parse_yaml(text: str, file: str) -> Document:
    """Parse one YAML document from ``text``; ``file`` is only used to name it in errors."""
    loader = _Loader(text, file)
    try:
        node = loader.get_single_node()
        walker = _Walker(loader, file)
        data = walker.value(node, "") if node is not None else None
        if node is not None:
            walker.value_lines[""] = node.start_mark.line + 1
        return Document(file=file, data=data, key_lines=walker.key_lines,
                        value_lines=walker.value_lines)
    except yaml.MarkedYAMLError as e:
        raise _malformed(e, file) from None
    except yaml.reader.ReaderError as e:
        line = text[: e.position].count("\n") + 1
        raise AirspaceError(f"malformed YAML: character {e.character!r} is not allowed",
                            file=file, line=line) from None
    except yaml.YAMLError as e:
        raise AirspaceError(f"malformed YAML: {e}", file=file) from None
    finally:
        loader.dispose()


def _malformed(e: yaml.MarkedYAMLError, file: str) -> AirspaceError:
    mark = e.problem_mark or e.context_mark
    line = mark.line + 1 if mark is not None else None
    if e.context == "expected a single document in the stream":
        return AirspaceError("holds more than one YAML document; keep one per file",
                             file=file, line=line)
    problem = e.problem or e.context or "the YAML could not be read"
    if e.context and e.problem and e.context_mark is not None and e.context_mark.line + 1 != line:
        problem = f"{problem} ({e.context} on line {e.context_mark.line + 1})"
    return AirspaceError(f"malformed YAML: {problem}", file=file, line=line)


class _Loader(yaml.SafeLoader):
    """A SafeLoader whose composer refuses nesting beyond MAX_DEPTH (PyYAML's composer
    recurses once per level, so without this a deep file ends in a RecursionError)."""

    def __init__(self, text: str, file: str) -> None:
        super().__init__(text)
        self._file = file
        self._depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _too_deep(self._file, self.peek_event().start_mark.line + 1, None)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _too_deep(file: str, line: int, key: str | None) -> AirspaceError:
    return AirspaceError(f"nests deeper than {MAX_DEPTH} levels; airspace files are shallow",
                         file=file, line=line, key=key)


class _Walker:
    """Turns a composed node graph into plain data, recording lines on the way."""

    def __init__(self, loader: yaml.SafeLoader, file: str) -> None:
        self.loader = loader
        self.file = file
        self.key_lines: dict[str, int] = {}
        self.value_lines: dict[str, int] = {}
        self._active: set[int] = set()
        self._seen = 0
        self._depth = 0  # aliases and merges can nest deeper than the text: count again here

    def _error(self, problem: str, node: Node, key: str) -> AirspaceError:
        return AirspaceError(problem, file=self.file, line=node.start_mark.line + 1, key=key)

    def value(self, node: Node, path: str) -> Any:
        self._seen += 1
        if self._seen > _MAX_NODES:
            raise self._error("has too many values (aliases expanding without end?)", node, path)
        self.value_lines.setdefault(path, node.start_mark.line + 1)
        if self._depth >= MAX_DEPTH:  # this node would be one level too many
            raise _too_deep(self.file, node.start_mark.line + 1, path or None)
        if isinstance(node, ScalarNode):
            return self.loader.construct_object(node, deep=True)
        if id(node) in self._active:
            raise self._error("an alias refers to the value that contains it", node, path)
        self._active.add(id(node))
        self._depth += 1
        try:
            if isinstance(node, SequenceNode):
                if node.tag != _SEQ_TAG:
                    raise self._error(f"the tag {node.tag} is not supported here", node, path)
                return [self.value(child, f"{path}[{i}]") for i, child in enumerate(node.value)]
            if isinstance(node, MappingNode):
                if node.tag != _MAP_TAG:
                    raise self._error(f"the tag {node.tag} is not supported here", node, path)
                return self._mapping(node, path)
        finally:
            self._depth -= 1
            self._active.discard(id(node))
        raise self._error("is not a value YAML can hold", node, path)  # pragma: no cover

    def _mapping(self, node: MappingNode, path: str) -> dict[str, Any]:
        result: dict[str, Any] = {}
        first_line: dict[str, int] = {}
        merged: list[tuple[ScalarNode, Node]] = []
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                merged.extend(self._merge_pairs(value_node, path))
                continue
            key = self._key(key_node, path)
            line = key_node.start_mark.line + 1
            if key in first_line:
                raise AirspaceError(f"appears twice in one mapping (first on line {first_line[key]})",
                                    file=self.file, line=line, key=join(path, key))
            first_line[key] = line
            self.key_lines[join(path, key)] = line
            result[key] = self.value(value_node, join(path, key))
        for key_node, value_node in merged:  # explicit keys win; earlier merges win over later
            key = key_node.value
            if key not in result:
                self.key_lines[join(path, key)] = key_node.start_mark.line + 1
                result[key] = self.value(value_node, join(path, key))
        return result

    def _key(self, node: Node, path: str) -> str:
        if not isinstance(node, ScalarNode):
            raise self._error("a key must be plain text, not a list or mapping", node, path)
        if node.tag not in ("tag:yaml.org,2002:str", "tag:yaml.org,2002:int",
                            "tag:yaml.org,2002:bool", "tag:yaml.org,2002:float",
                            "tag:yaml.org,2002:null"):
            raise self._error(f"the key tag {node.tag} is not supported", node, path)
        return node.value

    def _merge_pairs(self, node: Node, path: str) -> list[tuple[ScalarNode, Node]]:
        """The pairs a ``<<`` brings in: one mapping or a list of them, merges resolved."""
        sources = node.value if isinstance(node, SequenceNode) else [node]
        pairs: list[tuple[ScalarNode, Node]] = []
        for source in sources:
            if not isinstance(source, MappingNode):
                raise self._error("<< must merge a mapping or a list of mappings", source, path)
            if id(source) in self._active:
                raise self._error("an alias refers to the value that contains it", source, path)
            if self._depth >= MAX_DEPTH:
                raise _too_deep(self.file, source.start_mark.line + 1, path or None)
            self._active.add(id(source))
            self._depth += 1
            own: list[tuple[ScalarNode, Node]] = []
            nested: list[tuple[ScalarNode, Node]] = []
            try:
                for key_node, value_node in source.value:
                    if key_node.tag == _MERGE_TAG:
                        nested.extend(self._merge_pairs(value_node, path))
                    else:
                        self._key(key_node, path)
                        own.append((key_node, value_node))
            finally:
                self._depth -= 1
                self._active.discard(id(source))
            pairs.extend(own + nested)  # a source's own keys win over what it merged itself
        return pairs
