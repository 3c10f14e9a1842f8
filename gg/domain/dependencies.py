"""Dependencies between flights: ``gg fly --after F1,F2 [--after-any]`` (docs/work-graphs.md).

A flight opened ``--after`` its dependencies is born as any other (``ready`` or ``gated``)
but is *held*: the claim does not offer it until every dependency has landed (with
``--after-any``: ended in any way). When a dependency fails, is cancelled or times out, a
dependent without ``--after-any`` is cancelled in the same transaction, and so in turn are
its own dependents, each naming the flight that failed first::

    build --failed--> test: cancelled "dependency f_build failed"
                      publish (after test): cancelled "dependency f_build failed"

Dependencies name flights that exist when the dependent opens, so the graph can never hold
a cycle. Pure: values in, decisions out.
"""

from __future__ import annotations

from dataclasses import dataclass

from gg.domain.flights import Stage

MAX_DEPENDENCIES = 100  # dependencies one flight may name


@dataclass(frozen=True)
class Dependency:
    """What a dependent reads of one of its dependencies."""

    id: str
    title: str
    stage: str
    ended_reason: str | None = None
    opened_by: str | None = None
    lease_runner: str | None = None

    @property
    def named(self) -> str:
        """``f_… (title)``, or the bare id for a flight without a title."""
        return f"{self.id} ({self.title})" if self.title else self.id


def distinct(ids: list[str]) -> list[str]:
    """The ids in the order given, each once (naming one flight twice is harmless)."""
    return list(dict.fromkeys(ids))


def ended_word(stage: str, reason: str | None) -> str | None:
    """How a dependency's ending reads in its dependents' reason (None: it landed, or has
    not ended): ``failed``, ``timed out`` or ``was cancelled``."""
    if stage == Stage.CANCELLED.value:
        return "was cancelled"
    if stage == Stage.FAILED.value:
        return "timed out" if (reason or "").startswith("timed out") else "failed"
    return None


def satisfied(stage: str, any_end: bool) -> bool:
    """Whether a dependency in ``stage`` no longer holds its dependent back."""
    return stage == Stage.LANDED.value or (any_end and Stage(stage).final)


def holding(dependencies: list[Dependency], any_end: bool) -> Dependency | None:
    """The first dependency (in the order given) that still holds the dependent back."""
    return next((d for d in dependencies if not satisfied(d.stage, any_end)), None)


def open_refusal(asked: list[str], found: dict[str, Dependency], any_end: bool) -> str | None:
    """Why a flight may not open ``--after`` the (distinct) ``asked`` ids, given the flights
    among them that exist in this organisation (``found``), in one sentence; None: it may."""
    if len(asked) > MAX_DEPENDENCIES:
        return (f"--after names {len(asked)} flights; a flight may depend on at most "
                f"{MAX_DEPENDENCIES}")
    for flight_id in asked:
        dependency = found.get(flight_id)
        if dependency is None:
            return f"--after: no flight {flight_id} in this organisation"
        word = ended_word(dependency.stage, dependency.ended_reason)
        if word is not None and not any_end:
            return (f"dependency {flight_id} already {word.removeprefix('was ')}: open it "
                    "with --after-any to run after it anyway")
    return None


def cancel_reason(origin: str, word: str) -> str:
    """A dependent's ended reason: the flight that failed first, and how it ended."""
    return f"dependency {origin} {word}"


def waiting(dependency: Dependency, any_end: bool) -> tuple[str, str]:
    """The waiting sentence and remedy of a flight held by ``dependency``
    (gg.domain.waiting puts it before SPEC 7's rung 1: no runner may take it yet)."""
    doing = "flying" if dependency.stage == Stage.FLYING.value else "waiting"
    until = "ends" if any_end else "lands"
    return (f"waiting: {dependency.named} is still {doing}",
            f"wait: it is offered to runners when {dependency.id} {until} "
            f"(gg show {dependency.id})")
