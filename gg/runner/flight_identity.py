"""Who a flight runs as: never host root (docs/isolation.md, "The identity model").

A root runner's sandboxed flight takes the **flight identity** of the worker slot it flies
in: uid = gid = BASE + slot, from a range of ids nobody else on the host is meant to hold.
The range, first match wins:

1. the runner's own setting: ``gg runner up --flight-uids BASE[:COUNT]``, or
   ``GG_FLIGHT_UIDS=BASE[:COUNT]`` in its environment;
2. the first subordinate range ``/etc/subuid`` lists for the runner's user (by name or uid),
   the range the host already set aside for that user's sandboxes;
3. ``DEFAULT_BASE`` (well above ordinary and systemd's dynamic uids), ``DEFAULT_COUNT`` ids.

A runner with more worker slots than ids in its range refuses to start: two flights of one
runner never share an identity. A runner that is not root cannot change uid: its flights
keep its own (non-zero) uid, in a user namespace of its own.
"""

from __future__ import annotations

import os
import pwd
import threading
from dataclasses import dataclass
from pathlib import Path

ENV_FLIGHT_UIDS = "GG_FLIGHT_UIDS"
SUBUID = "/etc/subuid"
DEFAULT_BASE = 2_000_000_000
DEFAULT_COUNT = 65_536
MAX_ID = 4_294_967_294  # (uid_t)-1 is "no uid"


class IdentityRangeError(ValueError):
    """A flight-uid range that cannot be used; the message is one sentence for the operator."""


@dataclass(frozen=True)
class Identity:
    """A flight's uid and gid on the host (gid = uid: a group of its own)."""

    uid: int
    gid: int


@dataclass(frozen=True)
class IdRange:
    base: int
    count: int
    source: str  # "setting", "/etc/subuid" or "default": what the operator reads back


def parse_range(text: str, source: str = "setting") -> IdRange:
    """``BASE[:COUNT]`` as the operator writes it."""
    base_text, _, count_text = text.strip().partition(":")
    try:
        base = int(base_text)
        count = int(count_text) if count_text else DEFAULT_COUNT
    except ValueError:
        raise IdentityRangeError(f"flight uids must read BASE[:COUNT] (two whole numbers), "
                                 f"not {text!r}") from None
    if base < 1000:
        raise IdentityRangeError(f"flight uids must start at 1000 or above (not {base}): "
                                 f"below are root and the host's own accounts")
    if count < 1 or base + count - 1 > MAX_ID:
        raise IdentityRangeError(f"flight uids {base}:{count} do not fit between 1000 and "
                                 f"{MAX_ID}")
    return IdRange(base, count, source)


def subordinate_range(uid: int, subuid: str = SUBUID) -> IdRange | None:
    """The first range ``/etc/subuid`` gives the user ``uid`` (by name or number)."""
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:
        name = None
    try:
        lines = Path(subuid).read_text(errors="replace").splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.strip().split(":")
        if len(fields) != 3 or fields[0] not in (name, str(uid)):
            continue
        try:
            return parse_range(f"{fields[1]}:{fields[2]}", SUBUID)
        except IdentityRangeError:
            continue
    return None


def flight_range(setting: str | None = None, *, uid: int | None = None,
                 subuid: str = SUBUID) -> IdRange:
    """The range of flight ids, by the rule in this module's docstring."""
    setting = setting if setting is not None else os.environ.get(ENV_FLIGHT_UIDS)
    if setting:
        return parse_range(setting)
    found = subordinate_range(os.geteuid() if uid is None else uid, subuid)
    return found or IdRange(DEFAULT_BASE, DEFAULT_COUNT, "default")


class FlightIdentities:
    """One identity per worker slot: a flight takes the lowest free one and gives it back
    when it is over, so no two flights of this runner hold the same uid at once."""

    def __init__(self, ids: IdRange, slots: int) -> None:
        if slots > ids.count:
            raise IdentityRangeError(f"{slots} worker slots need {slots} flight uids; the "
                                     f"range {ids.base}:{ids.count} ({ids.source}) has "
                                     f"{ids.count}")
        self.ids = ids
        self.slots = slots
        self._taken: set[int] = set()
        self._lock = threading.Lock()

    def first(self) -> Identity:
        return Identity(self.ids.base, self.ids.base)

    def take(self) -> Identity:
        """The lowest identity no running flight holds. Past ``slots`` (a runner's flights
        overlapping a hand-back), the next ids of the range, never one in use."""
        with self._lock:
            for n in range(self.ids.count):
                if n not in self._taken:
                    self._taken.add(n)
                    uid = self.ids.base + n
                    return Identity(uid, uid)
        raise IdentityRangeError(f"every flight uid of {self.ids.base}:{self.ids.count} is "
                                 f"in use")

    def give_back(self, identity: Identity) -> None:
        with self._lock:
            self._taken.discard(identity.uid - self.ids.base)


_shared: FlightIdentities | None = None
_shared_lock = threading.Lock()


def shared(slots: int = 1) -> FlightIdentities:
    """This process's identities when its runner made none of its own (from the setting, the
    subordinate range or the default)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            ids = flight_range()
            _shared = FlightIdentities(ids, min(max(slots, 1), ids.count))
        return _shared


def runs_as_root() -> bool:
    return os.geteuid() == 0


WORKSPACE_MODE = 0o711


def hand_over(root: Path, identity: Identity) -> None:
    """``root`` and everything under it owned by ``identity``, links included but never
    followed (``lchown``): a link planted there cannot hand a host file to the flight.

    ``root`` itself is left ``0711``: only its owner lists, reads or writes it, but bubblewrap,
    which enters it as a root without capabilities before the flight takes its identity, may
    pass through it."""
    os.lchown(root, identity.uid, identity.gid)
    os.chmod(root, WORKSPACE_MODE)
    for folder, dirs, files in os.walk(root, followlinks=False):
        for name in (*dirs, *files):
            try:
                os.lchown(os.path.join(folder, name), identity.uid, identity.gid)
            except FileNotFoundError:
                pass
