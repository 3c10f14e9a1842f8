"""What one feature brings to another's use case, listed in one visible order.

Clearing a gate brings into force what its kind guarded, and applying a root envelope asks
what can serve each environment it lists; the features that own those kinds and providers
are many, the use cases that call them two (``gg.control.gates``, ``gg.control.environments``).
They meet here, where the app is built (``gg.server.app.create_app``: ``Core(...,
wiring=wired())``, and the tests' cores the same way), and nowhere else: importing a module
registers nothing, so what a use case does never depends on which modules were imported.
"""

from __future__ import annotations

from gg.control import approvals, environments, maintenance, pools, profiles, strategies
from gg.control.core import Wiring
from gg.domain import approvals as approval_rules


def wired() -> Wiring:
    """Every gate kind's clearing hook and every provider of environments, in order."""
    return Wiring(
        cleared={
            "environment": (environments.meaning_in_force,),  # its meaning comes into force
            "profile": (profiles.bring_into_force,),  # the applied profile, on its machines
            strategies.GATE_KIND: (strategies.bring_into_force,),  # a pool's whole strategy
            maintenance.MAINTENANCE: (maintenance.land_if_done,),  # the maintenance flight
            approval_rules.KIND: (approvals.approved,),  # an approved change, on its flight
        },
        providers=(
            environments.live_runners,  # online runners that advertise it
            pools.pools_providing,  # a pool in force for it, with or without members
        ),
    )
