"""A flight's spec: every setting a person chooses at ``gg fly``, as one value.

Priorities and the labels an environment requires are settings of the spec too, so they
are named here (gg.domain.flights re-exports ``Priority``).

The spec is made once from the wire (:meth:`FlightSpec.from_wire`, from ``FlightOpen``),
passed whole through the control layer's opening (gg.control.flights.open_flight), written
as the flight's columns (:meth:`FlightSpec.to_row`) and read back from them
(:meth:`FlightSpec.from_row`, ``Flight.spec``) where a rule needs it: the digest an approval
is given for (gg.domain.specs), a service's change, what a runner is handed, and
:meth:`FlightSpec.to_wire` to open the same flight again.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any

from gg.domain.artifacts import ArtifactTerms
from gg.domain.concurrency import Concurrency, grace_problem
from gg.domain.retries import Retry
from gg.domain.secrets import Use, name_problem, uses_problem


class Priority(StrEnum):
    """How urgent a flight is: the claim offers higher priorities first (``gg fly --priority``)."""

    HIGH = "high"
    NORMAL = "normal"
    LOW = "low"

    @property
    def rank(self) -> int:
        """0 for the most urgent; the matcher orders by it (read per flight on the hot path:
        a dict look-up, not a walk of the enum)."""
        return _PRIORITY_RANK[self]


_PRIORITY_RANK = {p: i for i, p in enumerate(Priority)}


def required_labels(environment: str | None, extra: dict[str, str] | None = None) -> dict[str, str]:
    """A flight in environment X requires the label ``environment=X``."""
    labels = dict(extra or {})
    if environment:
        labels["environment"] = environment
    return labels


MAX_COMMAND_ARGS = 4096
MAX_NOTE_CHARS = 2000  # gg fly --note: a paragraph, not a file


def note_problem(note: str) -> str | None:
    """Why ``note`` cannot be a flight's note, in one sentence (None: it can): free text of
    at most MAX_NOTE_CHARS characters, lines and tabs allowed, no other control character
    (a terminal reading ``gg show`` must not be steered by one)."""
    if not note.strip():
        return "--note needs some text"
    if len(note) > MAX_NOTE_CHARS:
        return f"--note is at most {MAX_NOTE_CHARS} characters ({len(note)} given)"
    if any((ord(c) < 32 and c not in "\n\t") or 127 <= ord(c) < 160 for c in note):
        return "--note may not hold control characters (lines and tabs are fine)"
    return None

# A FlightSpec field's column where the two names differ; approval and approver are no
# column (the approval gate opened with the flight holds them).
_COLUMN = {"runner": "runner_target", "labels": "requires"}
_NOT_STORED: tuple[str, ...] = ("approval", "approver")
# Settings kept in a table of their own keyed by flight id, not a flights column
# (docs/architecture.md: a new flights column breaks a rolling upgrade).
_NOT_STORED += ("concurrency", "grace")  # tables flight_concurrency, flight_grace
_NOT_STORED += ("after", "after_any")  # --after: rows of their own (gg.store.dependencies)
_NOT_STORED += ("limits",)  # table flight_limits
_NOT_STORED += ("note",)  # table flight_notes
_NOT_STORED += ("secrets",)  # table flight_secrets (names only; docs/jobs.md)
_NOT_STORED += ("retry",)  # table flight_retries (gg.store.retries)
_NOT_STORED += ("artifacts",)  # tables flight_artifact_terms, flight_inputs
# What only names, orders or books a flight: changing it runs nothing new, so it is left out
# of the digest an approval is given for (gg.domain.specs). Every other field is in it.
RUNS_NOTHING_NEW: tuple[str, ...] = ("title", "output_limit", "priority", "approval",
                                     "approver")
RUNS_NOTHING_NEW += ("concurrency", "grace")  # when it flies, and how it is stopped
RUNS_NOTHING_NEW += ("after", "after_any")  # --after orders flights; it runs nothing
RUNS_NOTHING_NEW += ("limits",)  # what it may use, not what it runs
RUNS_NOTHING_NEW += ("note",)  # words for people
RUNS_NOTHING_NEW += ("secrets",)  # what it may use; read back from its own table
RUNS_NOTHING_NEW += ("retry",)  # how often the same thing runs again, not what runs
RUNS_NOTHING_NEW += ("artifacts",)  # what it keeps and is handed, as --after


@dataclass(frozen=True, kw_only=True)
class FlightSpec:
    """Every per-flight setting a person chooses at ``gg fly``, made once from the wire
    (:meth:`from_wire`) and passed whole from the route to the store.

    A spec is *asked* (as the opener sent it) or *settled* (as the flight holds it, after
    :func:`gg.control.flights.open_flight` decided the defaults): ``runner`` is a name or id
    asked, the runner's id settled; ``timeout`` and ``output_limit`` are what was asked, the
    limits the flight got settled; ``service`` is the options asked (``port``,
    ``ready_cmd``), the service's whole spec settled (gg.control.services.new_spec), with
    ``kind`` ``service``. :meth:`to_row` and :meth:`from_row` are the one pair that turn a
    settled spec into the flight's columns and back; :meth:`to_wire` gives what opens the
    same flight again.

    Adding a setting: a field here (and on :class:`Flight`, whose fields are the columns),
    its column (a migration), its wire field (gg.api.schemas.FlightOpen), and where it is
    used. The dicts are copies owned by the spec: never changed, never hashed.
    """

    command: tuple[str, ...]
    title: str = ""
    environment: str | None = None
    runner: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    attended: bool = False
    repo: str | None = None
    agent: str = "shell"
    kind: str = "work"
    timeout: float | None = None  # seconds each attempt may run
    output_limit: int | None = None  # bytes of output stored at most
    priority: Priority = Priority.NORMAL
    approval: bool = False  # held until an admin or the approver approves it
    approver: str | None = None
    service: dict[str, Any] | None = None
    group: str | None = None
    where: dict[str, str] = field(default_factory=dict)
    # gg.domain.concurrency: its concurrency key, and seconds from SIGTERM to SIGKILL
    concurrency: Concurrency | None = None
    grace: float | None = None
    # --after F1,F2 [--after-any]: held until they land (or end); docs/work-graphs.md
    after: tuple[str, ...] = ()
    after_any: bool = False
    # resource limits asked (gg.domain.limits: cpus, memory, pids): kept in a table of their
    # own (no flights column), settled by the runner's policy where it flies
    limits: dict[str, Any] = field(default_factory=dict)
    # gg fly --note TEXT: free text for people, shown with the flight (table flight_notes)
    note: str | None = None
    # --secret NAME[=ENVVAR] (gg.domain.secrets): names only, kept in flight_secrets
    secrets: tuple[Use, ...] = ()
    # --retries N --retry-on --retry-delay --retry-elsewhere (gg.domain.retries): as asked,
    # or settled with the environment's defaults; kept in table flight_retries
    retry: Retry | None = None
    # --artifact-limit SIZE --with-artifacts (gg.domain.artifacts): tables of their own
    artifacts: ArtifactTerms | None = None

    def __post_init__(self) -> None:
        if type(self.command) is not tuple:
            object.__setattr__(self, "command", tuple(self.command))
        if type(self.after) is not tuple:
            object.__setattr__(self, "after", tuple(self.after))
        if type(self.priority) is not Priority:
            object.__setattr__(self, "priority", Priority(self.priority))
        if self.concurrency is not None and type(self.concurrency) is not Concurrency:
            object.__setattr__(self, "concurrency", Concurrency.of(self.concurrency))
        if type(self.secrets) is not tuple or not all(type(u) is Use for u in self.secrets):
            object.__setattr__(self, "secrets", tuple(Use.of(u) for u in self.secrets))
        if self.retry is not None and type(self.retry) is not Retry:
            object.__setattr__(self, "retry", Retry.of(self.retry))
        if isinstance(self.artifacts, dict):
            object.__setattr__(self, "artifacts", ArtifactTerms(**self.artifacts))

    def problem(self) -> str | None:
        """Why no flight can have this spec, in one sentence (None: it can); what depends
        on the server (a runner named, an environment, the limits) is checked on opening."""
        if not self.command or not all(isinstance(a, str) for a in self.command):
            return "a flight needs a command: gg fly -- CMD ..."
        if len(self.command) > MAX_COMMAND_ARGS:
            return f"a command has at most {MAX_COMMAND_ARGS} arguments"
        if self.concurrency is not None and (problem := self.concurrency.problem()):
            return problem
        if self.grace is not None and (problem := grace_problem(self.grace)):
            return problem
        if self.note is not None and (problem := note_problem(self.note)):
            return problem
        for use in self.secrets:  # --secret: the names, and no two in one variable
            if problem := (name_problem(use.name) or
                           name_problem(use.envvar, "a variable's name")):
                return f"--secret {use.name}: {problem}"
        if self.retry is not None and (problem := self.retry.problem()):
            return problem
        return uses_problem(list(self.secrets))

    @property
    def requires(self) -> dict[str, str]:
        """The labels its runner must have: those asked, and ``environment=X`` in X."""
        return required_labels(self.environment, self.labels)

    @classmethod
    def from_wire(cls, body: dict[str, Any]) -> FlightSpec:
        """The spec a validated open asks for (``FlightOpen.model_dump()``)."""
        values = {k: v for k, v in body.items() if k in _NAMES}
        for key in ("labels", "where"):
            values[key] = dict(values.get(key) or {})
        values["limits"] = {k: v for k, v in (values.get("limits") or {}).items()
                            if v is not None}
        if values.get("service") is not None:
            values["service"] = dict(values["service"])
        return cls(**values)

    def to_wire(self) -> dict[str, Any]:
        """What opens a flight with this spec again (a ``FlightOpen`` body): its settled
        limits asked for explicitly; an approval is asked again by its environment's rule
        (whether it was asked is kept by its gate, not the spec)."""
        out = {name: getattr(self, name) for name in _NAMES if name != "kind"}
        out.update(command=list(self.command), labels=dict(self.labels),
                   where=dict(self.where), priority=self.priority.value, after=list(self.after),
                   limits=dict(self.limits))
        if self.concurrency is not None:
            out["concurrency"] = self.concurrency.to_wire()
        out["secrets"] = [u.to_wire() for u in self.secrets]
        if self.retry is not None:
            out["retry"] = self.retry.to_wire()
        if self.artifacts is not None:
            out["artifacts"] = self.artifacts.to_wire()
        if self.service is not None:
            out["service"] = {"port": self.service.get("port"),
                              "ready_cmd": self.service.get("ready_cmd")}
        return out

    def to_row(self) -> dict[str, Any]:
        """The flight's columns this spec fills (a settled spec)."""
        out = {column: getattr(self, name) for name, column in _STORED}
        out.update(command=list(self.command), requires=self.requires, where=dict(self.where),
                   priority=self.priority.value,
                   service=dict(self.service) if self.service is not None else None)
        return out

    def row_changes(self, row: dict[str, Any]) -> dict[str, Any]:
        """The columns of a flight's field values ``row`` that this (settled) spec sets to
        other values: what a change of its spec writes."""
        return {k: v for k, v in self.to_row().items() if row[k] != v}

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> FlightSpec:
        """The settled spec of a flight's field values (:class:`Flight` or a listing's row)."""
        values = {name: row[column] for name, column in _STORED}
        environment = row["environment"]
        values["labels"] = {k: v for k, v in row["requires"].items()
                            if not (k == "environment" and environment and v == environment)}
        values["where"] = dict(row["where"])
        if row["service"] is not None:
            values["service"] = dict(row["service"])
        return cls(**values)


_NAMES = frozenset(f.name for f in fields(FlightSpec))
_STORED = tuple((f.name, _COLUMN.get(f.name, f.name)) for f in fields(FlightSpec)
                if f.name not in _NOT_STORED)  # (field, its column)
