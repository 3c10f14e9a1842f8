"""Artifacts (migration 1000): a flight's artifacts, its inputs, and the blobs they point at.

Rows: ``flight_artifacts`` (one per artifact a flight left: name, digest, size, the epoch that
uploaded it), ``flight_artifact_terms`` (a flight opened with ``--artifact-limit`` or
``--with-artifacts``), ``flight_inputs`` (the dependencies whose artifacts it is handed, each
with its directory of ``$GG_INPUTS``) and ``artifact_blobs`` (one row per digest stored,
whoever names it).

A blob's content is kept by :class:`FileBlobs` on SQLite (a file per digest under the data
dir's ``artifacts/``) and by :class:`RowBlobs` on PostgreSQL (``artifact_chunks``, rows of
CHUNK bytes in the same database, which every replica reaches). Either way it is written and
read a chunk at a time, never whole in memory.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Iterator

import sqlite_utils

from gg.domain.artifacts import CHUNK
from gg.store.db import Database


def migrate_artifacts(db: sqlite_utils.Database) -> None:
    """Tables of their own keyed by flight id, no flights column (docs/architecture.md)."""
    db.executescript(
        """
        CREATE TABLE flight_artifacts (
            flight_id TEXT NOT NULL,
            name TEXT NOT NULL,
            digest TEXT NOT NULL,
            size INTEGER NOT NULL,
            epoch INTEGER NOT NULL,
            at REAL NOT NULL,
            PRIMARY KEY (flight_id, name)
        );
        CREATE INDEX flight_artifacts_digest ON flight_artifacts (digest);
        CREATE TABLE flight_artifact_terms (
            flight_id TEXT PRIMARY KEY,
            artifact_limit INTEGER,
            inputs INTEGER NOT NULL
        );
        CREATE TABLE flight_inputs (
            flight_id TEXT NOT NULL,
            dependency_id TEXT NOT NULL,
            dir TEXT NOT NULL,
            position INTEGER NOT NULL,
            PRIMARY KEY (flight_id, dependency_id)
        );
        CREATE TABLE artifact_blobs (
            digest TEXT PRIMARY KEY,
            size INTEGER NOT NULL,
            at REAL NOT NULL
        );
        CREATE TABLE artifact_chunks (
            digest TEXT NOT NULL,
            seq INTEGER NOT NULL,
            data BLOB NOT NULL,
            PRIMARY KEY (digest, seq)
        );
        """
    )


class ArtifactRows:
    db: Database

    # -- a flight's terms and inputs ----------------------------------------------------

    def set_artifact_terms(self, flight_id: str, limit: int | None, inputs: bool) -> None:
        self.db.insert("flight_artifact_terms", {"flight_id": flight_id,
                                                 "artifact_limit": limit, "inputs": int(inputs)})

    def artifact_limit_of(self, flight_id: str) -> int | None:
        row = self.db.one("SELECT artifact_limit FROM flight_artifact_terms WHERE flight_id = ?",
                          (flight_id,))
        return row[0] if row else None

    def add_inputs(self, flight_id: str, dirs: list[tuple[str, str]]) -> None:
        for position, (dependency_id, directory) in enumerate(dirs):
            self.db.insert("flight_inputs", {"flight_id": flight_id,
                                             "dependency_id": dependency_id, "dir": directory,
                                             "position": position})

    def inputs_of(self, flight_id: str) -> list[dict]:
        """Every artifact the flight is handed: its dependency, directory, name, digest and
        size, dependency by dependency in the order given, names in order."""
        rows = self.db.all(
            "SELECT i.dependency_id, i.dir, a.name, a.digest, a.size FROM flight_inputs AS i "
            "JOIN flight_artifacts AS a ON a.flight_id = i.dependency_id "
            "WHERE i.flight_id = ? ORDER BY i.position, a.name", (flight_id,))
        return [{"flight": r[0], "dir": r[1], "name": r[2], "sha256": r[3], "size": r[4]}
                for r in rows]

    def input_artifact(self, flight_id: str, dependency_id: str, name: str) -> dict | None:
        """An artifact of ``dependency_id`` that ``flight_id`` is handed, or None."""
        row = self.db.one(
            "SELECT a.digest, a.size FROM flight_inputs AS i JOIN flight_artifacts AS a "
            "ON a.flight_id = i.dependency_id WHERE i.flight_id = ? AND i.dependency_id = ? "
            "AND a.name = ?", (flight_id, dependency_id, name))
        return {"sha256": row[0], "size": row[1]} if row else None

    # -- a flight's artifacts -----------------------------------------------------------

    def artifacts_of(self, flight_id: str) -> list[dict]:
        rows = self.db.all("SELECT name, digest, size, epoch, at FROM flight_artifacts "
                           "WHERE flight_id = ? ORDER BY name", (flight_id,))
        return [{"name": r[0], "sha256": r[1], "size": r[2], "epoch": r[3], "at": r[4]}
                for r in rows]

    def artifact(self, flight_id: str, name: str) -> dict | None:
        row = self.db.one("SELECT digest, size, epoch, at FROM flight_artifacts "
                          "WHERE flight_id = ? AND name = ?", (flight_id, name))
        return ({"name": name, "sha256": row[0], "size": row[1], "epoch": row[2], "at": row[3]}
                if row else None)

    def artifact_bytes(self, flight_id: str) -> int:
        row = self.db.one("SELECT COALESCE(SUM(size), 0) FROM flight_artifacts "
                          "WHERE flight_id = ?", (flight_id,))
        return int(row[0]) if row else 0

    def add_artifact(self, flight_id: str, name: str, digest: str, size: int, epoch: int,
                     at: float) -> None:
        """Name ``digest`` as the flight's artifact ``name`` (the same name again: the newer
        upload's digest)."""
        self.db.run("DELETE FROM flight_artifacts WHERE flight_id = ? AND name = ?",
                    (flight_id, name))
        self.db.insert("flight_artifacts", {"flight_id": flight_id, "name": name,
                                            "digest": digest, "size": size, "epoch": epoch,
                                            "at": at})

    # -- blobs --------------------------------------------------------------------------

    def blob_size(self, digest: str) -> int | None:
        row = self.db.one("SELECT size FROM artifact_blobs WHERE digest = ?", (digest,))
        return row[0] if row else None

    def blobs_bytes(self) -> int:
        row = self.db.one("SELECT COALESCE(SUM(size), 0) FROM artifact_blobs")
        return int(row[0]) if row else 0

    def add_blob(self, digest: str, size: int, at: float) -> None:
        self.db.run("INSERT INTO artifact_blobs (digest, size, at) VALUES (?, ?, ?) "
                    "ON CONFLICT (digest) DO NOTHING", (digest, size, at))

    def artifact_digests(self, flight_ids: list[str]) -> set[str]:
        """The digests these flights' artifacts name (what pruning them may leave unnamed)."""
        rows = self.db.all_in("SELECT digest FROM flight_artifacts WHERE flight_id IN ({ids})",
                              flight_ids)
        return {r[0] for r in rows}

    def drop_unnamed_blobs(self, digests: list[str]) -> list[str]:
        """Of ``digests``, drop each blob (and its chunks) no flight's artifact names now."""
        dropped = []
        unnamed = "NOT EXISTS (SELECT 1 FROM flight_artifacts WHERE digest = ?)"
        for digest in digests:
            if self.db.run(f"DELETE FROM artifact_blobs WHERE digest = ? AND {unnamed}",
                           (digest, digest)).rowcount:
                self.db.run("DELETE FROM artifact_chunks WHERE digest = ?", (digest,))
                dropped.append(digest)
        return dropped

    def add_chunk(self, digest: str, seq: int, data: bytes) -> None:
        self.db.run("INSERT INTO artifact_chunks (digest, seq, data) VALUES (?, ?, ?) "
                    "ON CONFLICT (digest, seq) DO NOTHING", (digest, seq, data))

    def chunk(self, digest: str, seq: int) -> bytes | None:
        row = self.db.one("SELECT data FROM artifact_chunks WHERE digest = ? AND seq = ?",
                          (digest, seq))
        return bytes(row[0]) if row else None

    def artifact_content(self, spool: Path | None = None) -> "FileBlobs | RowBlobs":
        """Where blobs' bytes are kept: files beside the SQLite file, or chunk rows."""
        if self.db.dialect == "sqlite":
            return FileBlobs(Path(self.db.path).parent / "artifacts")
        return RowBlobs(self, spool)


_placing = threading.Lock()  # a blob's file placed, or removed, one at a time


class FileBlobs:
    """Blobs as files ``<root>/<2 hex>/<digest>``, written whole before they are named."""

    def __init__(self, root: Path):
        self.root = root

    def path(self, digest: str) -> Path:
        return self.root / digest[:2] / digest

    def spool(self) -> Path:
        """Where an upload is written while it arrives (the same file system: a rename)."""
        path = self.root / "spool"
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        return path

    def place(self, digest: str, spooled: Path) -> None:
        """After the commit that named it: the spooled file becomes the blob (kept once)."""
        target = self.path(digest)
        with _placing:
            if target.exists():
                spooled.unlink(missing_ok=True)
                return
            target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            os.replace(spooled, target)

    def keep(self, digest: str, spooled: Path, rows: ArtifactRows) -> None:
        """Inside the naming transaction: nothing (the file is placed after the commit)."""

    def chunks(self, digest: str) -> Iterator[bytes]:
        with open(self.path(digest), "rb") as handle:
            while block := handle.read(CHUNK):
                yield block

    def remove(self, digests: list[str], rows: ArtifactRows) -> None:
        """After the commit that dropped their rows: each file whose digest was not named
        again meanwhile."""
        with _placing:
            for digest in digests:
                if rows.blob_size(digest) is None:
                    self.path(digest).unlink(missing_ok=True)


class RowBlobs:
    """Blobs as rows of CHUNK bytes in ``artifact_chunks`` (PostgreSQL: every replica reads
    them), written in the transaction that names them."""

    def __init__(self, rows: ArtifactRows, spool: Path | None = None):
        self.rows = rows
        self._spool = spool

    def spool(self) -> Path:
        """The replica's data dir (its own disk), else the temporary directory."""
        if self._spool is None:
            import tempfile

            return Path(tempfile.gettempdir())
        self._spool.mkdir(parents=True, exist_ok=True, mode=0o700)
        return self._spool

    def keep(self, digest: str, spooled: Path, rows: ArtifactRows) -> None:
        if rows.chunk(digest, 0) is not None:
            return
        with open(spooled, "rb") as handle:
            seq = 0
            while True:
                block = handle.read(CHUNK)
                if not block and seq:
                    break
                rows.add_chunk(digest, seq, block)
                seq += 1
                if not block:
                    break

    def place(self, digest: str, spooled: Path) -> None:
        spooled.unlink(missing_ok=True)

    def chunks(self, digest: str) -> Iterator[bytes]:
        seq = 0
        while (block := self.rows.chunk(digest, seq)) is not None and (block or seq == 0):
            if block:
                yield block
            seq += 1

    def remove(self, digests: list[str], rows: ArtifactRows) -> None:
        """Nothing: their rows went with the blobs' (``drop_unnamed_blobs``)."""
