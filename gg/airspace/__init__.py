"""Airspace files: the root envelope, fleet profiles and pool strategies, as YAML an
organisation keeps in version control. Every error names file, line and key (see
``docs/airspace.md``); the rules about values live in ``gg.domain`` so the server accepts
exactly what these loaders accept."""

from gg.airspace.check import Airspace, check_airspace, load_airspace
from gg.airspace.errors import AirspaceError
from gg.airspace.profiles import load_profile, profile_from_mapping
from gg.airspace.root import Root, load_root, root_from_mapping
from gg.airspace.strategies import load_strategy, strategy_from_mapping

__all__ = [
    "Airspace",
    "AirspaceError",
    "Root",
    "check_airspace",
    "load_airspace",
    "load_profile",
    "load_root",
    "load_strategy",
    "profile_from_mapping",
    "root_from_mapping",
    "strategy_from_mapping",
]
