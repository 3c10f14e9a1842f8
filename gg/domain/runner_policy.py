"""Which policy a runner is assigned: the one place that answers it.

Layers, lowest first; each later layer overrides only the keys it sets::

    1. the server default      sandbox/all (none/all on a --dev server), workers = started count
    2. the fleet profile       its ``policy:`` block, while the profile is in force
    3. the admin's setting     ``gg runner policy R --isolation/--egress/--workers``

An admin's explicit word wins over the profile because it is the later, more specific
decision about one machine. The result is never read from the host: the runner only reports
what it can enforce, and health compares the two.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gg.domain.policy import Policy, default_policy


def assigned_policy(*, dev: bool, started_workers: int,
                    profile: Mapping[str, Any] | None = None,
                    override: Mapping[str, Any] | None = None) -> Policy:
    """The policy in force; ValueError (one sentence) if a layer holds a bad value."""
    base = default_policy(dev=dev, workers=max(1, min(int(started_workers or 1), 256)))
    for layer in (profile, override):
        if layer:
            base = Policy.from_dict(dict(layer), base=base)
    return base
