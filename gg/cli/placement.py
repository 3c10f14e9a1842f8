"""Placement's commands: environments, the airspace root, labels, ownership and plans.

One registration point so the core's ``app.py`` names placement once.
"""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    from gg.cli import airspace, environments, ownership, plan

    for module in (environments, airspace, ownership, plan):
        module.register(app)
