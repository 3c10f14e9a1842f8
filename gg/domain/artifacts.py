"""Artifacts: the files a flight leaves under ``$GG_ARTIFACTS``, and a dependent's inputs.

The rules here are pure: what an artifact's name may be (a path relative to
``$GG_ARTIFACTS``, its directories kept), what a flight may store (its limit, default
DEFAULT_LIMIT, ``gg fly --artifact-limit``) and a server (``gg server --artifact-quota``),
and the directory of ``$GG_INPUTS`` a dependency's artifacts go in. docs/work-graphs.md.

An artifact is stored content-addressed: a blob per SHA-256 digest, kept once however many
flights (or retried uploads) name it; a flight's artifact is a (name, digest, size) row that
points at it. Only the runner holding the flight's lease at its epoch may add one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gg.domain.output import size_text

DEFAULT_LIMIT = 1024 ** 3  # bytes a flight's artifacts take at most, unless it asks otherwise
MAX_NAME = 1000  # characters of a name (a path)
MAX_ARTIFACTS = 10_000  # files a flight may leave
CHUNK = 1024 ** 2  # bytes read, sent, hashed and stored at a time: never a whole file
_DIGEST = re.compile(r"^[0-9a-f]{64}$")
_INPUT_DIR = re.compile(r"^[A-Za-z0-9._-]{1,100}$")


@dataclass(frozen=True)
class ArtifactTerms:
    """A flight's artifact settings: ``--artifact-limit`` (bytes; None: DEFAULT_LIMIT) and
    ``--with-artifacts`` (its dependencies' artifacts under ``$GG_INPUTS``). ``names``: the
    directory of each dependency's inputs where it is not its id (a file's ``needs``)."""
    limit: int | None = None
    inputs: bool = False
    names: tuple[tuple[str, str], ...] = ()

    def to_wire(self) -> dict[str, int | bool | None]:
        return {"limit": self.limit, "inputs": self.inputs}

    @property
    def asked(self) -> bool:
        return self.limit is not None or self.inputs


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot name an artifact, in one sentence (None: it can): a relative path
    of plain parts, no ``..``, no empty part, no control character."""
    if not name:
        return "an artifact's name is its path under $GG_ARTIFACTS; it cannot be empty"
    if len(name) > MAX_NAME:
        return f"an artifact's name is at most {MAX_NAME} characters ({len(name)} given)"
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        return f"artifact {name!r}: a name may not hold control characters"
    if name.startswith("/") or "\\" in name:
        return f"artifact {name!r}: a name is a path relative to $GG_ARTIFACTS"
    if any(part in ("", ".", "..") for part in name.split("/")):
        return f"artifact {name!r}: a name's parts may not be empty, '.' or '..'"
    return None


def digest_problem(digest: str) -> str | None:
    if not _DIGEST.match(digest or ""):
        return "sha256 must be 64 lower-case hexadecimal digits"
    return None


def limit_problem(limit: int) -> str | None:
    if limit < 0:
        return "--artifact-limit cannot be negative"
    return None


def over_limit(flight_id: str, stored: int, adding: int, limit: int) -> str | None:
    """The refusal of ``adding`` bytes to a flight's ``stored`` ones past its ``limit``."""
    if stored + adding <= limit:
        return None
    return (f"the artifacts of {flight_id} would take {size_text(stored + adding)}, over its "
            f"limit of {size_text(limit)} (gg fly --artifact-limit SIZE)")


def over_quota(stored: int, adding: int, quota: int) -> str | None:
    """The refusal of ``adding`` new bytes to a server that stores ``stored`` (0: no quota)."""
    if not quota or stored + adding <= quota:
        return None
    return (f"the server's artifacts would take {size_text(stored + adding)}, over its quota of "
            f"{size_text(quota)} (gg server --artifact-quota)")


def input_dir(dependency_id: str, names: dict[str, str]) -> str:
    """The directory of ``$GG_INPUTS`` a dependency's artifacts go in: its name in the file
    that opened both (a ``needs``), else its id."""
    name = names.get(dependency_id)
    return name if name and _INPUT_DIR.match(name) and name not in (".", "..") else dependency_id


