"""What a failure of the store means to whoever asked: the host's fault, not theirs.

Two faults of the machine are answered ``503`` in one sentence, never ``500 internal`` with a
traceback (docs/server.md, "Faults"):

- the disk is full (SQLite's ``SQLITE_FULL``, an ``OSError`` ``ENOSPC``/``EDQUOT``, or
  PostgreSQL's ``disk_full``): :class:`~gg.errors.InsufficientStorage`;
- the database cannot be reached (PostgreSQL down, restarting, or the network to it gone):
  :class:`~gg.errors.DatabaseUnavailable`.

Either way nothing of the request was stored: every write is one transaction, rolled back
whole when any statement of it fails. The server's one error mapper asks :func:`fault`
(``gg.server.errors``); the SQL libraries' exception classes stay in the store.
"""

from __future__ import annotations

import errno
import sqlite3
import sys

from gg.errors import DatabaseUnavailable, InsufficientStorage, Unavailable

_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
# SQLSTATE classes of a database that is not there: 08 connection exception, 57P0x the server
# shutting down or starting up; a client-side failure to connect has no SQLSTATE at all.
_AWAY_STATES = ("08", "57P")


def fault(exc: BaseException) -> Unavailable | None:
    """The host's fault ``exc`` stands for, or None when it is something else (a bug)."""
    if isinstance(exc, Unavailable):
        return exc
    if isinstance(exc, OSError) and exc.errno in _FULL_ERRNOS:
        return InsufficientStorage()
    if isinstance(exc, sqlite3.Error):
        if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL or \
                "database or disk is full" in str(exc):
            return InsufficientStorage()
        return None
    psycopg = sys.modules.get("psycopg")  # imported only by a server on PostgreSQL
    if psycopg is not None and isinstance(exc, psycopg.Error):
        if isinstance(exc, psycopg.errors.DiskFull):
            return InsufficientStorage()
        if database_away(exc):
            return DatabaseUnavailable()
    return None


def database_away(exc: BaseException) -> bool:
    """Whether a PostgreSQL failure says the database cannot be reached (rather than that
    a statement was refused)."""
    psycopg = sys.modules.get("psycopg")
    if psycopg is None:
        return False
    if isinstance(exc, psycopg.InterfaceError):  # a connection already closed under us
        return True
    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = getattr(exc, "sqlstate", None)
    return state is None or state.startswith(_AWAY_STATES)


def fault_types() -> tuple[type[Exception], ...]:
    """The exception classes :func:`fault` may recognise, for the server's handlers."""
    types: list[type[Exception]] = [OSError, sqlite3.Error]
    psycopg = sys.modules.get("psycopg")
    if psycopg is not None:
        types.append(psycopg.Error)
    return tuple(types)
