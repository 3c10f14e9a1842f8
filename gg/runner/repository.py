"""A flight's agent and repository: what happens before the agent starts and after it ends.

``gg.runner.flight`` calls two functions and knows nothing else about repositories::

    argv = prepare(run, workspace)   before: resolve the agent by name from this machine's
                                     configuration, check the repository's host against the
                                     profile, clone it into the (empty) workspace
    finish(run, workspace)           after: report the commits the agent made, push them to
                                     the repository they came from when the profile allows it

Either may raise ``CannotFly(outcome, reason)``; the flight is then handed back with that
outcome and reason:

    returned   this machine cannot do it, another may: unknown agent, agent or repository host
               not allowed by the profile, credential missing (the control plane's view of
               this machine was stale; it is refreshed before handing back, so the flight is
               not offered here again)
    failed     it cannot be done as asked: the repository was not found, refused the
               credential, could not be reached, or a push to an allowed destination failed

Pushing: commits are pushed only when the agent exited 0, to ``refs/heads/gg/<flight>`` of
the flight's own repository, and only when ``gg.domain.repos.destination_allowed`` finds it
among the profile's ``destinations``. A runner without a fleet profile (registered, not
enrolled) has no destinations, so it never pushes. Each commit is a ``commit`` fact; a push is
a ``pushed`` fact; a push not made is a ``note`` fact saying why.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from gg.api.runners import FlightForRunner
from gg.domain.fitness import repository_host
from gg.domain.flights import Outcome
from gg.domain.repos import destination_allowed, is_local_slug, repo_slug
from gg.runner import agents as agent_config
from gg.runner import git

__all__ = ["CannotFly", "Run", "finish", "prepare"]

CLONE_TIMEOUT = 600.0
PUSH_TIMEOUT = 300.0
MAX_COMMIT_FACTS = 200


class Run(Protocol):
    """What this module needs of the flight being run (``gg.runner.flight.FlightRun`` is one).

    Named here rather than imported, so the module that runs a flight depends on this one and
    never the other way round.
    """

    flight: FlightForRunner
    fleet: Any  # gg.runner.fleet.FleetState, or None for a runner that is not enrolled
    base: str | None  # set here: the commit the repository was cloned at
    exit_code: int | None

    @property
    def say(self) -> Callable[[str], None]: ...  # read only: mypy takes FlightRun's for a method

    @property
    def id(self) -> str: ...

    def _report(self, facts: list[dict]) -> None: ...


class CannotFly(Exception):
    def __init__(self, outcome: Outcome, reason: str) -> None:
        super().__init__(reason)
        self.outcome = Outcome(outcome).value
        self.reason = reason


def prepare(run: Run, workspace: Path) -> list[str]:
    """The argv to run; the repository (if any) is cloned into ``workspace`` first."""
    flight = run.flight
    fleet = run.fleet
    enrolled, name, profile = fleet.profile() if fleet is not None else (False, None, None)
    wanted = flight.agent or agent_config.SHELL
    if enrolled:
        if not profile:
            _refresh(run)
            raise CannotFly(Outcome.RETURNED,
                            f"fleet profile {name} is not in force on this runner")
        if wanted != profile.get("agent"):
            _refresh(run)
            raise CannotFly(Outcome.RETURNED, f"this runner's fleet profile {name} runs agent "
                                        f"{profile.get('agent')}, not {wanted}")
    state_dir = fleet.state_dir if fleet is not None else None
    try:
        known = agent_config.load_agents(state_dir) if state_dir else {
            agent_config.SHELL: agent_config.SHELL_AGENT}
    except agent_config.AgentError as exc:
        raise CannotFly(Outcome.RETURNED, f"this runner's agents file is broken: {exc}") from None
    agent = known.get(wanted)
    if agent is None or not agent_config.present(agent):
        _refresh(run)
        raise CannotFly(Outcome.RETURNED, f"this runner has no agent {wanted}")
    repo = flight.repo
    if repo:
        _clone(run, repo, workspace, state_dir, name if enrolled else None, profile)
    return agent_config.argv_for(agent, list(flight.command), workspace=workspace,
                                 flight_id=run.id)


def _clone(run: Run, repo: str, workspace: Path, state_dir: Path | None,
           profile_name: str | None, profile: dict | None) -> None:
    try:
        slug = repo_slug(repo)
    except ValueError as exc:
        raise CannotFly(Outcome.FAILED, f"--repo: {exc}") from None
    host = repository_host(repo)
    if profile_name is not None and host is not None:
        hosts = {str(h).lower() for h in (profile or {}).get("repository_hosts", ())}
        if host.lower() not in hosts:
            _refresh(run)
            raise CannotFly(Outcome.RETURNED, f"fleet profile {profile_name} does not list "
                                        f"repository host {host}")
    if is_local_slug(slug) and state_dir is not None and \
            _inside(Path(slug), Path(state_dir)):
        raise CannotFly(Outcome.FAILED, f"{slug} is inside this runner's state directory; "
                                  "a flight may not clone another flight's workspace")
    if state_dir is None:
        raise CannotFly(Outcome.RETURNED, "this runner cannot clone repositories")
    try:
        result = git.clone(repo, workspace, state_dir=state_dir, timeout=CLONE_TIMEOUT)
    except git.GitError as exc:
        if exc.reason == "credential_missing":
            if run.fleet is not None:
                run.fleet.sync_credentials()
            raise CannotFly(Outcome.RETURNED, f"this runner holds no credential for repository "
                                        f"{slug}") from None
        raise CannotFly(Outcome.FAILED, str(exc)[:480]) from None
    run.base = result.head
    head = result.head[:12] or "(empty)"
    run._report([_note(f"cloned {slug} at {head}", repository=slug, head=result.head)])


def finish(run: Run, workspace: Path) -> None:
    """Report the agent's commits and push them where the profile allows."""
    repo = run.flight.repo
    if not repo or run.base is None:
        return
    try:
        commits = git.commits_since(workspace, run.base)
    except git.GitError as exc:
        run._report([_note(f"cannot list the commits: {exc.sentence}")])
        return
    facts = [{"kind": "commit", "body": dict(c)} for c in commits[-MAX_COMMIT_FACTS:]]
    if len(commits) > MAX_COMMIT_FACTS:
        facts.insert(0, {"kind": "note", "body": {
            "text": f"{len(commits)} commits; the newest {MAX_COMMIT_FACTS} are listed"}})
    if facts:
        run._report(facts)
    if not commits:
        return
    slug = repo_slug(repo)
    if run.exit_code != 0:
        run._report([_note(f"not pushed to {slug}: the agent failed (exit {run.exit_code})")])
        return
    fleet = run.fleet
    _, name, profile = fleet.profile() if fleet is not None else (False, None, None)
    allowed = list((profile or {}).get("destinations", ()))
    if not destination_allowed(repo, allowed):
        who = f"fleet profile {name}'s destinations" if name else \
            "any fleet profile (this runner is not enrolled)"
        run._report([_note(f"not pushed: {slug} is not among {who}", destination=slug,
                           refused=True)])
        return
    branch = f"gg/{run.id}"
    try:
        pushed = git.push(workspace, repo, state_dir=fleet.state_dir, branch=branch,
                          timeout=PUSH_TIMEOUT)
    except git.GitError as exc:
        raise CannotFly(Outcome.FAILED, f"push to {slug} failed: {exc.sentence}") from None
    run._report([{"kind": "pushed", "body": {"destination": pushed.destination,
                                             "branch": pushed.branch, "head": pushed.head,
                                             "commits": len(commits)}}])


def _note(text: str, **extra) -> dict:
    return {"kind": "note", "body": {"text": text, **extra}}


def _refresh(run: Run) -> None:
    """Tell the control plane what this machine really has, so it stops offering the flight."""
    if run.fleet is not None:
        try:
            run.fleet.refresh()
        except Exception as exc:  # a refresh is a courtesy; the hand-back still happens
            run.say(f"{run.id}: could not refresh the control plane's view: {exc}")


def _inside(path: Path, directory: Path) -> bool:
    try:
        path.resolve().relative_to(directory.resolve())
        return True
    except ValueError:
        return False
