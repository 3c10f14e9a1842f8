"""What a write transaction holds for its end: items folded into one row each, once.

A row that every unit of its kind rewrites (a kind of flight's duration summary, rewritten by
every landing of that kind) is a hot row: written where each unit runs, it is locked from
that unit to the commit, through every other unit of the group. On PostgreSQL a writer of
another replica landing a flight of the same kind then waits for that whole group commit,
and its own group holds its rows meanwhile, so the replicas' writers take turns on it
(docs/performance.md, "A hot row: the durations"). So such a unit only holds its item
(:meth:`gg.store.db.Database.hold`), and the transaction's end folds every item of a kind in
one read and one write of its row: on SQLite as its last statements, on PostgreSQL after the
events' turn is taken (gg.store.event_order), which every writer takes before its last
statements, so no writer ever waits for another's row lock there, and each folds into what
the one before it committed (a read-then-write of two replicas can lose neither's items).

A savepoint rolled back takes back what its unit held, as the rows it wrote. What is held
is not in its row until the transaction's end: a read of that row in the same transaction
sees the row without it (start estimates read the durations outside any write, so none does).
"""

from __future__ import annotations

from typing import Any, Callable

Fold = Callable[[list], None]  # a kind's items of one transaction, folded in that transaction


class Held:
    """One write transaction's held items, in the order they were held."""

    __slots__ = ("items", "added")

    def __init__(self) -> None:
        self.items: list[tuple[str, Any]] = []
        self.added = 0  # items ever held in this transaction: grows with every one

    def add(self, kind: str, item: Any) -> None:
        self.items.append((kind, item))
        self.added += 1

    def mark(self) -> int:
        """Where a savepoint begins (handed back to :meth:`undo`)."""
        return len(self.items)

    def undo(self, mark: int) -> None:
        """Take back what was held after ``mark`` (its savepoint was rolled back)."""
        del self.items[mark:]

    def take(self) -> list[tuple[str, list]]:
        """Every held item by kind (kinds in name order, items in the order held), no
        longer held."""
        by_kind: dict[str, list] = {}
        for kind, item in self.items:
            by_kind.setdefault(kind, []).append(item)
        self.items = []
        return sorted(by_kind.items())

    def __bool__(self) -> bool:
        return bool(self.items)


def fold_all(held: Held, folds: dict[str, Fold]) -> None:
    """Every kind's items folded by its fold, inside the transaction about to commit."""
    for kind, items in held.take():
        folds[kind](items)
