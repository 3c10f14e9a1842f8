"""Pool strategy files (SPEC 12), e.g. ``airspace/strategies/NAME.yaml``.

::

    environment: ui                                        # required
    inventory: {name: ui-pool, size: 6, warm: 2}           # name, size required; warm 0
    image: {ref: ui-runner, digest: "sha256:<64 hex>"}     # ref required; digest until built
    bounds: {pool-max: 4, active-hours: "08:00-20:00 Europe/Berlin"}   # optional
    build: {context: images/ui}                            # optional
    driver: process                                        # process | podman | docker | command
    command: {create: create-host, delete: delete-host, list: list-hosts,   # driver command
              join-within: 2m}        # optional: a machine made checks in within it
    group: default                                         # the runner group members join
    scale: {min: 0, max: 6, idle-after: 5m, step: 2, cool-down: 30s}   # optional

With ``scale:`` the pool grows and shrinks from demand (``gg.domain.pool_scaling``):
``min`` (0 allowed) and ``max`` are required, ``idle-after`` is required (a duration: a
number of seconds, or ``30s``, ``5m``), ``step`` defaults to as many as the demand needs and
``cool-down`` to 0. ``inventory.warm`` is then not used (a file with both is refused), and
the bounds still cap it: ``max`` may not exceed ``pool-max``.

``command.join-within`` (a duration, 1 s to 1 h; default ``MEMBER_CODE_TTL``, 10 minutes) is
how long a machine the create command made has to check in: its one-use member code lives
exactly as long, and a machine silent past it is deleted and replaced.

Cross-field rules, each reported on the line of the second key: ``warm <= size``,
``pool-max <= size`` (more members can never run than the pool holds) and ``warm <= pool-max``
(warm members are running members). Without ``bounds``, ``pool-max`` is ``size`` and the pool
is always active.

``build.context`` must stay inside the airspace directory: the parent of ``strategies/`` for a
file kept there, else the file's own directory. A relative context starts there; an absolute
one, a ``..`` that climbs out, or a symbolic link that leads out is refused, since ``gg strategy
build`` would otherwise pack whatever it names (a key, a config dir) into a pool image. A
strategy posted without a file (over HTTP) is held to the part that needs no disk: no ``..``
out of it; ``gg strategy build`` checks the rest against its ``--base`` before it packs.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath
from typing import Any

from gg.airspace.errors import AirspaceError, describe
from gg.airspace.fields import Checked, Fields, sort_errors
from gg.airspace.yamlfile import Document, document_from_mapping, read_yaml
from gg.domain.groups import DEFAULT_GROUP
from gg.domain.groups import name_problem as group_name_problem
from gg.domain.pool_scaling import Scale
from gg.domain.profiles import name_problem
from gg.domain.strategies import (
    DRIVERS,
    JOIN_WITHIN_LEAST,
    JOIN_WITHIN_MOST,
    Bounds,
    Build,
    Image,
    Inventory,
    Strategy,
    command_problem,
    digest_problem,
    parse_active_hours,
)
from gg.settings import parse_duration

__all__ = ["airspace_of", "context_problem", "load_strategy", "read_strategy",
           "strategy_from_mapping"]

MAX_POOL_SIZE = 1024
_BELONGS = {"name": "inventory", "size": "inventory", "warm": "inventory", "ref": "image",
            "digest": "image", "pool-max": "bounds", "active-hours": "bounds",
            "context": "build", "min": "scale", "max": "scale", "idle-after": "scale",
            "step": "scale", "cool-down": "scale", "create": "command", "delete": "command",
            "list": "command", "join-within": "command"}
_NEEDS = "a strategy needs at least environment, inventory and image"


def _no_space(value: str) -> str | None:
    return "must not contain spaces" if any(ch.isspace() for ch in value) else None


def _hours_problem(message: str, text: str) -> str:
    """The planner's sentence without its own "active-hours 'TEXT'" opening (the located error
    already names the key), with what was given at the end."""
    return f"{message.removeprefix(f'active-hours {text!r} ')} (got {describe(text)})"


def airspace_of(path: str | Path) -> Path:
    """The airspace directory a strategy file belongs to: the parent of its ``strategies/``
    folder, or the file's own directory when it is kept elsewhere."""
    folder = Path(path).parent
    return folder.parent if folder.name == "strategies" else folder


def context_problem(context: str, airspace: Path | None) -> str | None:
    """Why ``context`` may not be a build context of the airspace at ``airspace`` (None: it
    may). Without a directory only what the text itself shows is checked."""
    if "\0" in context:
        return "must not contain a NUL character"
    written = PurePosixPath(context)
    if not written.is_absolute():
        normal = os.path.normpath(context)
        if normal == ".." or normal.startswith("../"):
            return f"must stay inside the airspace directory (got {describe(context)})"
    if airspace is None:
        return None
    target = Path(airspace) / context  # an absolute context stays itself
    try:
        root, resolved = Path(airspace).resolve(), target.resolve()
    except (OSError, RuntimeError):  # RuntimeError: a loop of symbolic links
        return (f"cannot be followed to a directory (a loop of symbolic links?) "
                f"(got {describe(context)})")
    if resolved == root or resolved.is_relative_to(root):
        return None
    written_in = Path(os.path.normpath(target.absolute())).is_relative_to(
        os.path.normpath(Path(airspace).absolute()))
    through = f"; a symbolic link leads it to {resolved}" if written_in else ""
    return (f"must stay inside the airspace directory {airspace}{through} "
            f"(got {describe(context)})")


def read_strategy(doc: Document, name: str, airspace: Path | None = None) -> Checked[Strategy]:
    """Every problem in a parsed strategy document, or the Strategy it describes.
    ``airspace`` is the directory ``build.context`` must stay inside (see ``airspace_of``);
    None for a strategy that came without a file."""
    errors: list[AirspaceError] = []
    problem = name_problem(name)
    if problem:
        errors.append(AirspaceError(f"the strategy name {problem}", file=doc.file))
    fields = Fields.top(doc, errors, _NEEDS)
    if fields is None:
        return Checked(None, sort_errors(errors))

    environment = fields.text("environment", required=True, check=name_problem)
    inventory = _read_inventory(fields.section("inventory", required=True))
    image = _read_image(fields.section("image", required=True))
    bounds = _read_bounds(fields, fields.section("bounds"), inventory)
    build_fields = fields.section("build")
    build = None
    if build_fields is not None:
        context = build_fields.text("context", required=True,
                                    check=lambda value: context_problem(value, airspace))
        build_fields.finish()
        build = Build(context=context) if context else None
    driver = fields.choice("driver", DRIVERS, default="process")
    group = fields.text("group", default=DEFAULT_GROUP, check=group_name_problem)
    scale_fields = fields.section("scale")
    scale = _read_scale(scale_fields, inventory, bounds)
    command_fields = fields.section("command")
    command, join_within = _read_command(fields, command_fields, driver)
    fields.finish(belongs=_BELONGS)

    if (errors or environment is None or inventory is None or image is None or bounds is None
            or driver is None or group is None
            or (scale is None and scale_fields is not None)
            or (command_fields is not None and command is None)):
        return Checked(None, sort_errors(errors))
    return Checked(Strategy(name=name, environment=environment, inventory=inventory,
                            image=image, bounds=bounds, build=build, driver=driver, group=group,
                            scale=scale, command=command, join_within=join_within))


def _read_command(top: Fields, fields: Fields | None,
                  driver: str | None) -> tuple[dict[str, str] | None, float | None]:
    """``command: {create, delete, list, join-within}``: required with driver command, refused
    otherwise. Returns the executables' names and the join deadline (None: the default)."""
    if fields is None:
        if driver == "command" and "command" not in top.data:
            top.fail("driver", "command needs a command section naming its create, delete and "
                               "list executables")
        return None, None
    names = {verb: fields.text(verb, required=True, check=command_problem)
             for verb in ("create", "delete", "list")}
    join_within = _duration(fields, "join-within", required=False)
    fields.finish()
    if driver != "command":
        fields.fail(None, f"is only for driver command (this strategy's driver is {driver})",
                    at="key")
        return None, None
    if join_within is not None and not JOIN_WITHIN_LEAST <= join_within <= JOIN_WITHIN_MOST:
        fields.fail("join-within", f"must be from {JOIN_WITHIN_LEAST:g} s to "
                                   f"{JOIN_WITHIN_MOST / 60:g} minutes: a machine's one-use "
                                   f"member code lives that long (got "
                                   f"{fields.data['join-within']})")
        return None, None
    bad_within = fields.data.get("join-within") is not None and join_within is None
    if any(v is None for v in names.values()) or bad_within:
        return None, None
    return {k: v for k, v in names.items() if v is not None}, join_within


def _duration(fields: Fields, key: str, *, required: bool,
              default: float | None = None) -> float | None:
    """A duration in seconds (a number, or text such as ``30s``, ``5m``); None when missing
    (and reported when required) or wrong (reported)."""
    value = fields.data.get(key)
    fields.known.append(key)
    if value is None:
        if required:
            fields.fail(key, "is required", at="key" if key in fields.data else "mapping")
        return default
    try:
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ValueError(f"{value!r} is not a duration (try 30, 500ms, 10m, 12h or 30d)")
        seconds = float(value) if not isinstance(value, str) else parse_duration(value)
    except ValueError as exc:
        fields.fail(key, str(exc))
        return None
    if seconds < 0:
        fields.fail(key, f"must not be negative (got {value})")
        return None
    return seconds


def _read_scale(fields: Fields | None, inventory: Inventory | None,
                bounds: Bounds | None) -> Scale | None:
    """``scale: {min, max, idle-after, step, cool-down}``; None when absent or wrong."""
    if fields is None:
        return None
    low = fields.integer("min", required=True, minimum=0, maximum=MAX_POOL_SIZE)
    high = fields.integer("max", required=True, minimum=1, maximum=MAX_POOL_SIZE)
    idle_after = _duration(fields, "idle-after", required=True)
    step = fields.integer("step", minimum=1, maximum=MAX_POOL_SIZE)
    cool_down = _duration(fields, "cool-down", required=False, default=0.0)
    fields.finish()
    if low is None or high is None or idle_after is None or cool_down is None:
        return None
    if "step" in fields.data and fields.data["step"] is not None and step is None:
        return None
    if low > high:
        fields.fail("max", f"must be at least min ({low}) (got {high})")
        return None
    if bounds is not None and high > bounds.pool_max:
        fields.fail("max", f"must not exceed bounds.pool-max ({bounds.pool_max}), which still "
                           f"caps the pool (got {high})")
        return None
    if inventory is not None and inventory.warm:
        fields.fail(None, f"replaces inventory.warm, which a scaled pool does not use: remove "
                          f"warm ({inventory.warm}) from inventory", at="key")
        return None
    return Scale(min=low, max=high, idle_after=idle_after, step=step, cool_down=cool_down)


def _read_inventory(fields: Fields | None) -> Inventory | None:
    if fields is None:
        return None
    name = fields.text("name", required=True, check=name_problem)
    size = fields.integer("size", required=True, minimum=1, maximum=MAX_POOL_SIZE)
    warm = fields.integer("warm", default=0, minimum=0, maximum=MAX_POOL_SIZE)
    fields.finish()
    if size is not None and warm is not None and warm > size:
        fields.fail("warm", f"must not exceed size ({size}) (got {warm})")
        return None
    if name is None or size is None or warm is None:
        return None
    return Inventory(name=name, size=size, warm=warm)


def _read_image(fields: Fields | None) -> Image | None:
    if fields is None:
        return None
    ref = fields.text("ref", required=True, check=_no_space)
    digest = fields.text("digest", check=digest_problem)
    digest_bad = "digest" in fields.data and fields.data["digest"] is not None and digest is None
    fields.finish()
    if ref is None or digest_bad:
        return None
    return Image(ref=ref, digest=digest)


def _read_bounds(top: Fields, fields: Fields | None, inventory: Inventory | None) -> Bounds | None:
    """Bounds, defaulting pool-max to the inventory's size; None when anything is wrong."""
    size = inventory.size if inventory else None
    if fields is None:
        if "bounds" in top.data and top.data["bounds"] is not None:
            return None  # present but not a mapping: already reported
        return Bounds(pool_max=size) if size is not None else None
    pool_max = fields.integer("pool-max", default=size, minimum=1, maximum=MAX_POOL_SIZE)
    hours_text = fields.text("active-hours")
    fields.finish()
    hours = None
    if hours_text is not None:
        try:
            hours = parse_active_hours(hours_text)
        except ValueError as e:
            fields.fail("active-hours", _hours_problem(str(e), hours_text))
            return None
    elif "active-hours" in fields.data and fields.data["active-hours"] is not None:
        return None  # wrong type: already reported
    if pool_max is None or inventory is None:
        return None
    if pool_max > inventory.size:
        fields.fail("pool-max", f"must not exceed inventory.size ({inventory.size}) (got {pool_max})")
        return None
    if inventory.warm > pool_max:
        fields.fail("pool-max", f"must be at least inventory.warm ({inventory.warm}), since warm "
                                f"members are running members (got {pool_max})")
        return None
    return Bounds(pool_max=pool_max, active_hours=hours)


def load_strategy(path: str | Path, name: str | None = None) -> Strategy:
    """Load one strategy file; ``name`` defaults to the file stem (``gg strategy apply NAME
    FILE`` passes its own). The first problem (by line) is raised as AirspaceError."""
    return read_strategy(read_yaml(path), name or Path(path).stem, airspace_of(path)).unwrap()


def strategy_from_mapping(name: str, mapping: Any, source: str = "<request>") -> Strategy:
    """Validate an already-parsed strategy (e.g. posted over HTTP); errors carry no line."""
    return read_strategy(document_from_mapping(mapping, source), name).unwrap()
