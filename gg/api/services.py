"""Route paths, requests and answers of service flights (docs/services.md)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints

from gg.api.schemas import Answer, Arg, Request

SERVICES = "/v1/services"
SERVICE_UPDATE = "/v1/services/{flight_id}/update"

EnvValue = Annotated[str, StringConstraints(max_length=4000)]


class ServiceUpdate(Request):
    command: Annotated[list[Arg], Field(max_length=4096)] | None = None
    env: Annotated[dict[str, EnvValue], Field(max_length=256)] | None = None


class ServiceSpec(Answer):
    generation: int
    command: list[str]
    env: dict[str, str] = {}
    port: int | None = None
    ready_cmd: str | None = None
    socket_activation: bool = False
    backoff: float
    backoff_cap: float
    ready_timeout: float
    stop_grace: float
    degraded_after: int


class ServiceRow(Answer):
    """A row of ``gg services``."""
    id: str
    title: str = ""
    stage: str
    runner: str | None = None
    runner_name: str | None = None
    epoch: int
    port: int | None = None
    generation: int | None = None  # serving on its runner now
    wanted_generation: int  # the spec's newest generation
    restarts: int
    ready: bool
    uptime: float | None = None  # seconds the serving generation has run
    health: str  # ok, starting, degraded: …, or the flight's stage when not flying
    last_exit: int | None = None
    update: str | None = None  # "failed: …" or "pending: …" for the newest generation
    opened_at: float


class ServiceUpdated(Answer):
    """``spec``: the spec asked for; ``approval``: the gate it waits behind before it runs
    (None: its runner starts it at its next renewal)."""
    flight: str
    spec: ServiceSpec
    approval: str | None = None
