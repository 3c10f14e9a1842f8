"""Background duties, done by one replica at a time (docs/scale-out.md).

Several ``gg server`` replicas share one store. What each decides on a request is already
once: every rule that records something "once per episode" (an expiry, ``aged_out``, a
version skew, an attended deadline, a stale pool, a drained fleet) reads and writes inside
one write transaction, and write transactions of all replicas take turns, so the second
replica to look finds the episode recorded. The background loops are a different matter:
they would all do the same work (the hooks' outbox would send each delivery from every
replica, and every replica would poll each pull-mode runner). So each loop is a **duty**, held by
one replica at a time through a row of the
``duties`` table taken by a conditional write (:meth:`gg.store.Store.take_duty`): the holder
renews it every :func:`renew_every` seconds for DUTY_TTL; when the holder goes away, another
replica takes it over once DUTY_TTL has passed.
"""

from __future__ import annotations

from gg.control.core import Core

LIVENESS = "liveness"  # gg.server.liveness: aged_out of silent runners, due expiries
RETENTION = "retention"  # gg.server.retention: pruning ended history
HOOKS = "hooks"  # gg.server.hooks: the outbox's deliveries
PULL = "pull"  # gg.server.pull: polling the attached pull-mode runners
ALL = (LIVENESS, RETENTION, HOOKS, PULL)


def renew_every(core: Core) -> float:
    """How often the holder renews: well inside DUTY_TTL, and often enough that a starting
    replica can tell another is serving (:func:`served_by_another`)."""
    return max(0.05, min(core.settings.duty_ttl / 3, core.settings.lease_renew_at / 4))


def take(core: Core, names: tuple[str, ...] = ALL) -> set[str]:
    """Take or renew each duty for this replica; the ones it holds now."""
    now = core.now()
    with core.store.atomic(durable=False):  # a lost renewal is only a renewal to do again
        return {name for name in names
                if core.store.take_duty(name, core.replica, now, now + core.settings.duty_ttl)}


def give_up(core: Core) -> None:
    """This replica stops: its duties are free for another at once."""
    with core.store.atomic():
        core.store.drop_duties(core.replica)


def served_by_another(core: Core) -> bool:
    """Whether another replica was serving a moment ago (it renewed a duty within half of
    LEASE_RENEW_AT): then the control plane did not stop, its runners renewed their leases
    with that replica, and a starting replica must not extend their leases."""
    since = core.now() - core.settings.lease_renew_at / 2
    return core.store.duty_renewed_by_another(core.replica, since)
