"""Pool strategy files: the SPEC 12 shape, defaults, and cross-field bounds."""

from __future__ import annotations

import pytest

from gg.airspace import AirspaceError, load_strategy, strategy_from_mapping
from gg.domain.strategies import (
    Bounds,
    Build,
    Image,
    Inventory,
    Strategy,
    parse_active_hours,
)

DIGEST = "sha256:" + "ab" * 32
GOOD = f"""\
environment: ui
inventory: {{name: ui-pool, size: 6, warm: 2}}
image: {{ref: ui-runner, digest: "{DIGEST}"}}
bounds: {{pool-max: 4, active-hours: "08:00-20:00 Europe/Berlin"}}
build: {{context: images/ui}}
driver: process
"""


def write(tmp_path, text: str, name: str = "ui"):
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return path


def error_of(tmp_path, text: str) -> AirspaceError:
    with pytest.raises(AirspaceError) as caught:
        load_strategy(write(tmp_path, text))
    return caught.value


def test_the_spec_example_loads(tmp_path):
    assert load_strategy(write(tmp_path, GOOD)) == Strategy(
        name="ui", environment="ui", inventory=Inventory("ui-pool", 6, 2),
        image=Image("ui-runner", DIGEST),
        bounds=Bounds(4, parse_active_hours("08:00-20:00 Europe/Berlin")),
        build=Build("images/ui"), driver="process")


def test_the_name_given_to_apply_wins_over_the_file_stem(tmp_path):
    assert load_strategy(write(tmp_path, GOOD, name="file"), name="web").name == "web"


def test_a_minimal_strategy_takes_its_defaults(tmp_path):
    strategy = load_strategy(write(tmp_path, "environment: ui\ninventory: {name: p, size: 3}\n"
                                             "image: {ref: ui-runner}\n"))
    assert strategy.inventory.warm == 0 and strategy.image.digest is None
    assert strategy.bounds == Bounds(pool_max=3) and strategy.build is None
    assert strategy.driver == "process"


@pytest.mark.parametrize("old,new,line,key,fragment", [
    ("active-hours: \"08:00-20:00 Europe/Berlin\"", "active-hours: \"8-20\"", 4,
     "bounds.active-hours", "is not a window"),
    ("Europe/Berlin", "Europe/Atlantis", 4, "bounds.active-hours", "is not a time zone"),
    ("08:00-20:00 Europe/Berlin", "08:00-20:00", 4, "bounds.active-hours", "names no time zone"),
    ("08:00-20:00", "08:00-25:00", 4, "bounds.active-hours", "not a time of day"),
    ("warm: 2", "warm: 7", 2, "inventory.warm", "must not exceed size (6)"),
    ("pool-max: 4", "pool-max: 0", 4, "bounds.pool-max", "must be from 1"),
    ("pool-max: 4", "pool-max: 7", 4, "bounds.pool-max", "must not exceed inventory.size (6)"),
    ("pool-max: 4", "pool-max: 1", 4, "bounds.pool-max", "at least inventory.warm (2)"),
    ("driver: process", "driver: kubernetes", 6, "driver", "must be one of process, podman, docker"),
    (f'digest: "{DIGEST}"', 'digest: "sha256:abc"', 3, "image.digest", "64 lowercase hex"),
    ("size: 6", "size: six", 2, "inventory.size", "whole number"),
    ("name: ui-pool", "name: UI Pool", 2, "inventory.name", "lowercase"),
    ("build: {context: images/ui}", "build: {context: images/ui, dockerfile: x}", 5,
     "build.dockerfile", "not a known key"),
    ("environment: ui", "environment: ui\npool-max: 3", 2, "pool-max", "belongs under bounds"),
])
def test_bad_strategies_are_refused_with_line_and_key(tmp_path, old, new, line, key, fragment):
    assert old in GOOD
    error = error_of(tmp_path, GOOD.replace(old, new))
    assert (error.line, error.key) == (line, key), str(error)
    assert fragment in error.problem


def test_a_strategy_without_inventory_or_image_names_both():
    with pytest.raises(AirspaceError) as caught:
        strategy_from_mapping("ui", {"environment": "ui"})
    assert caught.value.key == "inventory" and caught.value.line is None


# -- build.context stays inside the airspace directory ----------------------------------------

STRATEGY = "environment: ui\ninventory: {name: ui-pool, size: 1}\nimage: {ref: ui}\nbuild:\n"


def _in_airspace(tmp_path, context: str):
    base = tmp_path / "airspace"
    (base / "strategies").mkdir(parents=True, exist_ok=True)
    (base / "images" / "ui").mkdir(parents=True, exist_ok=True)
    path = base / "strategies" / "ui.yaml"
    path.write_text(STRATEGY + f"  context: {context}\n")
    return base, path


@pytest.mark.parametrize("context", ["images/ui", "./images/../images/ui", "images"])
def test_a_build_context_inside_the_airspace_directory_loads(tmp_path, context):
    base, path = _in_airspace(tmp_path, context)
    assert load_strategy(path).build == Build(context=context)
    absolute = str(base / "images" / "ui")  # an absolute path inside it is inside it
    path.write_text(STRATEGY + f"  context: {absolute}\n")
    assert load_strategy(path).build == Build(context=absolute)


@pytest.mark.parametrize("context,fragment", [
    ("../..", 'must stay inside the airspace directory (got "../..")'),
    ("images/../../elsewhere", "must stay inside the airspace directory"),
    ("..", "must stay inside the airspace directory"),
    ("/etc", 'must stay inside the airspace directory {base} (got "/etc")'),
    ("{outside}", "must stay inside the airspace directory {base} (got"),
    ("images/escape", "must stay inside the airspace directory {base}; a symbolic link leads it "
                      "to {outside}"),
])
def test_a_build_context_outside_the_airspace_directory_is_refused(tmp_path, context, fragment):
    outside = tmp_path / "secrets"
    outside.mkdir()
    base, path = _in_airspace(tmp_path, context.format(outside=outside))
    (base / "images" / "escape").symlink_to(outside)
    with pytest.raises(AirspaceError) as caught:
        load_strategy(path)
    error = caught.value
    assert (error.file, error.line, error.key) == (str(path), 5, "build.context")
    assert fragment.format(base=base, outside=outside) in error.problem


def test_a_build_context_in_a_loop_of_symbolic_links_is_refused_not_a_crash(tmp_path):
    base, path = _in_airspace(tmp_path, "images/loop")
    (base / "images" / "loop").symlink_to(base / "images" / "loop")
    with pytest.raises(AirspaceError) as caught:
        load_strategy(path)
    assert caught.value.key == "build.context" and "loop of symbolic links" in caught.value.problem


def test_a_strategy_kept_outside_strategies_has_its_own_directory_as_airspace(tmp_path):
    (tmp_path / "ctx").mkdir()
    path = write(tmp_path, STRATEGY + "  context: ctx\n")
    assert load_strategy(path).build == Build(context="ctx")
    path.write_text(STRATEGY + "  context: ../ctx\n")
    assert error_of(tmp_path, STRATEGY + "  context: ../ctx\n").key == "build.context"


def test_a_posted_strategy_may_not_climb_out_with_dot_dot():
    mapping = {"environment": "ui", "inventory": {"name": "p", "size": 1}, "image": {"ref": "x"},
               "build": {"context": "images/../../.."}}
    with pytest.raises(AirspaceError) as caught:
        strategy_from_mapping("ui", mapping)
    assert caught.value.key == "build.context" and caught.value.line is None


def test_the_group_key_names_the_runner_group_members_join_and_defaults_to_default(tmp_path):
    assert load_strategy(write(tmp_path, GOOD)).group == "default"
    placed = load_strategy(write(tmp_path, GOOD + "group: dc1-pool\n"))
    assert placed.group == "dc1-pool"
    assert Strategy.from_dict(placed.to_dict()) == placed
    err = error_of(tmp_path, GOOD + "group: 'no spaces'\n")
    assert "group" in str(err) and "a group name is" in str(err)


# -- scale: grow and shrink from demand --------------------------------------------------------

SCALED = f"""\
environment: ui
inventory: {{name: ui-pool, size: 8}}
image: {{ref: ui-runner, digest: "{DIGEST}"}}
bounds: {{pool-max: 6}}
scale:
  min: 0
  max: 6
  idle-after: 5m
  cool-down: 30s
"""


def test_a_scale_section_loads_with_durations_and_round_trips(tmp_path):
    from gg.domain.pool_scaling import Scale

    strategy = load_strategy(write(tmp_path, SCALED))
    assert strategy.scale == Scale(min=0, max=6, idle_after=300.0, step=None, cool_down=30.0)
    assert strategy.pool_spec().scale == strategy.scale
    assert Strategy.from_dict(strategy.to_dict()) == strategy
    assert load_strategy(write(tmp_path, GOOD)).scale is None


@pytest.mark.parametrize("old,new,line,key,fragment", [
    ("  max: 6", "  max: 7", 7, "scale.max", "must not exceed bounds.pool-max (6)"),
    ("min: 0", "min: 9", 7, "scale.max", "must be at least min (9)"),
    ("min: 0", "min: -1", 6, "scale.min", "must be from 0"),
    ("  idle-after: 5m\n", "", 5, "scale.idle-after", "is required"),
    ("idle-after: 5m", "idle-after: soon", 8, "scale.idle-after", "is not a duration"),
    ("cool-down: 30s", "cool-down: 30s\n  step: 0", 10, "scale.step", "must be from 1"),
    ("cool-down: 30s", "cool-down: 30s\n  burst: 3", 10, "scale.burst", "not a known key"),
    ("size: 8}", "size: 8, warm: 2}", 5, "scale", "replaces inventory.warm"),
    ("environment: ui", "environment: ui\nidle-after: 3", 2, "idle-after",
     "belongs under scale"),
])
def test_a_bad_scale_section_is_refused_with_line_and_key(tmp_path, old, new, line, key,
                                                          fragment):
    assert old in SCALED
    error = error_of(tmp_path, SCALED.replace(old, new))
    assert (error.line, error.key) == (line, key), str(error)
    assert fragment in error.problem


# -- driver command: executables in the maintainer's commands directory ------------------------

ON_HOSTS = f"""\
environment: ui
inventory: {{name: ui-pool, size: 2}}
image: {{ref: ui-runner, digest: "{DIGEST}"}}
driver: command
command: {{create: create-host, delete: delete-host, list: list-hosts}}
"""


def test_driver_command_names_its_three_executables_and_round_trips(tmp_path):
    strategy = load_strategy(write(tmp_path, ON_HOSTS))
    assert strategy.command == {"create": "create-host", "delete": "delete-host",
                                "list": "list-hosts"}
    assert Strategy.from_dict(strategy.to_dict()) == strategy
    assert strategy.join_within is None  # the default: MEMBER_CODE_TTL


def test_join_within_gives_the_command_drivers_machines_their_own_deadline(tmp_path):
    strategy = load_strategy(write(tmp_path, ON_HOSTS.replace("list-hosts}",
                                                              "list-hosts, join-within: 2m}")))
    assert strategy.join_within == 120.0
    assert Strategy.from_dict(strategy.to_dict()) == strategy


@pytest.mark.parametrize("old,new,line,key,fragment", [
    ("list-hosts}", "list-hosts, join-within: soon}", 5, "command.join-within",
     "is not a duration"),
    ("list-hosts}", "list-hosts, join-within: 0}", 5, "command.join-within",
     "must be from 1 s to 60 minutes"),
    ("list-hosts}", "list-hosts, join-within: 2h}", 5, "command.join-within",
     "must be from 1 s to 60 minutes: a machine's one-use member code lives that long"),
    ("list-hosts}", "list-hosts, join-within: -5}", 5, "command.join-within",
     "must not be negative"),
    ("create: create-host", "create: /usr/bin/rm", 5, "command.create",
     "must be a file name in the maintainer's commands directory"),
    ("create: create-host", "create: ../x", 5, "command.create", "must be a file name"),
    (", list: list-hosts", "", 5, "command.list", "is required"),
    ("command: {create: create-host, delete: delete-host, list: list-hosts}\n", "", 4,
     "driver", "command needs a command section"),
    ("driver: command", "driver: process", 5, "command", "is only for driver command"),
])
def test_a_bad_command_section_is_refused_with_line_and_key(tmp_path, old, new, line, key,
                                                            fragment):
    assert old in ON_HOSTS
    error = error_of(tmp_path, ON_HOSTS.replace(old, new))
    assert (error.line, error.key) == (line, key), str(error)
    assert fragment in error.problem
