"""Approvals: a flight that needs a person's yes before it may start (SPEC 18).

A flight needs an approval when it is opened with ``--approval`` (or ``--approver P``), when
its environment requires one (``gg environment approval NAME required``), or when the root
envelope lists its environment under ``approvals:``. It is born ``gated`` behind one gate of
kind ``approval`` whose clearer is ``approver``::

    open --approve (an admin or the named approver; never the opener)--> cleared
    open --force   (an admin; never the opener)                      --> cleared
    open --reject  (an admin or the named approver)                  --> rejected
                                                      (the flight ends cancelled, with the reason)
    open --the flight is cancelled                                   --> superseded

Separation of duties: the person who opened a flight can never approve it, whatever their
role, by ``gg approve``, ``gg gate clear`` or ``gg force`` alike. The rule that members clear
gates on their own flights (clearer ``opener``) does not reach approvals. Refusing is not
approving: an admin may reject a flight they opened (as they may cancel it).
"""

from __future__ import annotations

KIND = "approval"
CLEARER = "approver"


def needed(*, asked: bool, environment: str | None, environment_requires: bool,
           root_approvals: tuple[str, ...] | list[str]) -> bool:
    """Whether a new flight must wait for an approval."""
    if asked:
        return True
    if environment is None:
        return False
    return environment_requires or environment in root_approvals


def why(*, asked: bool, approver_name: str | None, environment: str | None,
        environment_requires: bool) -> str:
    """Why a flight needs its approval, as ``gg gates`` shows it."""
    if asked:
        return f"its opener asked for approval by {approver_words(approver_name)}"
    if environment_requires:
        return f"environment {environment} requires an approval for every flight"
    return f"the root envelope requires an approval for every flight in {environment}"


def subject(flight_id: str) -> str:
    return f"flight:{flight_id}/approval"


def guards(flight_id: str) -> str:
    return f"the start of flight {flight_id}"


def approver_words(approver_name: str | None) -> str:
    """Who may approve: ``an admin`` or ``an admin or ada``."""
    return f"an admin or {approver_name}" if approver_name else "an admin"


def opener_refusal(flight_id: str | None) -> str:
    return (f"you opened flight {flight_id}, so someone else must approve it "
            "(separation of duties)")


def refusal_to_approve(person: dict, *, flight_id: str | None, opener: str | None,
                       approver: str | None, approver_name: str | None) -> str | None:
    """Why ``person`` may not approve (clear the approval gate of) a flight, or None."""
    if opener is not None and person.get("id") == opener:
        return opener_refusal(flight_id)
    if person.get("role") == "admin" or (approver is not None and person.get("id") == approver):
        return None
    return f"only {approver_words(approver_name)} may approve flight {flight_id}"


def refusal_to_reject(person: dict, *, flight_id: str, approver: str | None,
                      approver_name: str | None) -> str | None:
    """Why ``person`` may not reject a flight's approval, or None. Its opener, when not an
    admin, cancels it instead."""
    if person.get("role") == "admin" or (approver is not None and person.get("id") == approver):
        return None
    return (f"only {approver_words(approver_name)} may reject flight {flight_id}; "
            f"its opener may cancel it: gg cancel {flight_id}")


def refusal_to_name_approver(opener: dict, approver: dict | None, name: str) -> str | None:
    """Why ``--approver name`` is refused when ``opener`` opens a flight, or None."""
    if approver is None or approver.get("removed_at"):
        return f"--approver: there is no person named {name}"
    if approver["id"] == opener["id"]:
        return ("--approver: you cannot approve a flight you open (separation of duties); "
                "name someone else")
    return None


def rejected_reason(actor: str, reason: str | None) -> str:
    """The ended reason of a rejected flight."""
    return f"rejected by {actor}" + (f": {reason}" if reason else "")


def waiting(flight_id: str, who: str) -> tuple[str, str]:
    """The waiting sentence of a flight behind its approval, and its remedy."""
    return (f"waiting: needs approval by {who}: gg approve {flight_id}",
            f"{who} approves it with gg approve {flight_id}, or refuses it with "
            f"gg reject {flight_id} --reason WHY")
