"""Retries and reruns of flights (tables ``flight_retries``, ``flight_attempts``,
``flight_reruns``, ``root_retries``; gg.domain.retries decides): a row only for a flight that
has retries, was retried, or is a rerun."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gg.domain.retries import Decision, Pending, Retry
from gg.store.db import IN_CHUNK, Database


@dataclass(frozen=True)
class RetryState:
    """A flight's retry settings and how far it got: ``retried`` retries so far, the pending
    one ``held`` until ``offer_at``, ``avoid`` the runner whose attempt failed last."""

    retry: Retry
    retried: int = 0
    offer_at: float | None = None
    held: bool = False
    avoid: str | None = None


def _retry(retries: Any, on: Any, delay: Any, elsewhere: Any) -> Retry:
    return Retry(retries=int(retries) if retries is not None else None,
                 on=tuple(p for p in on.split(",") if p) if on else None,
                 delay=float(delay) if delay is not None else None,
                 elsewhere=bool(elsewhere) if elsewhere is not None else None)


class RetryRows:
    db: Database

    def set_retry(self, flight_id: str, retry: Retry) -> None:
        """A new flight's settled retry settings (in its opening's transaction)."""
        self.db.insert("flight_retries", {
            "flight_id": flight_id, "retries": retry.retries,
            "retry_on": ",".join(retry.on or ()), "delay": retry.delay,
            "elsewhere": int(bool(retry.elsewhere))})

    def retry_state(self, flight_id: str) -> RetryState | None:
        row = self.db.one("SELECT retries, retry_on, delay, elsewhere, retried, offer_at, held, "
                          "avoid_runner FROM flight_retries WHERE flight_id = ?", (flight_id,))
        if row is None:
            return None
        return RetryState(_retry(row[0], row[1], row[2], row[3]), int(row[4]), row[5],
                          bool(row[6]), row[7])

    def note_retry(self, flight_id: str, decision: Decision, *, epoch: int,
                   runner_id: str | None, at: float) -> None:
        """The attempt at ``epoch`` failed and is retried as ``decision`` says."""
        self.db.run("UPDATE flight_retries SET retried = ?, offer_at = ?, held = ?, "
                    "avoid_runner = ? WHERE flight_id = ?",
                    (decision.number, decision.offer_at, int(decision.offer_at is not None),
                     decision.avoid, flight_id))
        self.db.insert("flight_attempts", {
            "flight_id": flight_id, "epoch": epoch, "retry": decision.number,
            "of_retries": decision.of, "cause": decision.cause, "runner_id": runner_id,
            "at": at, "offer_at": decision.offer_at})

    def retried_attempts(self, flight_id: str) -> dict[int, dict[str, Any]]:
        """epoch -> how the attempt at that epoch was retried (``retry``, ``of``, ``cause``,
        ``offer_at``), for the attempts of ``flight_id`` that were."""
        rows = self.db.all("SELECT epoch, retry, of_retries, cause, offer_at FROM "
                           "flight_attempts WHERE flight_id = ? ORDER BY epoch", (flight_id,))
        return {int(r[0]): {"retry": int(r[1]), "of": int(r[2]), "cause": r[3],
                            "offer_at": r[4]} for r in rows}

    def held_retries(self) -> dict[str, Pending]:
        """flight id -> its retry whose delay holds it back (``held``), for every such flight."""
        rows = self.db.all(
            "SELECT r.flight_id, r.retried, r.retries, r.offer_at, a.cause FROM flight_retries "
            "AS r LEFT JOIN flight_attempts AS a ON a.flight_id = r.flight_id "
            "AND a.retry = r.retried WHERE r.held = 1")
        return {r[0]: Pending(int(r[1]), int(r[2]), r[4] or "", float(r[3])) for r in rows}

    def release_retries(self, flight_ids: list[str]) -> int:
        """Their delays are over: offer them again (the number released)."""
        released = 0
        for i in range(0, len(flight_ids), IN_CHUNK):
            part = flight_ids[i:i + IN_CHUNK]
            released += self.db.run(
                "UPDATE flight_retries SET held = 0 WHERE held = 1 "
                f"AND flight_id IN ({','.join('?' * len(part))})", tuple(part)).rowcount
        return released

    def next_retry_due(self) -> float | None:
        """When the earliest delayed retry may be offered (None: none waits)."""
        row = self.db.one("SELECT min(offer_at) FROM flight_retries WHERE held = 1")
        return row[0] if row else None

    def avoided_runners(self, flight_ids: list[str]) -> dict[str, str]:
        """flight id -> the runner a ``--retry-elsewhere`` retry keeps away from, for those
        of ``flight_ids`` that have one."""
        rows = self.db.all_in("SELECT flight_id, avoid_runner FROM flight_retries WHERE "
                              "avoid_runner IS NOT NULL AND flight_id IN ({ids})", flight_ids)
        return {fid: runner for fid, runner in rows}

    def avoided_ready(self) -> dict[str, str]:
        """:meth:`avoided_runners` of every ready flight (what a listing explains)."""
        rows = self.db.all(
            "SELECT r.flight_id, r.avoid_runner FROM flight_retries AS r JOIN flights AS f "
            "ON f.id = r.flight_id WHERE r.avoid_runner IS NOT NULL AND f.stage = 'ready'")
        return {fid: runner for fid, runner in rows}

    # -- reruns -----------------------------------------------------------------------------

    def set_rerun(self, flight_id: str, rerun_of: str) -> None:
        self.db.insert("flight_reruns", {"flight_id": flight_id, "rerun_of": rerun_of})

    def rerun_of(self, flight_id: str) -> str | None:
        row = self.db.one("SELECT rerun_of FROM flight_reruns WHERE flight_id = ?", (flight_id,))
        return row[0] if row else None

    def reruns(self, flight_id: str) -> list[str]:
        """The flights rerun from ``flight_id``, oldest first."""
        rows = self.db.all("SELECT r.flight_id FROM flight_reruns AS r JOIN flights AS f "
                           "ON f.id = r.flight_id WHERE r.rerun_of = ? ORDER BY f.seq",
                           (flight_id,))
        return [r[0] for r in rows]

    # -- the root envelope's retries: ---------------------------------------------------------

    def root_retries(self) -> dict[str, Retry]:
        rows = self.db.all("SELECT environment, retries, retry_on, delay, elsewhere "
                           "FROM root_retries ORDER BY environment")
        return {r[0]: _retry(r[1], r[2], r[3], r[4]) for r in rows}

    def save_root_retries(self, defaults: dict[str, Retry]) -> None:
        """The root envelope's ``retries:``, replacing what an earlier root set."""
        self.db.run("DELETE FROM root_retries")
        for env, retry in defaults.items():
            self.db.insert("root_retries", {
                "environment": env, "retries": retry.retries,
                "retry_on": ",".join(retry.on) if retry.on is not None else None,
                "delay": retry.delay,
                "elsewhere": int(retry.elsewhere) if retry.elsewhere is not None else None})
