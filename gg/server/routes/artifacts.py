"""Artifacts (docs/work-graphs.md): the runner's offer and uploads, people's listings and
downloads, and a dependent's inputs.

An upload's body is never read whole: it is written to a spool file a chunk at a time as it
arrives, its SHA-256 counted on the way, and handed to the use case only when complete and
matching its declared digest and size. A download is sent a chunk at a time likewise.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import uuid
from pathlib import Path
from typing import Iterator

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse

from gg.api.artifacts import (
    ARTIFACT,
    ARTIFACTS,
    DIGEST_HEADER,
    LEASE_ARTIFACT,
    LEASE_ARTIFACTS,
    LEASE_INPUT,
    Artifacts,
    ArtifactsNeeded,
    ArtifactsOffer,
    ArtifactStored,
)
from gg.control import artifacts
from gg.domain.artifacts import CHUNK
from gg.domain.people import Person
from gg.domain.runners import RunnerIdentity
from gg.errors import BadRequest
from gg.server import auth
from gg.server.json_body import JsonRoute
from gg.server.off_loop import off_loop

router = APIRouter(route_class=JsonRoute)


@router.post(LEASE_ARTIFACTS, response_model=ArtifactsNeeded)
async def offer(flight_id: str, body: ArtifactsOffer, request: Request,
                runner: RunnerIdentity = Depends(auth.runner_identity)) -> dict:
    return await request.app.state.core.run(
        artifacts.offer, runner, flight_id, epoch=body.epoch,
        artifacts=[a.model_dump() for a in body.artifacts])


@router.put(LEASE_ARTIFACT, response_model=ArtifactStored)
async def upload(flight_id: str, name: str, request: Request, epoch: int = Query(),
                 sha256: str = Query(max_length=64), size: int = Query(ge=0, le=2 ** 53),
                 runner: RunnerIdentity = Depends(auth.runner_identity)) -> dict:
    core = request.app.state.core
    # a stale epoch, a bad name, past a cap: before the body
    await off_loop(artifacts.may_upload, core, runner, flight_id, epoch=epoch, name=name,
                   digest=sha256, size=size)
    spool = artifacts.content(core, request.app.state.artifact_spool).spool()
    spooled = spool / f"up-{uuid.uuid4().hex}"
    try:
        await _spool(request, spooled, sha256, size)
        return await core.run(artifacts.uploaded, runner, flight_id, epoch=epoch, name=name,
                              digest=sha256, size=size, spooled=spooled,
                              spool=request.app.state.artifact_spool)
    finally:
        spooled.unlink(missing_ok=True)  # placed by now, unless nothing was stored


async def _spool(request: Request, spooled: Path, digest: str, size: int) -> None:
    """The body into ``spooled``, a chunk at a time; BadRequest unless it is ``size`` bytes
    whose SHA-256 is ``digest``."""
    counted = hashlib.sha256()
    got = 0
    pending: list[bytes] = []
    held = 0
    fd = os.open(spooled, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            async for block in request.stream():
                got += len(block)
                if got > size:
                    raise BadRequest(f"the body is longer than the {size} bytes declared")
                counted.update(block)
                pending.append(block)
                held += len(block)
                if held >= CHUNK:
                    await asyncio.to_thread(handle.writelines, pending)
                    pending, held = [], 0
            if pending:
                await asyncio.to_thread(handle.writelines, pending)
    except BaseException:
        spooled.unlink(missing_ok=True)
        raise
    if got != size:
        raise BadRequest(f"the body ended after {got} of the {size} bytes declared")
    if counted.hexdigest() != digest:
        raise BadRequest(f"the body's SHA-256 is {counted.hexdigest()}, not {digest} as declared")


@router.get(ARTIFACTS, response_model=Artifacts)
def listed(flight_id: str, request: Request,
                 person: Person = Depends(auth.person)) -> dict:
    return artifacts.listed(request.app.state.core, flight_id)


def _sent(row: dict, chunks: Iterator[bytes], name: str) -> StreamingResponse:
    base = name.rsplit("/", 1)[-1].replace('"', "")
    return StreamingResponse(
        chunks, media_type="application/octet-stream",
        headers={"content-length": str(row["size"]), DIGEST_HEADER: row["sha256"],
                 "content-disposition": f'attachment; filename="{base}"'})


@router.get(ARTIFACT, response_class=StreamingResponse, response_model=bytes,
            responses={200: {"content": {"application/octet-stream": {}}}})
def download(flight_id: str, name: str, request: Request,
                   person: Person = Depends(auth.person)):
    row, chunks = artifacts.opened(request.app.state.core, flight_id, name)
    return _sent(row, chunks, name)


@router.get(LEASE_INPUT, response_class=StreamingResponse, response_model=bytes,
            responses={200: {"content": {"application/octet-stream": {}}}})
def input_download(flight_id: str, dependency_id: str, name: str, request: Request,
                         epoch: int = Query(),
                         runner: RunnerIdentity = Depends(auth.runner_identity)):
    row, chunks = artifacts.input_opened(request.app.state.core, runner, flight_id,
                                         epoch=epoch, dependency_id=dependency_id, name=name)
    return _sent(row, chunks, name)
