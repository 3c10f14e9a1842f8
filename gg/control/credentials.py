"""Credential *references*: what the control plane may know about a runner's secrets.

A runner tells the control plane which credentials it holds (kind, ref, fingerprint,
added_at), never a secret: that is enough to route a flight whose repository needs one to a
machine that has it (``gg.domain.fitness``), to say "no credential is registered for
repository SLUG", to notice a rotated secret (the fingerprint changes) and to let a
maintenance gate for a missing credential clear itself. The runner sends its whole list each
time (``gg credential add``, ``gg runner up``, a flight that found one missing), so the
control plane's view can never keep a reference the machine dropped.
"""

from __future__ import annotations

import re

from gg.control import maintenance
from gg.control.core import Core
from gg.domain.events import EventKind
from gg.domain.repos import repo_slug
from gg.domain.runners import Runner
from gg.errors import BadRequest

__all__ = ["list_refs", "set_refs"]

MAX_REFS = 500
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_FINGERPRINT = re.compile(r"^sha256:[0-9a-f]{16}$")


def set_refs(core: Core, runner: Runner, refs: list[dict]) -> list[dict]:
    """Replace the runner's references with ``refs``; confirm maintenance items they cover."""
    if len(refs) > MAX_REFS:
        raise BadRequest(f"at most {MAX_REFS} credential references")
    clean = sorted((_checked(r) for r in refs), key=lambda r: (r["kind"], r["ref"]))
    seen: set[tuple[str, str]] = set()
    for ref in clean:
        if (ref["kind"], ref["ref"]) in seen:
            raise BadRequest(f"credential {ref['kind']} {ref['ref']} is listed twice")
        seen.add((ref["kind"], ref["ref"]))
    with core.store.atomic():
        if clean != (runner.credential_refs or []):
            core.store.update_runner(runner.id, credential_refs=clean)
            core.event(EventKind.RUNNER_CREDENTIALS, actor=f"runner:{runner.name}",
                       runner_id=runner.id, refs=[f"{r['kind']}:{r['ref']} {r['fingerprint']}"
                                                  for r in clean])
        runner = core.runner_again(runner.id)
        maintenance.confirm(core, runner, {f"credential:{r['ref']}" for r in clean})
    core.signals.ready_changed()  # a flight waiting for this credential may be offered now
    return clean


def list_refs(core: Core) -> list[dict]:
    """Every live runner's references, one row each."""
    rows = []
    for runner in core.store.runners():
        for ref in runner.credential_refs or []:
            rows.append({"runner": runner.id, "runner_name": runner.name, **ref})
    return rows


def _checked(ref: dict) -> dict:
    kind, value = ref.get("kind"), str(ref.get("ref", ""))
    if kind == "repo":
        try:
            slug = repo_slug(value)
        except ValueError as exc:
            raise BadRequest(f"credential ref {value!r}: {exc}") from None
        if slug != value:
            raise BadRequest(f"a repository credential is referenced by its slug ({slug})")
    elif kind == "name":
        if not _NAME.match(value):
            raise BadRequest(f"credential name {value!r} is not a credential name")
    else:
        raise BadRequest("a credential's kind is repo or name")
    fingerprint = str(ref.get("fingerprint", ""))
    if not _FINGERPRINT.match(fingerprint):
        raise BadRequest("a credential fingerprint is sha256: and 16 hex digits")
    return {"kind": kind, "ref": value, "fingerprint": fingerprint,
            "added_at": str(ref.get("added_at", ""))[:40]}
