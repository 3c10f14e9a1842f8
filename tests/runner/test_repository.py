"""What a runner decides before the agent starts: which agent, which repository, or neither."""

from __future__ import annotations

from pathlib import Path

import pytest

from gg.api.runners import FlightForRunner, RunnerProfile
from gg.client import Client
from gg.runner.fleet import FleetState
from gg.runner.flight import FlightRun, Lease
from gg.runner.repository import CannotFly, prepare


def run_for(tmp_path: Path, fleet: FleetState | None = None, **flight) -> FlightRun:
    flight = {"id": "f_1", "command": ["echo hi"], "agent": "shell", "repo": None, **flight}
    return FlightRun(client=Client("http://127.0.0.1:9"), flight=FlightForRunner(**flight),
                     lease=Lease("f_1", 1, 60.0, 20.0, 0.0), workspace_root=tmp_path,
                     fleet=fleet, say=lambda line: None)


def enrolled_fleet(tmp_path: Path, in_force: dict | None) -> tuple[FleetState, list]:
    fleet = FleetState(tmp_path / "state", Client("http://127.0.0.1:9"), say=lambda line: None)
    fleet.absorb(RunnerProfile(name="ui", in_force=in_force))
    refreshed: list = []
    fleet.refresh = lambda: refreshed.append(True)
    return fleet, refreshed


PROFILE = {"name": "ui", "agent": "shell", "roles": ["runner"], "environment": "ui",
           "repository_hosts": ["git.example.com"], "destinations": []}


def test_shell_runs_the_command_in_the_workspace(tmp_path):
    assert prepare(run_for(tmp_path), tmp_path) == ["/bin/sh", "-c", "echo hi"]


def test_an_unknown_agent_is_handed_back_returned_with_the_reason(tmp_path):
    with pytest.raises(CannotFly) as refused:
        prepare(run_for(tmp_path, agent="/usr/bin/evil"), tmp_path)
    assert (refused.value.outcome, refused.value.reason) == (
        "returned", "this runner has no agent /usr/bin/evil")


@pytest.mark.parametrize("in_force, flight, reason", [
    (None, {}, "fleet profile ui is not in force on this runner"),
    (PROFILE, {"agent": "codex"}, "this runner's fleet profile ui runs agent shell, not codex"),
    (PROFILE, {"repo": "https://elsewhere.example.com/a/b"},
     "fleet profile ui does not list repository host elsewhere.example.com"),
])
def test_an_enrolled_runner_returns_what_its_profile_does_not_allow(tmp_path, in_force, flight,
                                                                    reason):
    fleet, refreshed = enrolled_fleet(tmp_path, in_force)
    with pytest.raises(CannotFly) as refused:
        prepare(run_for(tmp_path, fleet, **flight), tmp_path / "ws")
    assert (refused.value.outcome, refused.value.reason) == ("returned", reason)
    assert refreshed == [True]  # the control plane is told what this machine really has
    assert not (tmp_path / "ws").exists()


def test_a_flight_may_not_clone_from_inside_the_runners_state_directory(tmp_path):
    fleet, _ = enrolled_fleet(tmp_path, PROFILE)
    other = fleet.state_dir / "workspaces" / "f_other-1"
    other.mkdir(parents=True)
    with pytest.raises(CannotFly) as refused:
        prepare(run_for(tmp_path, fleet, repo=str(other)), tmp_path / "ws")
    assert refused.value.outcome == "failed"
    assert "inside this runner's state directory" in refused.value.reason


def _imports(package: Path) -> dict[str, set[str]]:
    """Module -> the gg modules it imports, read from the source (``TYPE_CHECKING`` too)."""
    import ast

    root = package.parents[1]
    names = {".".join(p.relative_to(root).with_suffix("").parts): p for p in package.glob("*.py")}
    graph = {}
    for name, path in names.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                found |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
        graph[name] = found & set(names) - {name}
    return graph


def test_no_module_of_the_runner_imports_one_that_imports_it_back():
    import gg.runner

    graph = _imports(Path(gg.runner.__file__).parent)
    loops = sorted((a, b) for a in graph for b in graph[a] if a < b and a in graph[b])
    assert loops == [], loops
