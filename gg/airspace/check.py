"""A whole airspace directory: every file checked, every error collected.

::

    airspace/
      root.yaml              the root envelope (optional)
      fleet/NAME.yaml        one fleet profile per file
      strategies/NAME.yaml   one pool strategy per file

``check_airspace`` reads everything and returns every problem, so one run of a checker (or a
CI job) shows the whole list. Beyond each file's own rules it checks what only the set can
show: a profile or strategy naming an environment the root does not list (when there is a
root), two strategies claiming one pool name, and ``.yml`` files that would otherwise be
silently ignored. Other files (READMEs, images/) are left alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from gg.airspace.errors import AirspaceError
from gg.airspace.fields import sort_errors
from gg.airspace.profiles import read_profile
from gg.airspace.root import Root, read_root
from gg.airspace.strategies import read_strategy
from gg.airspace.yamlfile import Document, read_yaml
from gg.domain.profiles import Profile
from gg.domain.strategies import Strategy

__all__ = ["Airspace", "check_airspace", "load_airspace"]


@dataclass(frozen=True)
class Airspace:
    """Everything an airspace directory holds, keyed by file stem."""

    root: Root | None = None
    profiles: dict[str, Profile] = field(default_factory=dict)
    strategies: dict[str, Strategy] = field(default_factory=dict)


def check_airspace(directory: str | Path) -> list[AirspaceError]:
    """Every problem in the airspace at ``directory``, in file and line order; [] when good."""
    _, errors = _survey(Path(directory))
    return errors


def load_airspace(directory: str | Path) -> Airspace:
    """The airspace at ``directory``; the first problem found is raised as AirspaceError."""
    airspace, errors = _survey(Path(directory))
    if errors:
        raise errors[0]
    return airspace


def _survey(base: Path) -> tuple[Airspace, list[AirspaceError]]:
    errors: list[AirspaceError] = []
    if not base.is_dir():
        return Airspace(), [AirspaceError("is not a directory", file=str(base))]
    root_path, fleet_dir, strategies_dir = base / "root.yaml", base / "fleet", base / "strategies"
    if not (root_path.exists() or fleet_dir.is_dir() or strategies_dir.is_dir()):
        problem = "holds no root.yaml, fleet/ or strategies/; is it an airspace directory?"
        return Airspace(), [AirspaceError(problem, file=str(base))]

    root, root_doc = None, None
    if (base / "root.yml").exists():
        errors.append(AirspaceError("is not read: name it root.yaml", file=str(base / "root.yml")))
    if root_path.exists():
        root_doc = _read(root_path, errors)
        if root_doc is not None:
            checked = read_root(root_doc)
            errors.extend(checked.errors)
            root = checked.value

    profiles: dict[str, Profile] = {}
    for path, doc in _documents(fleet_dir, errors):
        checked_profile = read_profile(doc, path.stem)
        errors.extend(checked_profile.errors)
        if checked_profile.value is not None:
            profiles[path.stem] = checked_profile.value
            _check_listed(root, doc, checked_profile.value.environment, errors)

    strategies: dict[str, Strategy] = {}
    pools: dict[str, str] = {}
    for path, doc in _documents(strategies_dir, errors):
        checked_strategy = read_strategy(doc, path.stem, base)
        errors.extend(checked_strategy.errors)
        strategy = checked_strategy.value
        if strategy is None:
            continue
        strategies[path.stem] = strategy
        _check_listed(root, doc, strategy.environment, errors)
        pool = strategy.inventory.name
        if pool in pools:
            errors.append(AirspaceError(f"pool {pool} is already furnished by {pools[pool]}",
                                        file=doc.file, line=doc.value_lines.get("inventory.name"),
                                        key="inventory.name"))
        else:
            pools[pool] = doc.file

    return Airspace(root, profiles, strategies), list(sort_errors(errors))


def _read(path: Path, errors: list[AirspaceError]) -> Document | None:
    try:
        return read_yaml(path)
    except AirspaceError as e:
        errors.append(e)
        return None


def _documents(folder: Path, errors: list[AirspaceError]) -> list[tuple[Path, Document]]:
    """Each ``*.yaml`` in ``folder`` that parses, in name order; a ``*.yml`` is an error."""
    if not folder.is_dir():
        return []
    found = []
    for path in sorted(folder.iterdir()):
        if path.suffix == ".yml":
            errors.append(AirspaceError(f"is not read: name it {path.stem}.yaml", file=str(path)))
        elif path.suffix == ".yaml" and path.is_file():
            doc = _read(path, errors)
            if doc is not None:
                found.append((path, doc))
    return found


def _check_listed(root: Root | None, doc: Document, environment: str,
                  errors: list[AirspaceError]) -> None:
    if root is None or environment in root.environments:
        return
    listed = ", ".join(root.environments) or "none"
    errors.append(AirspaceError(f"{environment} is not listed in root.yaml's environments "
                                f"({listed})", file=doc.file,
                                line=doc.value_lines.get("environment"), key="environment"))
