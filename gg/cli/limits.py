"""Resource limits on the command line: ``gg fly --cpus --memory --pids`` and the policy's
defaults and maximums (``gg runner policy``); the rules are gg.domain.limits'."""

from __future__ import annotations

from typing import Any

from gg.cli.context import CliError
from gg.cli.exits import Exit
from gg.domain import limits as rules


def parse_limits(*, cpus: str | None, memory: str | None, pids: str | None,
                 prefix: str = "--") -> dict[str, Any]:
    """The limits given, as the wire takes them (cores, bytes, processes); a bad one is a
    usage error of one sentence naming its flag."""
    out: dict[str, Any] = {}
    for name, text, parse in (("cpus", cpus, rules.parse_cpus),
                              ("memory", memory, rules.parse_memory),
                              ("pids", pids, rules.parse_pids)):
        if text is None:
            continue
        try:
            out[name] = parse(text)
        except ValueError as exc:
            raise CliError(f"{prefix}{name}: {exc}", Exit.USAGE) from None
    return out


def policy_limits_text(policy: dict[str, Any]) -> str:
    """``; limits cpus 1, memory 512M (max memory 2G)`` for a policy that sets any."""
    defaults, maximums = rules.policy_limits(policy)
    if not defaults and not maximums:
        return ""
    text = f"; limits {defaults.text()}" if defaults else "; no default limits"
    if maximums:
        text += f" (max {maximums.text()})"
    return text
