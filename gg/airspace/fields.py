"""Typed, located reading of one mapping in a Document.

Every loader (root, profile, strategy) reads its keys through ``Fields`` so that all of them
word their errors alike, name file, line and key the same way, and refuse unknown keys. A
``Fields`` never raises: it records each problem in a shared list and hands back None, so one
pass over a file reports every mistake in it (``gg fleet check`` shows them all at once);
``Checked.value`` is only built when that list stayed empty.

A key written with no value (``trackers:``) counts as absent: an optional key then takes its
default, a required key is reported missing.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from gg.airspace.errors import AirspaceError, describe
from gg.airspace.yamlfile import Document, join

__all__ = ["Checked", "Fields", "sort_errors"]

T = TypeVar("T")
Check = Callable[[str], "str | None"]
_ABSENT = object()


@dataclass(frozen=True)
class Checked(Generic[T]):
    """A loader's answer: the value when the input was good, else every error found in it."""

    value: T | None
    errors: tuple[AirspaceError, ...] = ()

    def unwrap(self) -> T:
        """The value, or the first error (by line) raised."""
        if self.errors:
            raise self.errors[0]
        if self.value is None:  # pragma: no cover - loaders always give a reason
            raise AirspaceError("could not be read")
        return self.value


def sort_errors(errors: Iterable[AirspaceError]) -> tuple[AirspaceError, ...]:
    """Errors in reading order: by file, then line (errors without a line first)."""
    return tuple(sorted(errors, key=lambda e: (e.file or "", e.line or 0)))


class Fields:
    """The keys of one mapping at ``path``, read one by one; see the module docstring."""

    def __init__(self, doc: Document, errors: list[AirspaceError], path: str,
                 data: dict[str, Any]) -> None:
        self.doc = doc
        self.errors = errors
        self.path = path
        self.data = data
        self.known: list[str] = []

    @classmethod
    def top(cls, doc: Document, errors: list[AirspaceError], needs: str) -> Fields | None:
        """The document's top mapping, or None (with an error) when it is empty or not one.
        ``needs`` finishes the sentence for an empty file, e.g. "a profile needs purpose"."""
        if doc.data is None or doc.data == {}:
            errors.append(AirspaceError(f"is empty; {needs}", file=doc.file,
                                        line=doc.value_lines.get("")))
            return None
        if not isinstance(doc.data, dict):
            errors.append(AirspaceError(f"must be a mapping of keys to values (got "
                                        f"{describe(doc.data)})", file=doc.file,
                                        line=doc.value_lines.get("")))
            return None
        return cls(doc, errors, "", doc.data)

    # -- reporting -----------------------------------------------------------------------

    def fail(self, key: str | None, problem: str, *, at: str = "value") -> None:
        """Record ``problem`` about ``key`` (None: this mapping itself). ``at`` picks the line:
        the ``value``'s, the ``key``'s, or the enclosing ``mapping``'s (for a missing key)."""
        path = join(self.path, key) if key else self.path
        lines_key, lines_value = self.doc.key_lines, self.doc.value_lines
        if at == "key":
            line = lines_key.get(path)
        elif at == "mapping":
            line = lines_key.get(self.path) if self.path else lines_value.get("")
        else:
            line = lines_value.get(path, lines_key.get(path))
        self.errors.append(AirspaceError(problem, file=self.doc.file, line=line, key=path or None))

    def _take(self, key: str, required: bool) -> Any:
        self.known.append(key)
        value = self.data.get(key)
        if value is None:
            if required:
                self.fail(key, "is required", at="key" if key in self.data else "mapping")
            return _ABSENT
        return value

    # -- typed getters -------------------------------------------------------------------

    def text(self, key: str, *, required: bool = False, default: str | None = None,
             check: Check | None = None) -> str | None:
        value = self._take(key, required)
        if value is _ABSENT:
            return default
        if not isinstance(value, str):
            self.fail(key, f"must be text (got {describe(value)})")
            return None
        if not value.strip():
            self.fail(key, "must not be empty")
            return None
        problem = check(value) if check else None
        if problem:
            self.fail(key, problem)
            return None
        return value

    def boolean(self, key: str, *, default: bool) -> bool | None:
        value = self._take(key, False)
        if value is _ABSENT:
            return default
        if not isinstance(value, bool):
            self.fail(key, f"must be true or false (got {describe(value)})")
            return None
        return value

    def integer(self, key: str, *, required: bool = False, default: int | None = None,
                minimum: int | None = None, maximum: int | None = None) -> int | None:
        value = self._take(key, required)
        if value is _ABSENT:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(key, f"must be a whole number (got {describe(value)})")
            return None
        if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
            if maximum is None:
                self.fail(key, f"must be at least {minimum} (got {value})")
            elif minimum is None:
                self.fail(key, f"must be at most {maximum} (got {value})")
            else:
                self.fail(key, f"must be from {minimum} to {maximum} (got {value})")
            return None
        return value

    def choice(self, key: str, options: tuple[str, ...], *, required: bool = False,
               default: str | None = None) -> str | None:
        value = self._take(key, required)
        if value is _ABSENT:
            return default
        if value not in options or not isinstance(value, str):
            self.fail(key, f"must be one of {', '.join(options)} (got {describe(value)})")
            return None
        return value

    def texts(self, key: str, *, required: bool = False, non_empty: bool = False,
              check: Check | None = None, options: tuple[str, ...] | None = None,
              same: Callable[[str], str] = lambda v: v,
              normalise: Callable[[str], str] = lambda v: v) -> tuple[str, ...] | None:
        """A list of texts. ``same`` gives the key two items must not share (duplicates are
        refused); ``normalise`` is how each item is kept."""
        value = self._take(key, required)
        if value is _ABSENT:
            return ()
        if not isinstance(value, list):
            self.fail(key, f"must be a list (got {describe(value)})")
            return None
        if non_empty and not value:
            self.fail(key, "must list at least one item")
            return None
        items: list[str] = []
        first: dict[str, int] = {}
        ok = True
        for i, item in enumerate(value):
            where = f"{key}[{i}]"
            if not isinstance(item, str) or not item.strip():
                self.fail(where, f"must be text (got {describe(item)})")
                ok = False
                continue
            item = item.strip()
            if options is not None and item not in options:
                self.fail(where, f"must be one of {', '.join(options)} (got {describe(item)})")
                ok = False
                continue
            problem = check(item) if check else None
            if problem:
                self.fail(where, problem)
                ok = False
                continue
            k = same(item)
            if k in first:
                self.fail(where, f"repeats {describe(item)} (already {key}[{first[k]}])")
                ok = False
                continue
            first[k] = i
            items.append(normalise(item))
        return tuple(items) if ok else None

    def section(self, key: str, *, required: bool = False) -> Fields | None:
        """A nested mapping; None when it is absent (and optional) or wrong."""
        value = self._take(key, required)
        if value is _ABSENT:
            return None
        if not isinstance(value, dict):
            self.fail(key, f"must be a mapping of keys to values (got {describe(value)})")
            return None
        return Fields(self.doc, self.errors, join(self.path, key), value)

    def finish(self, belongs: dict[str, str] | None = None) -> None:
        """Refuse every key no getter asked for, suggesting the nearest known one; ``belongs``
        maps keys people often write one level too high to the section they belong in."""
        for key in self.data:
            if key in self.known:
                continue
            if belongs and key in belongs:
                self.fail(key, f"is not a known key here (it belongs under {belongs[key]})",
                          at="key")
                continue
            close = difflib.get_close_matches(key, self.known, n=1, cutoff=0.6)
            hint = (f"did you mean {close[0]}?" if close
                    else f"the known keys are {', '.join(self.known)}")
            self.fail(key, f"is not a known key ({hint})", at="key")
