"""Environments and the root envelope: which environment a flight may name (SPEC 6 and 8).

An environment's life::

    (unknown) --chart--> charted, gate open, no meaning in force
                              |  gate cleared
                              v
                         in force (meaning M1)  --re-chart M2--> in force M1, gate open on M2
                                  ^                                    |  gate cleared
                                  +------------------------------------+  (M2 in force)

A flight may name environment X only when, in this order:

1. a root envelope has been applied and lists X (or no root was ever applied);
2. X is charted;
3. X has a meaning in force (its first gate cleared).

While a *re-chart* waits for its gate, X stays usable under its old meaning, but every
waiting flight of X (and every new one) is held behind the new gate: the admin asked for the
environment to mean something else, so nothing should start under the old meaning meanwhile.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Environment:
    name: str
    meaning: str | None  # the meaning in force; None until the first chart gate clears
    gate_id: str | None  # the gate of the latest chart (open, cleared or superseded)
    charted_at: float
    charted_by: str | None = None
    cleared_at: float | None = None
    cleared_by: str | None = None

    @property
    def pair(self) -> str:
        return label_pair(self.name)


@dataclass(frozen=True)
class RootEnvelope:
    environments: tuple[str, ...]
    applied_at: float
    applied_by: str | None = None
    timeouts: dict[str, float] = field(default_factory=dict)  # default limit per environment
    approvals: tuple[str, ...] = ()  # environments whose every flight needs an approval


def label_pair(environment: str) -> str:
    """A flight in environment X requires the label ``environment=X``."""
    return f"environment={environment}"


def refusal_to_fly(name: str, env: Environment | None, root: RootEnvelope | None,
                   open_gate: str | None) -> tuple[str, str] | None:
    """Why a flight may not name environment ``name`` now: ``(code, sentence)`` naming the
    missing step, or None. ``open_gate`` is the id of the open gate of ``env``'s latest chart.
    """
    if root is not None and name not in root.environments:
        listed = ", ".join(root.environments) if root.environments else "no environments"
        return ("environment_not_in_root",
                f"environment {name} is not in the root envelope (it lists {listed}); "
                f"add it to airspace/root.yaml and run gg airspace apply")
    if env is None:
        return ("environment_not_charted",
                f"environment {name} is not charted; an admin charts it with "
                f"gg environment chart {name} --means PREDICATE")
    if env.meaning is None:
        gate = open_gate or env.gate_id
        return ("environment_gated",
                f"environment {name} is charted but waits for gate {gate}; an admin clears it "
                f"with gg gate clear {gate}")
    return None


def gate_words(name: str, first: bool) -> str:
    """What a chart gate guards, as ``gg gates`` and the waiting sentence show it."""
    return f"{'charting' if first else 're-charting'} environment {name}"


def unserved(environments: tuple[str, ...], providers: dict[str, list[str]]) -> list[str]:
    """The environments of a root envelope that nothing provides (in the order listed)."""
    return [name for name in environments if not providers.get(name)]


def unserved_sentence(names: list[str], refuted: dict[str, list[str]] | None = None,
                      gated: dict[str, tuple[str, str]] | None = None) -> str:
    """``refuted``: environment -> live runners that state it but whose facts refute it.
    ``gated``: environment -> (gate id, what waits behind it) when what would serve it (a
    fleet profile, a strategy) is applied but its gate is still open: then the missing step
    is clearing that gate, not bringing up a runner."""
    refuted = refuted or {}
    gated = gated or {}
    if names and all(n in gated for n in names):
        steps = "; ".join(f"environment {n} is served by {gated[n][1]}, which waits behind "
                          f"gate {gated[n][0]} (an admin clears it: gg gate clear {gated[n][0]})"
                          for n in names)
        return f"the root envelope lists environments no live runner advertises yet: {steps}"
    notes = [f"{', '.join(refuted[n])} {'states' if len(refuted[n]) == 1 else 'state'} "
             f"environment={n}, but the facts refute it" for n in names if refuted.get(n)]
    tail = f" ({'; '.join(notes)})" if notes else ""
    if len(names) == 1:
        name = names[0]
        return (f"the root envelope lists environment {name}, which no live runner advertises; "
                f"bring one up first (gg runner up --labels environment={name}){tail}")
    listed = ", ".join(names)
    return (f"the root envelope lists environments {listed}, which no live runner advertises; "
            f"bring runners up first (gg runner up --labels environment=NAME){tail}")
