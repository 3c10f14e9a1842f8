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

An approval is for one exact spec (:mod:`gg.domain.specs`): the gate records the digest of
the spec it was opened for. A change to the spec of a flight under approval (``gg service
update``) while it waits replaces the spec and supersedes the gate with one for the new
digest, saying what changed; a change after it was approved is a **proposal**: the flight
keeps what was approved, and the proposal waits behind a new approval gate, applied only
when that gate clears (:func:`change_needs_approval`)::

    waiting flight --changed--> spec replaced, gate superseded by one for the new digest
    approved flight --changed--> proposal behind a new gate --approved--> the spec is replaced
                                                           --rejected--> the flight keeps its spec

Separation of duties: the person who opened a flight can never approve it, whatever their
role, by ``gg approve``, ``gg gate clear`` or ``gg force`` alike; nor can the person who
changed its spec approve that change. The rule that members clear
gates on their own flights (clearer ``opener``) does not reach approvals. Refusing is not
approving: an admin may reject a flight they opened (as they may cancel it).
"""

from __future__ import annotations

from typing import Any

from gg.domain.specs import short

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


def change_needs_approval(*, ever_gated: bool, environment: str | None,
                          environment_requires: bool,
                          root_approvals: tuple[str, ...] | list[str]) -> bool:
    """Whether a change to a flight's spec waits for an approval: it was opened behind one,
    or its environment requires one now (an environment that starts requiring approvals
    covers the changes of flights opened before)."""
    return ever_gated or needed(asked=False, environment=environment,
                                environment_requires=environment_requires,
                                root_approvals=root_approvals)


def why_changed(*, changed_by: str, approved: bool, changes: list[str]) -> str:
    """Why a changed spec needs its approval, as ``gg gates`` and the pending queue show it."""
    what = "; ".join(changes) or "nothing that runs"
    if approved:
        return (f"{changed_by} changed it after its approval ({what}); it keeps running what "
                "was approved until this is approved")
    return f"{changed_by} changed it while it waited ({what})"


def guards_change(flight_id: str) -> str:
    return f"the change of flight {flight_id}"


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


def changer_refusal(flight_id: str | None) -> str:
    return (f"you changed flight {flight_id}, so someone else must approve the change "
            "(separation of duties)")


def refusal_to_approve(person: dict[str, Any], *, flight_id: str | None, opener: str | None,
                       approver: str | None, approver_name: str | None,
                       changed_by: str | None = None) -> str | None:
    """Why ``person`` may not approve (clear the approval gate of) a flight, or None."""
    if opener is not None and person.get("id") == opener:
        return opener_refusal(flight_id)
    if changed_by is not None and person.get("id") == changed_by:
        return changer_refusal(flight_id)
    if person.get("role") == "admin" or (approver is not None and person.get("id") == approver):
        return None
    return f"only {approver_words(approver_name)} may approve flight {flight_id}"


def refusal_to_reject(person: dict[str, Any], *, flight_id: str, approver: str | None,
                      approver_name: str | None) -> str | None:
    """Why ``person`` may not reject a flight's approval, or None. Its opener, when not an
    admin, cancels it instead."""
    if person.get("role") == "admin" or (approver is not None and person.get("id") == approver):
        return None
    return (f"only {approver_words(approver_name)} may reject flight {flight_id}; "
            f"its opener may cancel it: gg cancel {flight_id}")


def refusal_to_name_approver(opener: dict[str, Any], approver: dict[str, Any] | None,
                             name: str) -> str | None:
    """Why ``--approver name`` is refused when ``opener`` opens a flight, or None."""
    if approver is None or approver.get("removed_at"):
        return f"--approver: there is no person named {name}"
    if approver["id"] == opener["id"]:
        return ("--approver: you cannot approve a flight you open (separation of duties); "
                "name someone else")
    return None


def digest_refusal(flight_id: str, *, wanted: str, given: str | None) -> str | None:
    """Why an approval given for digest ``given`` is refused when the flight's approval now
    stands for ``wanted`` (its spec changed since the approver looked), or None."""
    if given is None or given == wanted:
        return None
    return (f"flight {flight_id} changed since you looked: approving it now runs "
            f"{short(wanted)}, not {short(given)}; look again with gg show {flight_id}")


def rejected_reason(actor: str, reason: str | None) -> str:
    """The ended reason of a rejected flight."""
    return f"rejected by {actor}" + (f": {reason}" if reason else "")


def nobody_may_approve(*, admins: set[str], opener: str, changed_by: str | None,
                       named_approver: str | None) -> bool:
    """No live person may give this approval: none is named, and every admin opened the
    flight or changed it (nobody approves what they opened or changed)."""
    return named_approver is None and not (admins - {opener, changed_by})


def waiting(flight_id: str, who: str, *, nobody_may: bool = False) -> tuple[str, str]:
    """The waiting sentence of a flight behind its approval, and its remedy. ``nobody_may``:
    no person who may approve it exists (the only admin opened or changed it), so telling
    anyone to run ``gg approve`` would only be refused."""
    if nobody_may:
        return (f"waiting: needs approval by {who}, and nobody may give it: every admin "
                "opened or changed it",
                "an admin adds a second admin (gg person add NAME --admin), who approves it "
                f"with gg approve {flight_id}; or cancel it: gg cancel {flight_id}")
    return (f"waiting: needs approval by {who}: gg approve {flight_id}",
            f"{who} approves it with gg approve {flight_id}, or refuses it with "
            f"gg reject {flight_id} --reason WHY")
