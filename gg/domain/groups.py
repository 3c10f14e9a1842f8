"""Runner groups, the attribute registry and the fleet-wide stop (SPEC section 17).

Every runner is in exactly one group (``default`` unless an enrolment token, a pool's
strategy or an admin says otherwise). A group carries the placement contract of its
runners:

- **attributes** ``k=v``: where its machines are or whose zone they serve. Keys are
  registered first (:class:`Attribute`); ``environment`` is reserved, because environments
  already place work by label.
- **bindings**: environments (``prod``) or repository prefixes (anything with ``/`` or
  ``:``, such as ``github.com/acme/``): work there is offered only to runners of groups
  bound to it.
- **exclusive**: its runners take only work that names the group, is bound to it, or
  selects attributes it has; never unconstrained overflow.
- **draining**: a durable flag; every member reads as draining and is offered nothing new.

Whether a given group may take a given flight is :func:`gg.domain.matching.placement_blocks`,
part of the one matching rule. This module holds the values and their validation. Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from gg.domain.repos import repo_slug

DEFAULT_GROUP = "default"
RESERVED_KEYS = ("environment",)
MAX_BINDINGS = 64
MAX_ATTRIBUTES = 64

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
_KEY = re.compile(r"^[a-z][a-z0-9_.-]{0,62}$")
_VALUE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,126}$")


@dataclass(frozen=True)
class Group:
    name: str
    attributes: Mapping[str, str] = field(default_factory=dict)
    bindings: tuple[str, ...] = ()
    exclusive: bool = False
    draining: bool = False
    drain_by: str | None = None
    drain_at: float | None = None
    updated_at: float | None = None
    updated_by: str | None = None

    def view(self) -> dict[str, Any]:
        return {"name": self.name, "attributes": dict(self.attributes),
                "bindings": list(self.bindings), "exclusive": self.exclusive,
                "draining": self.draining, "drain_by": self.drain_by, "drain_at": self.drain_at,
                "updated_at": self.updated_at, "updated_by": self.updated_by}


@dataclass(frozen=True)
class Attribute:
    key: str
    values: tuple[str, ...] = ()  # empty: any value


@dataclass(frozen=True)
class Placement:
    """The fleet-wide facts every seat reads: the groups by name, and whether (and by whom)
    the fleet is quiesced. One value per matching pass, shared by all its seats."""

    groups: Mapping[str, Group] = field(default_factory=dict)
    quiesced_by: str | None = None
    # derived from the groups once, and what bound_to found, kept for the pass
    _binding: tuple[Group, ...] = field(init=False, repr=False, compare=False, default=())
    _bound: dict[tuple[str | None, str | None], tuple[str, ...]] = field(
        init=False, repr=False, compare=False, default_factory=dict)

    def __post_init__(self) -> None:
        binding = tuple(g for g in self.groups.values() if g.bindings)
        object.__setattr__(self, "_binding", binding)

    @property
    def has_bindings(self) -> bool:
        return bool(self._binding)

    @property
    def quiesced(self) -> bool:
        return self.quiesced_by is not None

    def group(self, name: str) -> Group:
        found = self.groups.get(name)
        return found if found is not None else Group(name)

    def bound_to(self, environment: str | None, repo: str | None) -> tuple[str, ...]:
        """The groups bound to work in ``environment`` or ``repo`` (empty: it is unbound)."""
        if not self._binding or (not environment and not repo):
            return ()
        key = (environment, repo)
        if key not in self._bound:
            self._bound[key] = tuple(sorted(g.name for g in self._binding
                                            if binds(g, environment, repo)))
        return self._bound[key]


OPEN = Placement()


def is_repo_binding(binding: str) -> bool:
    return "/" in binding or ":" in binding


def binds(group: Group, environment: str | None, repo: str | None) -> bool:
    """``group`` is bound to work in ``environment`` or in repository ``repo``."""
    if not group.bindings:
        return False
    slug = _slug(repo)
    for b in group.bindings:
        if is_repo_binding(b):
            if repo and (repo.startswith(b) or (slug is not None and slug.startswith(b))):
                return True
        elif environment == b:
            return True
    return False


def _slug(repo: str | None) -> str | None:
    if not repo:
        return None
    try:
        return repo_slug(repo)
    except ValueError:  # a repository gg cannot name: only its URL's prefix binds it
        return None


def name_problem(name: str) -> str | None:
    if not _NAME.match(name or ""):
        return f"a group name is 1-63 letters, digits, '.', '_' or '-' (got {name!r})"
    return None


def key_problem(key: str) -> str | None:
    if key in RESERVED_KEYS:
        return (f"attribute key {key} is reserved: environments place work by label "
                "(gg fly --environment)")
    if not _KEY.match(key or ""):
        return (f"an attribute key is a lower-case letter, then letters, digits, '_', '.' or "
                f"'-' (got {key!r})")
    return None


def value_problem(value: str) -> str | None:
    if not _VALUE.match(value or ""):
        return f"an attribute value is 1-127 letters, digits, '.', '_', ':', '/' or '-' (got {value!r})"
    return None


def parse_pairs(text: str | Iterable[str] | None, what: str) -> dict[str, str]:
    """``k=v,k2=v2`` (or a list of ``k=v``) as a dict; a malformed pair is one sentence."""
    if not text:
        return {}
    items = text.split(",") if isinstance(text, str) else list(text)
    out: dict[str, str] = {}
    for item in items:
        item = item.strip()
        if not item:
            continue
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            raise ValueError(f"{what} takes k=v pairs separated by commas (got {item!r})")
        if key in out and out[key] != value:
            raise ValueError(f"{what} names {key} twice")
        out[key] = value
    return out


def attribute_problem(pairs: Mapping[str, str], registry: Mapping[str, Attribute],
                      what: str) -> str | None:
    """Why ``pairs`` (a group's attributes, or a flight's ``--where``) are not allowed."""
    if len(pairs) > MAX_ATTRIBUTES:
        return f"{what} has at most {MAX_ATTRIBUTES} attributes"
    for key, value in sorted(pairs.items()):
        if key in RESERVED_KEYS:
            return key_problem(key)
        attr = registry.get(key)
        if attr is None:
            return (f"{what}: attribute key {key} is not registered; an admin registers it "
                    f"first: gg attribute set {key}")
        if problem := value_problem(value):
            return f"{what}: {problem}"
        if attr.values and value not in attr.values:
            return (f"{what}: {key} takes one of {', '.join(attr.values)} (got {value}); "
                    f"gg attribute set {key} --values ... widens it")
    return None


def binding_problem(bindings: Iterable[str]) -> str | None:
    items = list(bindings)
    if len(items) > MAX_BINDINGS:
        return f"--bind takes at most {MAX_BINDINGS} environments or repository prefixes"
    for b in items:
        if not b or " " in b or len(b) > 512:
            return f"--bind: {b!r} is not an environment name or a repository prefix"
    return None


def selects(where: Mapping[str, str], group: Group) -> bool:
    """``where`` is non-empty and ``group`` has every attribute it asks for."""
    return bool(where) and all(group.attributes.get(k) == v for k, v in where.items())


def open_refusal(flight_group: str | None, bound: tuple[str, ...], environment: str | None,
                 repo: str | None) -> str | None:
    """Why a flight naming ``flight_group`` may not open where ``bound`` groups are bound."""
    if flight_group is None or not bound or flight_group in bound:
        return None
    where = f"environment {environment}" if environment else f"repository {repo}"
    names = ", ".join(bound)
    return (f"{where} is bound to group{'s' if len(bound) > 1 else ''} {names}; a flight "
            f"there cannot name group {flight_group}: open it with --group "
            f"{bound[0]} or without --group")


def delete_blockers(name: str, runners: list[str], tokens: int) -> list[str]:
    """One sentence per thing that still references group ``name``, with what clears it."""
    out = []
    if runners:
        shown = ", ".join(runners[:5]) + (f" and {len(runners) - 5} more"
                                          if len(runners) > 5 else "")
        out.append(f"{len(runners)} runner{'s are' if len(runners) != 1 else ' is'} in group "
                   f"{name} ({shown}): move each (gg runner group RUNNER default) or retire "
                   f"it (gg runner retire RUNNER)")
    if tokens:
        out.append(f"{tokens} enrolment token{'s' if tokens != 1 else ''} that can still be "
                   f"redeemed name{'s' if tokens == 1 else ''} group {name}: revoke "
                   f"{'them' if tokens != 1 else 'it'} (gg fleet tokens; gg fleet revoke "
                   "FINGERPRINT) or let them expire")
    return out
