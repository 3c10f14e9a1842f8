"""sqlite_utils, imported without numpy.

sqlite_utils imports numpy, where it is installed, only to map numpy's number types to column
types; gg never stores a numpy value, and the import cost about 0.1 s of CPU at every start of
a process that opens a store (each ``gg server``). This module is the store package's first
import: it imports sqlite_utils with numpy hidden, then unhides it, so anything else in the
process that wants numpy still gets it.
"""

from __future__ import annotations

import sys


def import_without_numpy() -> None:
    if "sqlite_utils" in sys.modules or "numpy" in sys.modules:
        return  # imported already (a test process): nothing to save
    sys.modules["numpy"] = None  # type: ignore[assignment]  # import numpy: ImportError
    try:
        import sqlite_utils  # noqa: F401
    finally:
        del sys.modules["numpy"]


import_without_numpy()
