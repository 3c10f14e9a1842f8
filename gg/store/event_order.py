"""The event feed in commit order on PostgreSQL, for readers that follow it by seq.

Writers of several replicas commit side by side (no global write lock, docs/scale-out.md).
An event's seq taken when its row is inserted would be visible only at its transaction's
commit, and transactions commit in another order than they take numbers: a reader following
``seq > after`` (``gg events --follow``, the console's live tail, a replica's follower, a
bench waiting for a landing) would read up to 105 while 104 is still uncommitted, then ask
for ``after=105`` and never see 104.

So a write transaction's events are held (:class:`PendingEvents`) and inserted as its last
statements, once every other statement of it ran, after taking the events' turn:
``pg_advisory_xact_lock(EVENTS_TURN)``. PostgreSQL makes a commit visible before it releases
the transaction's locks, so the next transaction to take the turn takes its numbers after
every event committed before it: seq order is commit order, and a reader that saw seq N has
seen every event below N that will ever exist (a transaction that failed after taking its
numbers leaves a gap, which hides nothing). The turn is held from that insert to the COMMIT
only, not through the transaction's work.

A unit that is undone (its savepoint rolled back, or run again after losing to another
replica's writer) takes its held events back with it. A step that needs an event's seq in
the event's own transaction (a hook's delivery row) is handed it once the row is inserted, in
that transaction. SQLite has one writer: its events are inserted at once, with the seq given
to that step there and then.
"""

from __future__ import annotations

from typing import Callable

EVENTS_TURN = 0x6767_0000_0003  # the advisory lock key ("gg" in ASCII, then a number)
# How long a transaction waits for the events' turn: another replica's writer holds it only
# through its commit, and one frozen there is ended by the database after the hold timeout.
TURN_WAIT = "30s"
TAKE_TURN = "SELECT set_config('lock_timeout', ?, true), pg_advisory_xact_lock(?)"

COLUMNS = ("kind", "at", "actor", "runner_id", "flight_id", "body")
ROWS_A_STATEMENT = 500  # event rows in one INSERT (six parameters each)
# (The statements are SQLite's words, as every statement of the store: see gg.store.dialect.)

Then = Callable[[int], None]  # handed the event's seq, in its transaction


def event_row(values: dict) -> tuple:
    """An event's values (by column name) as a row of COLUMNS."""
    return tuple(values.get(c) for c in COLUMNS)


def insert_statement(rows: int) -> str:
    """One INSERT of ``rows`` events answering their seqs, in the rows' order."""
    marks = "(" + ", ".join(["?"] * len(COLUMNS)) + ")"
    return (f"INSERT INTO events ({', '.join(COLUMNS)}) VALUES "
            + ", ".join([marks] * rows) + " RETURNING seq")


class PendingEvents:
    """One write transaction's events, held until its end."""

    __slots__ = ("rows", "then")

    def __init__(self) -> None:
        self.rows: list[tuple] = []
        self.then: list[Then | None] = []

    def add(self, values: dict, then: Then | None) -> None:
        self.rows.append(event_row(values))
        self.then.append(then)

    def mark(self) -> int:
        """Where a savepoint begins (handed back to :meth:`undo`)."""
        return len(self.rows)

    def undo(self, mark: int) -> None:
        """Take back what was held after ``mark`` (its savepoint was rolled back)."""
        del self.rows[mark:]
        del self.then[mark:]

    def take(self, at_most: int = ROWS_A_STATEMENT) -> tuple[list[tuple], list[Then | None]]:
        """The oldest ``at_most`` held events, no longer held."""
        rows, then = self.rows[:at_most], self.then[:at_most]
        del self.rows[:at_most]
        del self.then[:at_most]
        return rows, then

    def __bool__(self) -> bool:
        return bool(self.rows)
