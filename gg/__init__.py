"""gg: run work on a fleet of machines an organisation controls."""

__version__ = "0.1.0"
