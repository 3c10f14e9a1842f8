"""Whether a runner could ever do a flight's work, whatever state it is in right now.

Labels say where a flight may run; fitness says whether this machine *can* do it at all. A
runner that is unfit for a flight is never offered it (``gg.domain.matching.blockers`` adds
``Block.UNFIT``), and the waiting sentence does not count it among the runners that could
take it. Without this rule a machine lacking, say, the repository's credential would be offered
the flight, hand it back ``returned``, and be offered it again at once, forever.

A runner is unfit for a flight when, in this order:

1. the flight is a maintenance flight: those are never flown, they land when the machine
   confirms every missing item (``gg.control.maintenance``);
2. it is enrolled and its fleet profile is not in force (first apply not cleared yet);
3. it is enrolled and the profile in force does not give it the ``runner`` role;
4. it is enrolled and the flight names another agent than its profile's;
5. it is enrolled and the flight's repository is on a host the profile does not list in
   ``repository-hosts`` (a local path is not a host: see ``repository_host``);
6. it does not have the flight's agent (the runner reports the agents it has at check-in;
   a runner that never reported has ``shell`` only);
7. the flight's repository needs a credential (``credential_needed``) and the runner has not
   registered one for exactly that repository's slug.

Pure: the runner row carries what the control plane knows (``agents`` reported,
``credential_refs`` registered, ``profile_in_force`` synced from its fleet profile).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from gg.domain.flights import Flight
from gg.domain.repos import is_local_slug, repo_slug
from gg.domain.runners import Runner

__all__ = ["credential_missing_for", "credential_needed", "repo_problem", "repository_host",
           "runner_agents", "unfit"]

DEFAULT_AGENTS = ("shell",)
MAINTENANCE = "maintenance"


def repo_problem(url: str) -> str | None:
    """Why ``url`` cannot be a flight's repository, or None. The control plane must never
    hold a secret, so a URL carrying a password (or, for http and https, a user) is refused
    outright; the error never repeats the URL."""
    if "://" in url:
        try:
            parts = urlsplit(url)
            password, user = parts.password, parts.username
        except ValueError:
            return "the repository URL cannot be read"
        if password is not None or (user and parts.scheme.lower() in ("http", "https")):
            return ("a repository URL must not carry a user or password; the runner's own "
                    "credential store supplies it (gg credential add --repo SLUG)")
    try:
        repo_slug(url)
    except ValueError as exc:
        return str(exc)
    return None


def credential_needed(repo: str | None) -> str | None:
    """The slug of the credential a flight's repository needs, or None.

    The rule is deliberately simple: every repository reached over the network needs one,
    a local repository (an absolute path or ``file://``) does not. gg cannot know in advance
    whether a host would let an anonymous clone through, and guessing wrong would send the
    flight to a machine that then fails; an operator who wants a public repository cloned
    registers any token for it (``gg credential add --repo SLUG``).
    """
    if not repo:
        return None
    try:
        slug = repo_slug(repo)
    except ValueError:
        return None
    return None if is_local_slug(slug) else slug


def repository_host(repo: str | None) -> str | None:
    """``host`` or ``host:port`` of a network repository (its slug's first part), else None."""
    slug = credential_needed(repo)
    return slug.split("/", 1)[0] if slug else None


def runner_agents(runner: Runner) -> tuple[str, ...]:
    return tuple(runner.agents) if runner.agents else DEFAULT_AGENTS


def _repo_refs(runner: Runner) -> set[str]:
    return {str(r.get("ref")) for r in runner.credential_refs or ()
            if isinstance(r, dict) and r.get("kind") == "repo"}


def unfit(flight: Flight, runner: Runner) -> str | None:
    """Why ``runner`` can never do ``flight`` as things stand, as the end of a sentence
    ("... because <reason>"), or None when it could."""
    if flight.kind == MAINTENANCE:
        return "a maintenance flight is never flown; it lands when its machine confirms what is missing"
    if runner.kind == "enrolled":
        profile: dict[str, Any] = runner.profile_in_force or {}
        name = runner.profile or "?"
        if not profile:
            return f"its fleet profile {name} is not in force"
        if "runner" not in profile.get("roles", ()):
            return f"its fleet profile {name} does not give it the runner role"
        if flight.agent != profile.get("agent"):
            return f"its fleet profile {name} runs agent {profile.get('agent')}, not {flight.agent}"
        host = repository_host(flight.repo)
        hosts = {str(h).lower() for h in profile.get("repository_hosts", ())}
        if host is not None and host.lower() not in hosts:
            return f"its fleet profile {name} does not list repository host {host}"
    if flight.agent not in runner_agents(runner):
        return f"it does not have agent {flight.agent}"
    slug = credential_needed(flight.repo)
    if slug is not None and slug not in _repo_refs(runner):
        return f"it holds no credential for repository {slug}"
    return None


def credential_missing_for(repo: str | None, runners: Iterable[Runner]) -> str | None:
    """The slug when the repository needs a credential and no live runner registered one
    (SPEC 7 sentence 5), else None."""
    slug = credential_needed(repo)
    if slug is None:
        return None
    for runner in runners:
        if runner.retired_at is None and slug in _repo_refs(runner):
            return None
    return slug
