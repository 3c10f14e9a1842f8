"""A runner's policy: how isolated its flights run, what network they reach, how many at once.

Policy travels down from the control plane (the runner's fleet profile, or ``gg runner
policy R ...``); it is never read from the host. The runner compares it with what it can
actually enforce (its capability report) and the server turns that comparison into health
(``gg.domain.health``).

Levels, weakest first, so that "loosening" and "tightening" can be told apart by position::

    isolation: none < sandbox < container < gvisor
    egress:    all  < allowlist < none        (none is the tightest: no network at all)

The default for production is ``sandbox`` / ``all`` / 1 worker: bubblewrap is on almost
every Linux host, and cutting egress by default would break every flight that clones a
repository. A server started with ``--dev`` may default to ``none`` isolation, because
``none`` is refused everywhere else.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gg.domain import egress as egress_rules
from gg.domain import limits as limit_rules

ISOLATIONS = ("none", "sandbox", "container", "gvisor")
EGRESSES = ("all", "allowlist", "none")
MAX_WORKERS = 256
# Resource limits (gg.domain.limits): a default and a maximum for each, None when unset.
LIMIT_KEYS = tuple(limit_rules.NAMES) + tuple(f"max_{n}" for n in limit_rules.NAMES)
KEYS = ("isolation", "egress", "workers") + LIMIT_KEYS + ("image", "allow")
# The image a container flight runs from (isolation container): a reference the engine on the
# runner resolves locally or pulls ([registry[:port]/]name[:tag][@sha256:digest]).
IMAGE_MAX = 255
_IMAGE = re.compile(r"^(?:[A-Za-z0-9.-]+(?::[0-9]+)?/)?[a-z0-9]+(?:[._-]+[a-z0-9]+)*"
                    r"(?:/[a-z0-9]+(?:[._-]+[a-z0-9]+)*)*"
                    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[0-9a-f]{64})?$")


def image_problem(image: object) -> str | None:
    """Why ``image`` is not an image reference a container engine takes, or None."""
    if not isinstance(image, str) or not image:
        return f"image must be an image reference like registry.example.com/ci/python:3.12, " \
               f"not {image!r}"
    if len(image) > IMAGE_MAX or not _IMAGE.match(image):
        shown = image if len(image) <= 60 else image[:59] + "…"
        return (f"image must be an image reference like registry.example.com/ci/python:3.12, "
                f"not {shown!r}")
    return None


@dataclass(frozen=True)
class Policy:
    isolation: str = "sandbox"
    egress: str = "all"
    workers: int = 1
    cpus: float | None = None
    memory: int | None = None
    pids: int | None = None
    max_cpus: float | None = None
    max_memory: int | None = None
    max_pids: int | None = None
    image: str | None = None  # isolation container's image; None: the runner's default
    # egress allowlist entries (gg.domain.egress): host[:port] or CIDR[:port]
    allow: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.isolation not in ISOLATIONS:
            raise ValueError(f"isolation must be one of {', '.join(ISOLATIONS)}, "
                             f"not {self.isolation!r}")
        if self.egress not in EGRESSES:
            raise ValueError(f"egress must be one of none, allowlist, all, not {self.egress!r}")
        if isinstance(self.workers, bool) or not isinstance(self.workers, int):
            raise ValueError(f"workers must be a whole number, not {self.workers!r}")
        if not 1 <= self.workers <= MAX_WORKERS:
            raise ValueError(f"workers must be between 1 and {MAX_WORKERS}, not {self.workers}")
        read = {k: getattr(self, k) for k in LIMIT_KEYS}
        for key, value in limit_rules.Limits.from_dict(
                {k: v for k, v in read.items() if not k.startswith("max_")}).to_dict().items():
            object.__setattr__(self, key, value)
        for key, value in limit_rules.Limits.from_dict(
                {k[4:]: v for k, v in read.items() if k.startswith("max_")}).to_dict().items():
            object.__setattr__(self, f"max_{key}", value)
        limit_rules.check_policy(self.to_dict())
        if self.image is not None and image_problem(self.image):
            raise ValueError(image_problem(self.image))
        object.__setattr__(self, "allow", egress_rules.parse_allow(self.allow))

    def to_dict(self) -> dict[str, Any]:
        """The policy's keys; a limit only when it is set (a policy without limits reads as
        it did before limits existed)."""
        out: dict[str, Any] = {"isolation": self.isolation, "egress": self.egress,
                               "workers": self.workers}
        out.update({k: getattr(self, k) for k in LIMIT_KEYS if getattr(self, k) is not None})
        if self.image is not None:
            out["image"] = self.image
        if self.allow:  # only when listed: a policy without one reads as it did before
            out["allow"] = list(self.allow)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None, *,
                  base: Policy | None = None) -> Policy:
        """Read a policy; keys left out keep ``base``'s value (the production default)."""
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            raise ValueError("a policy must be a mapping of isolation, egress and workers")
        unknown = sorted(str(k) for k in data if k not in KEYS)
        if unknown:
            raise ValueError(f"a policy has only isolation, egress, workers, allow, limits "
                             f"({', '.join(LIMIT_KEYS)}) and image, not {', '.join(unknown)}")
        start = base or DEFAULT_POLICY
        return cls(**{k: data.get(k, getattr(start, k)) for k in KEYS})


DEFAULT_POLICY = Policy(isolation="sandbox", egress="all", workers=1)
DEV_DEFAULT_POLICY = Policy(isolation="none", egress="all", workers=1)


def default_policy(*, dev: bool, workers: int = 1) -> Policy:
    """The policy a newly registered runner gets when no profile or admin has set one."""
    base = DEV_DEFAULT_POLICY if dev else DEFAULT_POLICY
    return Policy(isolation=base.isolation, egress=base.egress, workers=workers)


def _raised(old: float | None, new: float | None) -> bool:
    """A limit raised: higher, or taken away (None is no limit at all)."""
    return old is not None and (new is None or new > old)


def is_looser(old: Policy, new: Policy) -> bool:
    """Does ``new`` let a machine do more than ``old`` (the gate rule's question)? A
    maximum raised or taken away lets a flight ask for more, and so does an allowlist
    entry added; another image is other code running every container flight, so any change
    of it counts."""
    return (new.image != old.image
            or ISOLATIONS.index(new.isolation) < ISOLATIONS.index(old.isolation)
            or EGRESSES.index(new.egress) < EGRESSES.index(old.egress)
            or new.workers > old.workers
            or any(_raised(getattr(old, f"max_{n}"), getattr(new, f"max_{n}"))
                   for n in limit_rules.NAMES)
            or egress_rules.is_wider(old.allow, new.allow))
