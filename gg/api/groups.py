"""Runner groups, attributes, group demand and the fleet-wide stop on the wire (SPEC 17)."""

from __future__ import annotations

from typing import Annotated

from pydantic import ConfigDict, Field, StringConstraints

from gg.api.schemas import Answer, LabelKey, Labels, Request

GroupName = Annotated[str, StringConstraints(min_length=1, max_length=63)]
Binding = Annotated[str, StringConstraints(min_length=1, max_length=512)]
AttributeValue = Annotated[str, StringConstraints(min_length=1, max_length=127)]


class GroupSet(Request):
    """What is not given keeps its value."""
    attributes: Labels | None = None
    bindings: Annotated[list[Binding], Field(max_length=64)] | None = None
    exclusive: bool | None = None


class AttributeSet(Request):
    values: Annotated[list[AttributeValue], Field(max_length=256)] = []


class RunnerMove(Request):
    group: GroupName


class GroupMember(Answer):
    id: str
    name: str


class GroupView(Answer):
    name: str
    attributes: dict[str, str] = {}
    bindings: list[str] = []
    exclusive: bool = False
    draining: bool = False
    drain_by: str | None = None
    drain_at: float | None = None
    updated_at: float | None = None
    updated_by: str | None = None
    runners: int = 0  # how many unretired runners are in it


class GroupDetail(GroupView):
    members: list[GroupMember] = []
    group: str  # the demand, beside the row
    queued: int
    running: int


class GroupChanged(GroupView):
    members: list[GroupMember] = []
    changed: bool = True


class GroupDemand(Answer):
    """The autoscaler's signal: ready flights the group's placement could take (a flight
    counts toward every group that could take it) and flights its runners fly."""
    group: str
    queued: int
    running: int


class GroupDeleted(Answer):
    group: str
    deleted: bool


class AttributeView(Answer):
    key: LabelKey
    values: list[str] = []  # empty: any value


class RunnerMoved(Answer):
    model_config = ConfigDict(populate_by_name=True)
    runner: str
    name: str
    from_: str = Field(alias="from")
    group: str
    changed: bool


class FleetState(Answer):
    quiesced: bool
    quiesced_by: str | None = None
    quiesced_at: float | None = None
    running: int  # flights flying now (they continue while quiesced)
    changed: bool | None = None
