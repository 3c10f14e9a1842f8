"""A runner's policy: how isolated its flights run, what network they reach, how many at once.

Policy travels down from the control plane (the runner's fleet profile, or ``gg runner
policy R ...``); it is never read from the host. The runner compares it with what it can
actually enforce (its capability report) and the server turns that comparison into health
(``gg.domain.health``).

Levels, weakest first, so that "loosening" and "tightening" can be told apart by position::

    isolation: none < sandbox < container
    egress:    all  < allowlist < none        (none is the tightest: no network at all)

The default for production is ``sandbox`` / ``all`` / 1 worker: bubblewrap is on almost
every Linux host, and cutting egress by default would break every flight that clones a
repository. A server started with ``--dev`` may default to ``none`` isolation, because
``none`` is refused everywhere else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

ISOLATIONS = ("none", "sandbox", "container")
EGRESSES = ("all", "allowlist", "none")
MAX_WORKERS = 256


@dataclass(frozen=True)
class Policy:
    isolation: str = "sandbox"
    egress: str = "all"
    workers: int = 1

    def __post_init__(self) -> None:
        if self.isolation not in ISOLATIONS:
            raise ValueError(f"isolation must be one of none, sandbox, container, "
                             f"not {self.isolation!r}")
        if self.egress not in EGRESSES:
            raise ValueError(f"egress must be one of none, allowlist, all, not {self.egress!r}")
        if isinstance(self.workers, bool) or not isinstance(self.workers, int):
            raise ValueError(f"workers must be a whole number, not {self.workers!r}")
        if not 1 <= self.workers <= MAX_WORKERS:
            raise ValueError(f"workers must be between 1 and {MAX_WORKERS}, not {self.workers}")

    def to_dict(self) -> dict[str, Any]:
        return {"isolation": self.isolation, "egress": self.egress, "workers": self.workers}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None, *,
                  base: Policy | None = None) -> Policy:
        """Read a policy; keys left out keep ``base``'s value (the production default)."""
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            raise ValueError("a policy must be a mapping of isolation, egress and workers")
        unknown = sorted(str(k) for k in data if k not in ("isolation", "egress", "workers"))
        if unknown:
            raise ValueError(f"a policy has only isolation, egress and workers, "
                             f"not {', '.join(unknown)}")
        start = base or DEFAULT_POLICY
        return cls(isolation=data.get("isolation", start.isolation),
                   egress=data.get("egress", start.egress),
                   workers=data.get("workers", start.workers))


DEFAULT_POLICY = Policy(isolation="sandbox", egress="all", workers=1)
DEV_DEFAULT_POLICY = Policy(isolation="none", egress="all", workers=1)


def default_policy(*, dev: bool, workers: int = 1) -> Policy:
    """The policy a newly registered runner gets when no profile or admin has set one."""
    base = DEV_DEFAULT_POLICY if dev else DEFAULT_POLICY
    return Policy(isolation=base.isolation, egress=base.egress, workers=workers)


def is_looser(old: Policy, new: Policy) -> bool:
    """Does ``new`` let a machine do more than ``old`` (the gate rule's question)?"""
    return (ISOLATIONS.index(new.isolation) < ISOLATIONS.index(old.isolation)
            or EGRESSES.index(new.egress) < EGRESSES.index(old.egress)
            or new.workers > old.workers)
