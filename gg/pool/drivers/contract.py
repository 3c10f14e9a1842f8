"""What every driver keeps (gg.pool.drivers): the member it is asked to launch, the error it
raises, the calls it answers, and what a member id may be."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

from gg.error_codes import ErrorCode
from gg.errors import GGError

MEMBER_ID = re.compile(r"^m_[0-9a-f]{1,32}$")


class DriverError(GGError):
    """A driver could not do what it was asked; the message says what and why."""

    code = ErrorCode.DRIVER_FAILED


@dataclass(frozen=True)
class MemberLaunch:
    """Everything a driver needs to bring one member up."""

    member_id: str
    name: str
    digest: str
    code: str  # the ggm_ one-time code; never on a command line
    server: str
    image_ref: str


class Driver(Protocol):
    name: str

    def problem(self) -> str | None: ...

    def prepare(self, digest: str, ref: str) -> None: ...

    def start(self, launch: MemberLaunch) -> None: ...

    def reset(self, launch: MemberLaunch) -> None: ...

    def remove(self, member_id: str) -> None: ...

    def running(self, member_id: str) -> bool: ...

    def members(self) -> list[str]: ...


def check_member_id(member_id: str) -> str:
    """A member id names a directory or a container: refuse anything else."""
    if not MEMBER_ID.match(member_id):
        raise DriverError(f"{member_id!r} is not a member id")
    return member_id
