"""``airspace/root.yaml``: the root envelope, the environments flights may use (SPEC 8).

::

    environments: [ui, api, nightly]
    timeout:            # optional: how long a flight in each environment may run when
      ui: 30m           # gg fly --timeout does not say (seconds, or 500ms, 10m, 12h, 2d)
      nightly: 12h
    approvals: [ui]     # optional: environments whose every flight waits for an approval
                        # (gg approve F; docs/approvals.md)
    retries:            # optional: how often a failed flight in each environment is tried
      ui: 2             # again when gg fly --retries does not say (docs/jobs.md); N alone,
      nightly:          # or the settings by name (each one not given: gg fly's default)
        retries: 3
        on: [failed, timed-out]
        delay: 30s
        elsewhere: true
    images:             # optional: the image a container flight in each environment runs
      ui: registry.example.com/ci/node:22   # from (isolation container; docs/isolation.md)

``environments`` is required and may be empty (then no flight may name an environment once
the root is applied). Each ``timeout``, ``retries`` and ``images`` key and each ``approvals`` item
must be one of ``environments``; a ``retries`` value is held to gg.domain.retries' bounds, an
``images`` value must be an image reference (gg.domain.policy.image_problem). Whether
each name is charted, or advertised by a live runner, is for the control plane to decide
when the root is applied; this module only checks the file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gg.airspace.errors import AirspaceError
from gg.airspace.fields import Checked, Fields, sort_errors
from gg.airspace.yamlfile import Document, document_from_mapping, read_yaml
from gg.domain.policy import image_problem
from gg.domain.profiles import name_problem
from gg.domain.retries import KINDS, RETRIES_MAX, Retry
from gg.settings import parse_duration

__all__ = ["Root", "load_root", "read_root", "root_from_mapping"]


@dataclass(frozen=True)
class Root:
    """The root envelope: environment names in the order written, and their default
    run-time limits in seconds."""

    environments: tuple[str, ...]
    timeouts: Mapping[str, float] = field(default_factory=dict)
    approvals: tuple[str, ...] = ()
    retries: Mapping[str, Retry] = field(default_factory=dict)  # default retries per environment
    images: Mapping[str, str] = field(default_factory=dict)  # a container flight's image per env

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"environments": list(self.environments)}
        if self.timeouts:
            data["timeout"] = dict(self.timeouts)
        if self.approvals:
            data["approvals"] = list(self.approvals)
        if self.retries:
            data["retries"] = {env: {k: v for k, v in r.to_wire().items() if v is not None}
                               for env, r in self.retries.items()}
        if self.images:
            data["images"] = dict(self.images)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Root:
        return cls(environments=tuple(data.get("environments", ())),
                   timeouts=dict(data.get("timeout") or {}),
                   approvals=tuple(data.get("approvals") or ()),
                   retries={env: retry for env, r in (data.get("retries") or {}).items()
                            if (retry := Retry.of(r)) is not None},
                   images=dict(data.get("images") or {}))


def read_root(doc: Document) -> Checked[Root]:
    """Every problem in a parsed root document, or the Root it describes."""
    errors: list[AirspaceError] = []
    fields = Fields.top(doc, errors, "the root envelope needs environments: [names]")
    if fields is None:
        return Checked(None, sort_errors(errors))
    names = fields.texts("environments", required=True, check=name_problem)
    timeouts = _timeouts(fields.section("timeout"), names or ())
    retries = _retries(fields.section("retries"), names or ())
    images = _images(fields.section("images"), names or ())
    listed = names or ()
    approvals = fields.texts(
        "approvals", check=lambda n: None if n in listed else
        f"is not one of environments ({', '.join(listed) or 'none'})")
    fields.finish()
    if errors or names is None or approvals is None:
        return Checked(None, sort_errors(errors))
    return Checked(Root(environments=names, timeouts=timeouts, approvals=approvals,
                        retries=retries, images=images))


def _timeouts(section: Fields | None, names: tuple[str, ...]) -> dict[str, float]:
    """``timeout: {ENV: DURATION}``: every key an environment listed, every value a
    duration longer than 0 (a number is seconds)."""
    found: dict[str, float] = {}
    if section is None:
        return found
    for key, value in section.data.items():
        section.known.append(key)
        if key not in names:
            section.fail(key, f"is not one of environments ({', '.join(names) or 'none'})",
                         at="key")
            continue
        try:
            if isinstance(value, bool) or not isinstance(value, (int, float, str)):
                raise ValueError(f"{value!r} is not a duration (try 30, 500ms, 10m, 12h or 30d)")
            seconds = float(value) if not isinstance(value, str) else parse_duration(value)
        except ValueError as exc:
            section.fail(key, str(exc))
            continue
        if not seconds > 0:
            section.fail(key, "must be longer than 0s")
            continue
        found[key] = seconds
    return found


def _images(section: Fields | None, names: tuple[str, ...]) -> dict[str, str]:
    """``images: {ENV: REF}``: every key an environment listed, every value an image
    reference a container engine takes."""
    found: dict[str, str] = {}
    if section is None:
        return found
    for key in section.data:
        if key not in names:
            section.known.append(key)
            section.fail(key, f"is not one of environments ({', '.join(names) or 'none'})",
                         at="key")
            continue
        image = section.text(key, required=True, check=image_problem)
        if image is not None:
            found[key] = image
    return found


def _retries(section: Fields | None, names: tuple[str, ...]) -> dict[str, Retry]:
    """``retries: {ENV: N}`` or ``{ENV: {retries, on, delay, elsewhere}}``: every key an
    environment listed, every value within gg.domain.retries' bounds."""
    found: dict[str, Retry] = {}
    if section is None:
        return found
    for key, value in section.data.items():
        if key not in names:
            section.known.append(key)
            section.fail(key, f"is not one of environments ({', '.join(names) or 'none'})",
                         at="key")
            continue
        if not isinstance(value, dict):
            n = section.integer(key, required=True, minimum=0, maximum=RETRIES_MAX)
            if n is not None:
                found[key] = Retry(retries=n)
            continue
        one = section.section(key)
        if one is None:
            continue
        n = one.integer("retries", minimum=0, maximum=RETRIES_MAX)
        on = one.texts("on", non_empty=True, options=KINDS) if "on" in one.data else None
        delay = _delay(one)
        elsewhere = one.boolean("elsewhere", default=False) if "elsewhere" in one.data else None
        one.finish()
        if "on" in one.data and on is None:
            continue
        found[key] = Retry(retries=n, on=on, delay=delay, elsewhere=elsewhere)
    return found


def _delay(one: Fields) -> float | None:
    """A retry's ``delay``: a duration longer than 0 and at most a day."""
    value = one.data.get("delay")
    one.known.append("delay")
    if value is None:
        return None
    try:
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ValueError(f"{value!r} is not a duration (try 30, 500ms, 10m, 12h or 30d)")
        seconds = float(value) if not isinstance(value, str) else parse_duration(value)
    except ValueError as exc:
        one.fail("delay", str(exc))
        return None
    if problem := Retry(delay=seconds).problem():
        one.fail("delay", problem.replace("--retry-delay", "delay"))
        return None
    return seconds


def load_root(path: str | Path) -> Root:
    """Load ``airspace/root.yaml``; the first problem (by line) is raised as AirspaceError."""
    return read_root(read_yaml(path)).unwrap()


def root_from_mapping(mapping: Any, source: str = "<request>") -> Root:
    """Validate an already-parsed root (e.g. posted over HTTP); errors carry no line."""
    return read_root(document_from_mapping(mapping, source)).unwrap()
