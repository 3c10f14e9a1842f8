"""Fleet profiles: what one kind of enrolled machine is for and what it may do.

A profile is written as ``airspace/fleet/NAME.yaml`` (read by ``gg.airspace.profiles``) and
stored by the control plane as ``Profile.to_dict()``. This module holds the value rules that
both the YAML loader and the server need (what a name, host, destination or credential
reference looks like) so the two can never accept different things, and the *canonical key*
of each list item, so that re-spelling an item (``GIT.example.com`` for ``git.example.com``,
an ssh URL for the https URL of one repository) is not mistaken for adding a new one.

A profile's ``policy`` is the one ``gg.domain.policy.Policy`` every runner is assigned; its
level orders (weakest first) are what ``gg.domain.profile_gate`` uses to tell loosening from
tightening.

Only the standard library: these are pure rules.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gg.domain.policy import EGRESSES, ISOLATIONS, MAX_WORKERS, Policy
from gg.domain.repos import repo_slug
from gg.domain.runners import OWNERSHIPS

__all__ = [
    "AGENT_PATTERN",
    "DEFAULT_AGENT",
    "EGRESSES",
    "ISOLATIONS",
    "LIST_FIELDS",
    "MAX_WORKERS",
    "NAME_PATTERN",
    "OWNERSHIPS",
    "ROLES",
    "Policy",
    "Profile",
    "agent_problem",
    "credential_problem",
    "destination_problem",
    "host_problem",
    "item_key",
    "name_problem",
]

ROLES = ("runner", "maintain")
DEFAULT_AGENT = "shell"

NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
AGENT_PATTERN = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
_HOST_LABEL = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
_URL_PASSWORD = re.compile(r"://[^/@\s]*:[^/@\s]*@")
_CREDENTIAL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")

# The list fields of a profile, wire name -> (attribute, noun used in sentences).
LIST_FIELDS = {
    "roles": ("roles", "role"),
    "repository-hosts": ("repository_hosts", "repository host"),
    "destinations": ("destinations", "destination"),
    "trackers": ("trackers", "tracker"),
    "credentials": ("credentials", "credential"),
}


def takes_flights(profile_in_force: dict[str, Any] | None) -> bool:
    """Whether a runner serves its environment's flights: a registered runner (no profile)
    does; an enrolled one only when its profile in force has the ``runner`` role (a
    maintain-only machine advertises its environment but never flies in it)."""
    if not profile_in_force:
        return True
    return "runner" in (profile_in_force.get("roles") or ())


def name_problem(name: str) -> str | None:
    """Why ``name`` is not a valid environment, profile or pool name, or None.

    Names end up in labels (``environment=NAME``), file names and URLs, so they are kept to
    a small alphabet that is safe in all three.
    """
    if NAME_PATTERN.match(name):
        return None
    return ("must be 1-63 lowercase letters, digits, - or _, starting with a letter "
            f"(got {_quote(name)})")


def agent_problem(agent: str) -> str | None:
    """Why ``agent`` is not an agent name, or None.

    The runner resolves an agent by name from its own configuration; a path sent from the
    control plane would let the server choose what runs on the machine, so paths are refused.
    """
    if AGENT_PATTERN.match(agent):
        return None
    if "/" in agent or "\\" in agent:
        return f"must be an agent name, not a path (got {_quote(agent)})"
    return ("must be an agent name: lowercase letters, digits, - or _, starting with a letter "
            f"(got {_quote(agent)})")


def host_problem(host: str) -> str | None:
    """Why ``host`` is not ``hostname``, ``hostname:port``, an IP address or ``[v6]:port``."""
    text = host.strip()
    name, port = text, None
    if text.startswith("["):
        end = text.find("]")
        name, rest = text[1:end] if end > 0 else "", text[end + 1:] if end > 0 else "?"
        if rest:
            if not rest.startswith(":"):
                return f"is not a host name or host:port (got {_quote(host)})"
            port = rest[1:]
        try:
            ipaddress.IPv6Address(name)
        except ValueError:
            return f"is not a valid IPv6 address in brackets (got {_quote(host)})"
    else:
        if text.count(":") == 1:
            name, port = text.split(":")
        elif ":" in text:
            return f"an IPv6 address must be written in brackets, like [::1]:22 (got {_quote(host)})"
        labels = name.lower().split(".")
        if len(name) > 253 or not all(_HOST_LABEL.match(label) for label in labels):
            return f"is not a host name or host:port (got {_quote(host)})"
    if port is not None and not (port.isdigit() and 1 <= int(port) <= 65535):
        return f"has a port that is not a number from 1 to 65535 (got {_quote(host)})"
    return None


def destination_problem(dest: str) -> str | None:
    """Why ``dest`` is not somewhere commits could be pushed (a git remote URL or an absolute
    path), or None. The same normalisation that checks pushes at run time decides here.

    A URL carrying a password is refused without repeating it: a profile lives in version
    control, and the push credential comes from the runner's own store anyway.
    """
    if _URL_PASSWORD.search(dest):
        return ("must not contain a password; push credentials come from the runner's "
                "credential store (gg credential add)")
    try:
        repo_slug(dest)
    except ValueError as e:
        return f"is not a git remote URL or absolute path: {e} (got {_quote(dest)})"
    return None


def credential_problem(ref: str) -> str | None:
    """Why ``ref`` is not a credential reference, or None.

    A reference names what ``gg credential add`` stores: a text with a ``/`` is a repository
    (``--repo SLUG``), anything else a named credential (``--name NAME``).
    """
    if "/" in ref:
        try:
            repo_slug(ref)
        except ValueError as e:
            return f"is not a repository reference: {e} (got {_quote(ref)})"
        return None
    if _CREDENTIAL_NAME.match(ref):
        return None
    return ("must be a credential name (letters, digits, ., - or _) or a repository such as "
            f"github.com/acme/widgets (got {_quote(ref)})")


def item_key(wire_field: str, value: str) -> str:
    """The canonical key of one list item: two items with one key are the same item.

    Hosts compare without case; destinations and repository credentials compare by their
    repository slug, so https and ssh spellings of one repository are one destination.
    """
    if wire_field == "repository-hosts":
        return value.strip().lower()
    if wire_field == "destinations" or (wire_field == "credentials" and "/" in value):
        try:
            return repo_slug(value)
        except ValueError:
            return value
    return value


@dataclass(frozen=True)
class Profile:
    """One fleet profile, as validated; lists are tuples so a profile can be compared and hashed.

    ``name`` is the file stem. ``repository_hosts`` are stored lower-cased; every other
    list item is kept as written (a destination must stay a URL the runner can push to).
    """

    name: str
    purpose: str
    roles: tuple[str, ...]
    environment: str
    agent: str = DEFAULT_AGENT
    repository_hosts: tuple[str, ...] = ()
    destinations: tuple[str, ...] = ()
    trackers: tuple[str, ...] = ()
    credentials: tuple[str, ...] = ()
    sweeps: bool = False
    ownership: str = "organisation"
    policy: Policy = field(default_factory=Policy)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able, with the YAML keys' ``-`` turned into ``_``."""
        return {
            "name": self.name,
            "purpose": self.purpose,
            "roles": list(self.roles),
            "environment": self.environment,
            "agent": self.agent,
            "repository_hosts": list(self.repository_hosts),
            "destinations": list(self.destinations),
            "trackers": list(self.trackers),
            "credentials": list(self.credentials),
            "sweeps": self.sweeps,
            "ownership": self.ownership,
            "policy": self.policy.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Profile:
        """The inverse of ``to_dict`` for data gg stored itself; missing optional keys take
        their defaults so rows written by an older gg still load. Not a validator: untrusted
        input goes through ``gg.airspace.profiles.profile_from_mapping``."""
        return cls(
            name=str(data["name"]),
            purpose=str(data["purpose"]),
            roles=tuple(data["roles"]),
            environment=str(data["environment"]),
            agent=str(data.get("agent", DEFAULT_AGENT)),
            repository_hosts=tuple(data.get("repository_hosts", ())),
            destinations=tuple(data.get("destinations", ())),
            trackers=tuple(data.get("trackers", ())),
            credentials=tuple(data.get("credentials", ())),
            sweeps=bool(data.get("sweeps", False)),
            ownership=str(data.get("ownership", "organisation")),
            policy=Policy.from_dict(data.get("policy") or {}),
        )


def _quote(text: str, limit: int = 60) -> str:
    shown = text if len(text) <= limit else text[: limit - 1] + "…"
    return '"' + shown.replace("\\", "\\\\").replace('"', '\\"') + '"'
