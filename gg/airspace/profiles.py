"""``airspace/fleet/NAME.yaml``: one fleet profile (SPEC 9); NAME is the file stem.

::

    purpose: builds and tests the web UI            # required
    roles: [runner]                                 # required, runner and/or maintain
    environment: ui                                 # required
    agent: shell                                    # default shell
    repository-hosts: [git.example.com]             # default []
    destinations: ["https://git.example.com/acme/ui.git"]
    trackers: []
    credentials: [git.example.com/acme/ui, npm-token]
    sweeps: false                                   # default false
    ownership: organisation                         # organisation | open | claimed
    policy: {isolation: sandbox, egress: all, workers: 1}
                                                    # policy.image: what isolation container
                                                    # runs flights from (a change opens a gate)
    # egress allowlist: policy: {egress: allowlist, allow: [git.example.com:443, 10.0.0.0/8]}

The value rules live in ``gg.domain.profiles`` so the server, which receives profiles over
HTTP (``profile_from_mapping``), accepts exactly what this loader accepts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gg.airspace.errors import AirspaceError
from gg.airspace.fields import Checked, Fields, sort_errors
from gg.airspace.yamlfile import Document, document_from_mapping, read_yaml
from gg.domain.egress import parse_entry
from gg.domain.policy import image_problem
from gg.domain.profiles import (
    DEFAULT_AGENT,
    EGRESSES,
    ISOLATIONS,
    MAX_WORKERS,
    OWNERSHIPS,
    ROLES,
    Policy,
    Profile,
    agent_problem,
    credential_problem,
    destination_problem,
    host_problem,
    item_key,
    name_problem,
)

__all__ = ["load_profile", "profile_from_mapping", "read_profile"]

# Listed the way people say them (most closed first); gg.domain.policy lists them weakest first.
_EGRESS_CHOICES = tuple(reversed(EGRESSES))
_NEEDS = "a profile needs at least purpose, roles and environment"


def read_profile(doc: Document, name: str) -> Checked[Profile]:
    """Every problem in a parsed profile document, or the Profile it describes."""
    errors: list[AirspaceError] = []
    problem = name_problem(name)
    if problem:
        errors.append(AirspaceError(f"the profile name {problem}", file=doc.file))
    fields = Fields.top(doc, errors, _NEEDS)
    if fields is None:
        return Checked(None, sort_errors(errors))

    values: dict[str, Any] = {
        "purpose": fields.text("purpose", required=True),
        "roles": fields.texts("roles", required=True, non_empty=True, options=ROLES),
        "environment": fields.text("environment", required=True, check=name_problem),
        "agent": fields.text("agent", default=DEFAULT_AGENT, check=agent_problem),
        "repository_hosts": fields.texts(
            "repository-hosts", check=host_problem, normalise=str.lower,
            same=lambda v: item_key("repository-hosts", v)),
        "destinations": fields.texts(
            "destinations", check=destination_problem,
            same=lambda v: item_key("destinations", v)),
        "trackers": fields.texts("trackers"),
        "credentials": fields.texts(
            "credentials", check=credential_problem,
            same=lambda v: item_key("credentials", v)),
        "sweeps": fields.boolean("sweeps", default=False),
        "ownership": fields.choice("ownership", OWNERSHIPS, default="organisation"),
    }
    policy = _read_policy(fields.section("policy"))
    fields.finish(belongs={"isolation": "policy", "egress": "policy", "workers": "policy",
                            "image": "policy", "allow": "policy"})
    if errors or policy is None or any(v is None for v in values.values()):
        return Checked(None, sort_errors(errors))
    return Checked(Profile(name=name, policy=policy, **values))


def _read_policy(fields: Fields | None) -> Policy | None:
    if fields is None:
        return Policy()
    isolation = fields.choice("isolation", ISOLATIONS, default=Policy.isolation)
    egress = fields.choice("egress", _EGRESS_CHOICES, default=Policy.egress)
    workers = fields.integer("workers", default=Policy.workers, minimum=1, maximum=MAX_WORKERS)
    image = fields.text("image", check=_image_problem)
    bad_image = "image" in fields.data and image is None
    allow = fields.texts("allow", check=allow_problem, same=allow_key)
    fields.finish()
    if isolation is None or egress is None or workers is None or bad_image or allow is None:
        return None
    return Policy(isolation=isolation, egress=egress, workers=workers, image=image,
                  allow=tuple(allow))


def _image_problem(image: str) -> str | None:
    problem = image_problem(image)
    return None if problem is None else problem.removeprefix("image ")


def allow_problem(value: str) -> str | None:
    try:
        parse_entry(value)
    except ValueError as exc:
        return str(exc)
    return None


def allow_key(value: str) -> str:
    try:
        return parse_entry(value).text
    except ValueError:
        return value


def load_profile(path: str | Path) -> Profile:
    """Load one ``fleet/NAME.yaml``; the first problem (by line) is raised as AirspaceError."""
    return read_profile(read_yaml(path), Path(path).stem).unwrap()


def profile_from_mapping(name: str, mapping: Any, source: str = "<request>") -> Profile:
    """Validate an already-parsed profile (e.g. posted over HTTP) with the same rules and
    sentences as a file; the errors carry no line."""
    return read_profile(document_from_mapping(mapping, source), name).unwrap()
