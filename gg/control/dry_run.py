"""Dry runs: a use case run to the end inside one transaction that is then rolled back.

``gg fleet apply --dry-run``, ``gg airspace apply --dry-run`` and ``gg strategy apply
--dry-run`` answer exactly what the apply would answer (what applies at once, what opens a
gate and who may clear it), because the same use case computes it; the store is left as it
was, because its transaction never commits. The answer says ``dry_run: true``; a gate it
names does not exist (its id is not kept).
"""

from __future__ import annotations

from typing import Any, Callable

from gg.control.core import Core


class _RolledBack(Exception):
    def __init__(self, answer: Any):
        super().__init__("dry run")
        self.answer = answer


def dry_run(core: Core, use_case: Callable[..., dict], *args, **kwargs) -> dict:
    """What ``use_case(core, *args, **kwargs)`` would answer, with nothing kept."""
    try:
        with core.store.atomic():
            raise _RolledBack(use_case(core, *args, **kwargs))
    except _RolledBack as done:
        answer = dict(done.answer)
    answer["dry_run"] = True
    return answer


def maybe_dry(core: Core, dry: bool, use_case: Callable[..., dict], *args, **kwargs) -> dict:
    if dry:
        return dry_run(core, use_case, *args, **kwargs)
    return use_case(core, *args, **kwargs)
