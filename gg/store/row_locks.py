"""Per-object locks of a write transaction, for PostgreSQL's writers of several replicas.

There is no global write lock (docs/scale-out.md, "Isolation and locking"): a read-decide-write
whose decision rests on more than the row it changes takes the lock of the object that owns
the decision, for the rest of its transaction: a runner's seats (its slots and its size, while
it is granted flights), a concurrency key's count, a pool's bounds while a maintainer acts on
it, the artifacts' quota while an offer is counted, the organisation while it is made. Each is
a transaction-scoped advisory lock in gg's own two-int lock space (a class, then the object's
name hashed), so it never blocks a check-in's write of the same row. The claim's locks are
*tried*: a writer that finds one taken passes that object by in this pass (another replica is
granting there right now) rather than waiting, so writers never wait on each other in a claim
and never deadlock there. On SQLite the one writer serialises everything already: every lock
is held at once.
"""

from __future__ import annotations

from gg.store.db import Database

# gg's advisory lock classes (the two-int space, which never overlaps the one-bigint space of
# gg.store.postgres's migration lock): "gg" in ASCII, then a number per kind of object
KEY_LOCK_CLASS = 0x6767  # a concurrency key
RUNNER_LOCK_CLASS = 0x6768  # a runner, while it is granted flights
ORGANISATION_LOCK_CLASS = 0x6769  # the organisation and its owner, while they are made
POOL_LOCK_CLASS = 0x676A  # a pool, while a maintainer's action is checked against its plan
QUOTA_LOCK_CLASS = 0x676B  # the artifacts' quota, while an offer is counted against it


class RowLockRows:
    db: Database

    def _try_lock(self, lock_class: int, name: str) -> bool:
        if self.db.dialect != "postgresql":
            return True
        row = self.db.one("SELECT pg_try_advisory_xact_lock(?, hashtext(?))", (lock_class, name))
        return bool(row and row[0])

    def hold_runner(self, runner_id: str) -> bool:
        """Whether this transaction now holds the runner's grant lock (False: another
        replica's writer is granting it a flight right now)."""
        return self._try_lock(RUNNER_LOCK_CLASS, runner_id)

    def hold_concurrency_key(self, key: str) -> bool:
        """Whether this transaction now holds ``key``'s lock (False: another replica's writer
        is granting a flight of that key right now)."""
        return self._try_lock(KEY_LOCK_CLASS, key)

    def _lock(self, lock_class: int, name: str) -> None:
        if self.db.dialect == "postgresql":
            self.db.one("SELECT pg_advisory_xact_lock(?, hashtext(?))", (lock_class, name))

    def lock_pool(self, pool: str) -> None:
        """Wait until this transaction alone may act on ``pool``'s members (its bounds are
        counted after this)."""
        self._lock(POOL_LOCK_CLASS, pool)

    def lock_runner(self, runner_id: str) -> None:
        """Wait until no other writer is granting the runner a flight, and keep it so to the
        commit (a member's cycle ended under it races no claim; claims only try this lock,
        so waiting here never deadlocks with one)."""
        self._lock(RUNNER_LOCK_CLASS, runner_id)

    def lock_artifact_quota(self) -> None:
        """Wait until this transaction alone counts the stored artifacts against the
        server's quota (only offers of artifacts take turns on it)."""
        self._lock(QUOTA_LOCK_CLASS, "artifacts")

    def lock_organisation(self) -> None:
        """Wait until this transaction alone may make the organisation and its owner."""
        if self.db.dialect == "postgresql":
            self.db.one("SELECT pg_advisory_xact_lock(?, 0)", (ORGANISATION_LOCK_CLASS,))

    def note_once(self, table: str, key_column: str, key: str, column: str,
                  seen: object, value: object) -> bool:
        """Set ``column`` of one row to ``value`` only if it still holds ``seen`` (what this
        transaction read): the compare-and-set that records an episode once across replicas.
        On PostgreSQL a replica noting the same episode at the same moment waits for the
        other's commit, then finds the value changed (False: the other one records it)."""
        same = f'"{column}" IS NULL' if seen is None else f'"{column}" = ?'
        params = (value, key) if seen is None else (value, key, seen)
        cur = self.db.run(f'UPDATE {table} SET "{column}" = ? WHERE {key_column} = ? AND {same}',
                          params)
        return cur.rowcount == 1
