"""Every kind of event the audit feed records, named once.

A kind reads ``level:subject:what``; the stored string is the member's value and never
changes, because people filter the feed by it (``gg events --kind info:runner:``) and old
rows keep it. Record and filter through these members, never a literal.
"""

from __future__ import annotations

from enum import StrEnum


class EventKind(StrEnum):
    # runners
    RUNNER_REGISTERED = "info:runner:registered"
    RUNNER_ENROLLED = "info:runner:enrolled"
    RUNNER_ATTACHED = "info:runner:attached"
    RUNNER_GOODBYE = "info:runner:goodbye"
    RUNNER_RETIRED = "info:runner:retired"
    RUNNER_FORGOTTEN = "info:runner:forgotten"
    RUNNER_DRAIN_CHANGED = "info:runner:drain_changed"
    RUNNER_POLICY_CHANGED = "info:runner:policy_changed"
    RUNNER_CREDENTIALS = "info:runner:credentials"
    RUNNER_CREDENTIAL_RENEWED = "info:runner:credential_renewed"
    RUNNER_LABELS_CHANGED = "info:runner:labels_changed"
    RUNNER_RECOVERED = "info:runner:recovered"
    RUNNER_CLAIMED = "info:runner:claimed"
    RUNNER_UNCLAIMED = "info:runner:unclaimed"
    RUNNER_RESERVED = "info:runner:reserved"
    RUNNER_RELEASED = "info:runner:released"
    RUNNER_OWNERSHIP_CHANGED = "info:runner:ownership_changed"
    RUNNER_AGED_OUT = "warn:runner:aged_out"
    RUNNER_VERSION_SKEW = "warn:runner:version_skew"
    RUNNER_DEGRADED = "warn:runner:degraded"
    RUNNER_LABEL_REFUTED = "warn:runner:label_refuted"
    RUNNER_MOVED = "info:runner:moved"  # to another group
    RUNNER_GROUP_DRAIN_CHANGED = "info:runner:group_drain_changed"
    # groups and the fleet-wide stop
    GROUP_SET = "info:group:set"
    GROUP_DELETED = "info:group:deleted"
    ATTRIBUTE_SET = "info:attribute:set"
    FLEET_QUIESCED = "info:fleet:quiesced"
    FLEET_RESUMED = "info:fleet:resumed"
    FLEET_DRAINED = "warn:fleet:drained"
    # flights
    FLIGHT_OPENED = "info:flight:opened"
    FLIGHT_CLAIMED = "info:flight:claimed"
    FLIGHT_EXPIRED = "info:flight:expired"
    FLIGHT_RETURNED = "info:flight:returned"
    FLIGHT_LANDED = "info:flight:landed"
    FLIGHT_FAILED = "info:flight:failed"
    FLIGHT_CANCELLED = "info:flight:cancelled"
    FLIGHT_RETRIED = "info:flight:retried"  # a failed attempt with a retry left (gg.domain.retries)
    FLIGHT_RERUN = "info:flight:rerun"  # opened by gg rerun from another flight's spec
    FLIGHT_APPROVED = "info:flight:approved"  # its approval gate cleared (gg approve, gg gate clear)
    FLIGHT_REJECTED = "info:flight:rejected"  # its approval refused: it ends cancelled
    FLIGHT_FORCED = "info:flight:forced"  # an admin cleared every gate a person may clear on it
    FLIGHT_ID_TOKEN = "info:flight:id_token"  # an identity token minted for it (docs/jobs.md)
    FLIGHT_ARTIFACT = "info:flight:artifact"  # a file it left stored (docs/work-graphs.md)
    SIGNING_KEY_ROTATED = "info:signing_key:rotated"  # identity tokens' signing key
    # secrets (docs/jobs.md): names, never a value
    SECRET_SET = "info:secret:set"
    SECRET_REMOVED = "info:secret:removed"
    SECRET_DELIVERED = "info:secret:delivered"  # with a grant: its names, flight, runner, epoch
    # services (docs/services.md)
    SERVICE_UPDATED = "info:service:updated"
    # consoles to a machine (docs/console.md)
    CONSOLE_OPENED = "info:console:opened"
    CONSOLE_CLOSED = "info:console:closed"
    # gates
    GATE_OPENED = "info:gate:opened"
    GATE_CLEARED = "info:gate:cleared"
    # pools
    POOL_ATTESTED = "info:pool:attested"
    POOL_MAINTAINER_ALLOWED = "info:pool:maintainer_allowed"
    POOL_STALE = "warn:pool:stale"
    POOL_SCALED = "info:pool:scaled"
    POOL_MEMBER_NEVER_JOINED = "warn:pool:member_never_joined"
    # people and enrolment
    PERSON_ADDED = "info:person:added"
    PERSON_REMOVED = "info:person:removed"
    PERSON_TOKEN_ROTATED = "info:person:token_rotated"
    PERSON_SIGNED_IN = "info:person:signed_in"  # to the web console (docs/web-console.md)
    PERSON_SIGNED_OUT = "info:person:signed_out"
    ENROLMENT_TOKEN_MINTED = "info:enrolment:token_minted"
    ENROLMENT_TOKEN_REVOKED = "info:enrolment:token_revoked"
    # airspace
    STRATEGY_APPLIED = "info:strategy:applied"
    STRATEGY_PINNED = "info:strategy:pinned"
    PROFILE_APPLIED = "info:profile:applied"
    PROFILE_IN_FORCE = "info:profile:in_force"
    ENVIRONMENT_CHARTED = "info:environment:charted"
    ENVIRONMENT_IN_FORCE = "info:environment:in_force"
    ENVIRONMENT_APPROVAL = "info:environment:approval_changed"
    ROOT_APPLIED = "info:root:applied"
    PROFILE_DELETED = "info:profile:deleted"
    ENVIRONMENT_REMOVED = "info:environment:removed"
    STRATEGY_DELETED = "info:strategy:deleted"
    # hooks
    HOOK_ADDED = "info:hook:added"
    HOOK_REMOVED = "info:hook:removed"


EVENT_KINDS = tuple(k.value for k in EventKind)

# The largest seq an event or a fact can have: a 64-bit integer on both stores. A reader's
# ``after`` past it is refused, never handed to SQLite (which cannot bind a larger integer).
SEQ_MAX = 2**63 - 1

# A flight handed back with a final outcome records the event of that outcome.
# (Keyed by the outcome's value: gg.domain.flights records these, so this module imports none of it.)
ENDED_BY = {"landed": EventKind.FLIGHT_LANDED, "failed": EventKind.FLIGHT_FAILED}

# The events after which a flight is final (one per flight, see gg.proof.invariants).
FINAL_EVENTS = (EventKind.FLIGHT_LANDED, EventKind.FLIGHT_FAILED, EventKind.FLIGHT_CANCELLED)

# The events that make a flight offerable again; the latest one before a grant is when the
# flight started waiting for that grant.
READY_EVENTS = (EventKind.FLIGHT_OPENED, EventKind.FLIGHT_RETURNED, EventKind.FLIGHT_EXPIRED,
                EventKind.GATE_CLEARED, EventKind.FLIGHT_RETRIED)


def flight_ended(outcome: str) -> EventKind:
    """The event a final hand-back records: ``landed`` or ``failed``."""
    return ENDED_BY[str(getattr(outcome, "value", outcome))]
