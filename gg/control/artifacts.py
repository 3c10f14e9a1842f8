"""Artifacts: a flight's files stored as its runner uploads them, listed, read, handed on.

An upload is fenced like every other report of the runner (gg.control.leases): the runner
must hold the flight's lease at the epoch it names, checked before the body is read (a stale
attempt sends nothing for long) and again in the transaction that names the artifact (a
lease lost meanwhile stores nothing). The body is spooled to disk as it arrives, its digest
counted, and only a complete body whose SHA-256 is the one declared is kept: a blob per
digest, stored once (a retried upload, or the same file of another flight, adds a row naming
it, no second copy). docs/work-graphs.md, "Artifacts".
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from gg.control.core import Core
from gg.domain import artifacts as rules
from gg.domain import leases
from gg.domain.artifacts import ArtifactTerms
from gg.domain.events import EventKind
from gg.domain.flights import Flight
from gg.domain.runners import Runner, RunnerIdentity
from gg.errors import BadRequest, NotFound, TooLarge

Caller = Runner | RunnerIdentity


def content(core: Core, spool: Path | None = None):
    return core.store.artifact_content(spool)


def _holding(core: Core, runner: Caller, flight_id: str, epoch: int) -> Flight:
    flight, held = core.store.flight_held(flight_id, runner.id)
    return leases.check_holder(flight, runner.id, epoch, core.now(), held)


def _check(name: str, digest: str, size: int) -> None:
    problem = rules.name_problem(name) or rules.digest_problem(digest)
    if problem is None and size < 0:
        problem = "size cannot be negative"
    if problem:
        raise BadRequest(problem)


def _fits(core: Core, flight: Flight, adding: dict[str, int], new_bytes: int) -> None:
    """Refuse (413, one sentence, nothing stored) what would pass the flight's limit or the
    server's quota; ``adding``: name -> size (a name stored already is replaced)."""
    core.store.lock_artifact_quota()  # replicas' offers are counted one after another
    limit = core.store.artifact_limit_of(flight.id)
    limit = rules.DEFAULT_LIMIT if limit is None else limit
    kept = {a["name"]: a["size"] for a in core.store.artifacts_of(flight.id)}
    if len(set(kept) | set(adding)) > rules.MAX_ARTIFACTS:
        raise TooLarge(f"a flight leaves at most {rules.MAX_ARTIFACTS} artifacts")
    stored = sum(size for name, size in kept.items() if name not in adding)
    refusal = (rules.over_limit(flight.id, stored, sum(adding.values()), limit)
               or rules.over_quota(core.store.blobs_bytes(), new_bytes,
                                   core.settings.artifact_quota))
    if refusal:
        raise TooLarge(refusal)


def offer(core: Core, runner: Caller, flight_id: str, *, epoch: int,
          artifacts: list[dict]) -> dict:
    """The runner's list of what it will upload (name, sha256, size): checked whole against
    the caps before any body is sent; each whose content is stored already is named now (no
    body needed); ``needed``: the names whose body must be sent."""
    for a in artifacts:
        _check(a["name"], a["sha256"], a["size"])
    now = core.now()
    needed: list[str] = []
    with core.store.atomic():
        flight = _holding(core, runner, flight_id, epoch)
        new_digests = {a["sha256"]: a["size"] for a in artifacts
                       if core.store.blob_size(a["sha256"]) is None}
        _fits(core, flight, {a["name"]: a["size"] for a in artifacts},
              sum(new_digests.values()))
        for a in artifacts:
            if a["sha256"] in new_digests:
                needed.append(a["name"])
            else:
                _name(core, runner, flight, name=a["name"], digest=a["sha256"], size=a["size"],
                      epoch=epoch, now=now)
    return {"needed": needed, "received": len(artifacts)}


def _name(core: Core, runner: Caller, flight: Flight, *, name: str, digest: str, size: int,
          epoch: int, now: float) -> None:
    before = core.store.artifact(flight.id, name)
    if before is not None and before["sha256"] == digest:
        return  # sent again: stored once
    core.store.add_artifact(flight.id, name, digest, size, epoch, now)
    core.event(EventKind.FLIGHT_ARTIFACT, actor=f"runner:{runner.name}", runner_id=runner.id,
               flight_id=flight.id, at=now, name=name, sha256=digest, size=size, epoch=epoch)


def may_upload(core: Core, runner: Caller, flight_id: str, *, epoch: int, name: str,
               digest: str, size: int) -> None:
    """Before the body is read: the holder, the name and the caps (read, nothing written)."""
    _check(name, digest, size)
    flight = _holding(core, runner, flight_id, epoch)
    adding = 0 if core.store.blob_size(digest) is not None else size
    _fits(core, flight, {name: size}, adding)


def uploaded(core: Core, runner: Caller, flight_id: str, *, epoch: int, name: str,
             digest: str, size: int, spooled: Path, spool: Path | None = None) -> dict:
    """A body spooled whole whose digest was checked: named in one transaction with the
    holder checked again, its content kept once (a file placed after the commit)."""
    blobs = content(core, spool)
    now = core.now()
    with core.store.atomic():
        flight = _holding(core, runner, flight_id, epoch)
        new = core.store.blob_size(digest) is None
        _fits(core, flight, {name: size}, size if new else 0)
        if new:
            core.store.add_blob(digest, size, now)
            blobs.keep(digest, spooled, core.store)
        _name(core, runner, flight, name=name, digest=digest, size=size, epoch=epoch, now=now)
        core.store.db.after_commit(lambda: blobs.place(digest, spooled))
    return {"name": name, "sha256": digest, "size": size, "stored": new}


def listed(core: Core, flight_id: str) -> dict:
    if core.store.flight(flight_id) is None:
        raise NotFound(f"no flight {flight_id}")
    return {"flight": flight_id, "artifacts": core.store.artifacts_of(flight_id)}


def opened(core: Core, flight_id: str, name: str) -> tuple[dict, Iterator[bytes]]:
    """An artifact's row and its content, a chunk at a time."""
    if core.store.flight(flight_id) is None:
        raise NotFound(f"no flight {flight_id}")
    row = core.store.artifact(flight_id, name)
    if row is None:
        names = [a["name"] for a in core.store.artifacts_of(flight_id)]
        have = (f"its artifacts: {', '.join(names[:10])}{', …' if len(names) > 10 else ''}"
                if names else "it left none")
        raise NotFound(f"flight {flight_id} has no artifact {name!r} ({have})")
    return row, content(core).chunks(row["sha256"])


def input_opened(core: Core, runner: Caller, flight_id: str, *, epoch: int, dependency_id: str,
                 name: str) -> tuple[dict, Iterator[bytes]]:
    """An artifact of a dependency, for the runner holding the flight it is handed to."""
    _holding(core, runner, flight_id, epoch)
    row = core.store.input_artifact(flight_id, dependency_id, name)
    if row is None:
        raise NotFound(f"flight {flight_id} is handed no artifact {name!r} of {dependency_id}")
    return row, content(core).chunks(row["sha256"])


def for_grant(core: Core, flight_id: str) -> list[dict]:
    """What a grant carries: every artifact the flight is handed (none for most)."""
    return core.store.inputs_of(flight_id)


def check_open(terms: ArtifactTerms | None, after: list[str]) -> None:
    if terms is None:
        return
    if terms.limit is not None and (problem := rules.limit_problem(terms.limit)):
        raise BadRequest(problem)
    if terms.inputs and not after:
        raise BadRequest("--with-artifacts needs --after F1,F2 (or needs in a file): the "
                         "flights whose artifacts it is handed")


def keep(core: Core, flight_id: str, terms: ArtifactTerms | None, after: list[str]) -> None:
    """A new flight's terms and inputs, in its open's transaction."""
    if terms is None or not terms.asked:
        return
    core.store.set_artifact_terms(flight_id, terms.limit, terms.inputs)
    if terms.inputs:
        names = dict(terms.names)
        core.store.add_inputs(flight_id, [(d, rules.input_dir(d, names)) for d in after])


def view(core: Core, flight_id: str) -> dict:
    """``gg show``'s artifacts of a flight."""
    return {"artifacts": core.store.artifacts_of(flight_id)}


def named_by(core: Core, flight_ids: list[str]) -> set[str]:
    """In a retention batch, before its flights' rows go: the digests they name."""
    return core.store.artifact_digests(flight_ids) if flight_ids else set()


def sweep(core: Core, digests: set[str]) -> int:
    """In that batch's transaction, after: the blobs no flight names any more dropped, and
    their content once it commits (a file named again meanwhile is kept)."""
    if not digests:
        return 0
    dropped = core.store.drop_unnamed_blobs(sorted(digests))
    if dropped:
        blobs = content(core)
        core.store.db.after_commit(lambda: blobs.remove(dropped, core.store))
    return len(dropped)
