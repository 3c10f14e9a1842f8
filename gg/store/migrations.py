"""Numbered schema migrations. Append only: never edit a migration that has shipped.

Ranges keep parallel work apart: 1-99 core, 100-199 placement, 200-299 fleet operations,
300-399 enrolment and profiles, 400-499 pools, 500-599 proof/metrics, 600-609 key proof,
610-619 people, 700-719 runner groups (gg/store/groups.py), 720-729 identity, 730-749
approvals and services (gg/store/approvals.py), 760-769 web console sessions, 770-779 the
operator's removals, 780-789 start estimates, 800-809 run-time limits, 810-819 output caps,
820-829 priorities, 830-839 retention, 840-849 hooks, 850-869 the hot path, 880-899 the
PostgreSQL store, 900-909 control-plane replicas, 910-919 per-flight settings
(gg.domain.flight_spec).

Every migration runs on both stores. It is handed an object with ``executescript(script)``
and ``execute(sql, params)`` only: sqlite_utils's Database on SQLite; on PostgreSQL an adapter
(gg.store.postgres) that runs the same SQLite SQL with the schema's types translated
(gg.store.dialect: ``INTEGER PRIMARY KEY AUTOINCREMENT``, ``REAL``, ``INTEGER``, ``BLOB``).
Write new ones with those two calls and SQL both engines accept.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import sqlite_utils

from gg.store import approvals, artifacts, groups, id_tokens, placement, pull, secrets

Step = Callable[[sqlite_utils.Database], None]


@dataclass(frozen=True)
class Migration:
    """One change of the schema: its number (its place in the order, for ever), its name
    (kept in ``_migrations`` beside the number) and what it runs."""

    number: int
    name: str
    step: Step


def _core(db: sqlite_utils.Database) -> None:
    db.executescript(
        """
        CREATE TABLE organisation (
            id TEXT PRIMARY KEY, name TEXT NOT NULL, created_at REAL NOT NULL
        );
        CREATE TABLE people (
            id TEXT PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            role TEXT NOT NULL CHECK (role IN ('admin', 'member')),
            token_hash TEXT NOT NULL UNIQUE,
            token_fingerprint TEXT NOT NULL,
            is_owner INTEGER NOT NULL DEFAULT 0,
            created_at REAL NOT NULL
        );
        CREATE TABLE runners (
            id TEXT PRIMARY KEY,
            name TEXT NOT NULL,
            kind TEXT NOT NULL DEFAULT 'registered',
            public_key TEXT NOT NULL UNIQUE,
            credential_hash TEXT UNIQUE,
            credential_fingerprint TEXT,
            credential_expires_at REAL,
            registered_by TEXT,
            labels TEXT NOT NULL DEFAULT '{}',
            workers INTEGER NOT NULL DEFAULT 1,
            started_workers INTEGER NOT NULL DEFAULT 1,
            admin_state TEXT NOT NULL DEFAULT 'active',
            last_seen_at REAL,
            goodbye_at REAL,
            offline_noted_at REAL,
            inventory TEXT NOT NULL DEFAULT '{}',
            capabilities TEXT NOT NULL DEFAULT '{}',
            readings TEXT NOT NULL DEFAULT '{}',
            peer_address TEXT,
            version TEXT,
            version_skew TEXT NOT NULL DEFAULT 'unknown',
            health TEXT NOT NULL DEFAULT 'ok',
            policy TEXT NOT NULL DEFAULT '{}',
            ownership TEXT NOT NULL DEFAULT 'organisation',
            owner TEXT,
            reserved INTEGER NOT NULL DEFAULT 0,
            profile TEXT,
            checks_at REAL,
            created_at REAL NOT NULL,
            retired_at REAL
        );
        CREATE INDEX runners_name ON runners(name);
        CREATE TABLE runner_tombstones (
            public_key TEXT PRIMARY KEY, runner_id TEXT NOT NULL, at REAL NOT NULL
        );
        CREATE TABLE runner_challenges (
            nonce_hash TEXT PRIMARY KEY, runner_id TEXT NOT NULL, expires_at REAL NOT NULL
        );
        CREATE TABLE flights (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,
            kind TEXT NOT NULL DEFAULT 'work',
            title TEXT NOT NULL DEFAULT '',
            command TEXT NOT NULL,
            environment TEXT,
            requires TEXT NOT NULL DEFAULT '{}',
            runner_target TEXT,
            attended INTEGER NOT NULL DEFAULT 0,
            repo TEXT,
            agent TEXT NOT NULL DEFAULT 'shell',
            stage TEXT NOT NULL,
            opened_by TEXT NOT NULL,
            opened_at REAL NOT NULL,
            epoch INTEGER NOT NULL DEFAULT 0,
            lease_runner TEXT,
            lease_granted_at REAL,
            lease_expires_at REAL,
            attempt INTEGER NOT NULL DEFAULT 0,
            expiries INTEGER NOT NULL DEFAULT 0,
            outcome TEXT,
            exit_code INTEGER,
            ended_at REAL,
            ended_reason TEXT,
            gates TEXT NOT NULL DEFAULT '[]'
        );
        CREATE INDEX flights_stage ON flights(stage, seq);
        CREATE INDEX flights_lease ON flights(stage, lease_expires_at);
        CREATE INDEX flights_holder ON flights(lease_runner, stage);
        CREATE TABLE grants (
            flight_id TEXT NOT NULL,
            epoch INTEGER NOT NULL,
            runner_id TEXT NOT NULL,
            granted_at REAL NOT NULL,
            PRIMARY KEY (flight_id, epoch)
        );
        CREATE INDEX grants_runner ON grants(runner_id, flight_id);
        CREATE TABLE facts (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            flight_id TEXT NOT NULL,
            epoch INTEGER NOT NULL,
            runner_id TEXT,
            kind TEXT NOT NULL,
            body TEXT NOT NULL DEFAULT '{}',
            at REAL NOT NULL,
            idem_key TEXT
        );
        CREATE INDEX facts_flight ON facts(flight_id, seq);
        CREATE UNIQUE INDEX facts_idem ON facts(flight_id, idem_key) WHERE idem_key IS NOT NULL;
        CREATE TABLE events (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            kind TEXT NOT NULL,
            at REAL NOT NULL,
            actor TEXT,
            runner_id TEXT,
            flight_id TEXT,
            body TEXT NOT NULL DEFAULT '{}'
        );
        CREATE INDEX events_kind ON events(kind, seq);
        CREATE INDEX events_runner ON events(runner_id, seq);
        CREATE INDEX events_flight ON events(flight_id, seq);
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
        """
    )


def _gates(db: sqlite_utils.Database) -> None:
    db.executescript(
        """
        CREATE TABLE gates (
            id TEXT PRIMARY KEY,
            kind TEXT NOT NULL,
            subject TEXT NOT NULL,
            guards TEXT NOT NULL,
            why TEXT NOT NULL,
            clearer TEXT NOT NULL CHECK (clearer IN ('admin', 'opener', 'machine')),
            opened_at REAL NOT NULL,
            opened_by TEXT,
            runner_id TEXT,
            flight_id TEXT,
            payload TEXT NOT NULL DEFAULT '{}',
            status TEXT NOT NULL DEFAULT 'open',
            cleared_at REAL,
            cleared_by TEXT
        );
        CREATE INDEX gates_open ON gates(status, subject);
        CREATE INDEX gates_runner ON gates(runner_id, status);
        """
    )


def _enrolment(db: sqlite_utils.Database) -> None:
    """Profiles (applied and in force, with history), enrolment tokens (hash only) and what
    the control plane knows a runner can do: the agents it reports, the credential
    *references* it registered (never a secret) and its fleet profile in force."""
    db.executescript(
        """
        CREATE TABLE profiles (
            name TEXT PRIMARY KEY,
            version INTEGER NOT NULL,
            applied TEXT NOT NULL,
            applied_at REAL NOT NULL,
            applied_by TEXT,
            in_force TEXT,
            in_force_version INTEGER,
            narrowed_by INTEGER,
            gate_id TEXT
        );
        CREATE TABLE profile_versions (
            name TEXT NOT NULL,
            version INTEGER NOT NULL,
            body TEXT NOT NULL,
            changes TEXT NOT NULL DEFAULT '[]',
            gate_id TEXT,
            applied_at REAL NOT NULL,
            applied_by TEXT,
            PRIMARY KEY (name, version)
        );
        CREATE TABLE enrol_tokens (
            fingerprint TEXT PRIMARY KEY,
            token_hash TEXT NOT NULL UNIQUE,
            profile TEXT NOT NULL,
            uses INTEGER NOT NULL,
            uses_left INTEGER NOT NULL CHECK (uses_left >= 0),
            expires_at REAL NOT NULL,
            ownership TEXT,
            owner TEXT,
            created_at REAL NOT NULL,
            created_by TEXT,
            revoked_at REAL,
            revoked_by TEXT
        );
        ALTER TABLE runners ADD COLUMN agents TEXT NOT NULL DEFAULT '["shell"]';
        ALTER TABLE runners ADD COLUMN credential_refs TEXT NOT NULL DEFAULT '[]';
        ALTER TABLE runners ADD COLUMN profile_in_force TEXT NOT NULL DEFAULT '{}';
        CREATE INDEX runners_profile ON runners(profile);
        CREATE INDEX flights_kind_target ON flights(kind, runner_target, stage);
        """
    )


def _runner_policy_override(db: sqlite_utils.Database) -> None:
    """What an admin set with ``gg runner policy`` (layered over default and profile), and
    when the assigned policy last changed (for the ``checks pending`` verdict)."""
    db.executescript(
        """
        ALTER TABLE runners ADD COLUMN policy_override TEXT NOT NULL DEFAULT '{}';
        ALTER TABLE runners ADD COLUMN policy_changed_at REAL;
        """
    )


# -- pools (400-499) ------------------------------------------------------------------------


def _pools(db: sqlite_utils.Database) -> None:
    """Strategies (applied, in force, their pool's attestation), members and the admin's
    allow-list of pool maintainers. A strategy's pool name is unique and never changes."""
    db.executescript(
        """
        CREATE TABLE strategies (
            name TEXT PRIMARY KEY,
            pool TEXT NOT NULL UNIQUE,
            applied TEXT NOT NULL,
            in_force TEXT,
            gate_id TEXT,
            applied_at REAL,
            applied_by TEXT,
            in_force_at REAL,
            maintainer_id TEXT,
            last_attested_at REAL,
            attestation TEXT,
            stale_noted_at REAL
        );
        CREATE TABLE members (
            id TEXT PRIMARY KEY,
            pool TEXT NOT NULL,
            name TEXT NOT NULL,
            state TEXT NOT NULL,
            digest TEXT,
            runner_id TEXT,
            maintainer_id TEXT,
            resets INTEGER NOT NULL DEFAULT 0,
            cycle_grants INTEGER NOT NULL DEFAULT 0,
            code_hash TEXT UNIQUE,
            code_expires_at REAL,
            cycle_started_at REAL,
            created_at REAL NOT NULL,
            updated_at REAL
        );
        CREATE INDEX members_pool ON members(pool, id);
        CREATE INDEX members_runner ON members(runner_id);
        CREATE TABLE pool_maintainers (
            pool TEXT NOT NULL,
            runner_id TEXT NOT NULL,
            allowed_by TEXT,
            allowed_at REAL NOT NULL,
            PRIMARY KEY (pool, runner_id)
        );
        """
    )


# -- key proof (600-609) ----------------------------------------------------------------------


def _key_nonces(db: sqlite_utils.Database) -> None:
    """Single-use nonces a machine signs to prove it holds the private key it registers,
    enrols or joins a pool with (before any runner row exists, so not runner_challenges).
    Only the nonce's SHA-256 is kept, bound to its purpose and public key."""
    db.executescript(
        """
        CREATE TABLE key_nonces (
            nonce_hash TEXT PRIMARY KEY,
            purpose TEXT NOT NULL,
            public_key TEXT NOT NULL,
            expires_at REAL NOT NULL
        );
        CREATE INDEX key_nonces_expiry ON key_nonces(expires_at);
        """
    )


def _people_removal(db: sqlite_utils.Database) -> None:
    """A person's token may expire (NULL: never, as the owner's first token and every token
    minted before this migration), and a removed person's row stays as a tombstone so that
    history (who opened a flight, who registered a runner) still shows the name; the name is
    not given to anyone else."""
    db.executescript(
        """
        ALTER TABLE people ADD COLUMN token_expires_at REAL;
        ALTER TABLE people ADD COLUMN token_minted_at REAL;
        ALTER TABLE people ADD COLUMN removed_at REAL;
        ALTER TABLE people ADD COLUMN removed_by TEXT;
        """
    )


def _run_time_limits(db: sqlite_utils.Database) -> None:
    """How long each attempt of a flight may run (NULL: no limit, as every flight opened
    before this migration), and the root envelope's default limit per environment."""
    db.executescript(
        """
        ALTER TABLE flights ADD COLUMN timeout REAL;
        ALTER TABLE root_envelope ADD COLUMN timeouts TEXT NOT NULL DEFAULT '{}';
        """
    )


# -- output caps (810-819) --------------------------------------------------------------------


def _output_caps(db: sqlite_utils.Database) -> None:
    """A flight's output limit (NULL: the server's default, as for every flight opened before
    this migration) and the bytes of output stored for it, counted with each report."""
    db.executescript(
        """
        ALTER TABLE flights ADD COLUMN output_limit INTEGER;
        ALTER TABLE flights ADD COLUMN output_bytes INTEGER NOT NULL DEFAULT 0;
        """
    )


# -- retention (830-839) ----------------------------------------------------------------------


def _retention_indexes(db: sqlite_utils.Database) -> None:
    """Pruning finds ended flights by ``ended_at`` and old events by ``at``, oldest first, each a
    range scan of an index rather than of the table."""
    db.executescript(
        """
        CREATE INDEX flights_ended ON flights(ended_at);
        CREATE INDEX events_at ON events(at);
        """
    )


# -- hooks (840-849) --------------------------------------------------------------------------


def _hooks(db: sqlite_utils.Database) -> None:
    """Hooks an admin added, and the durable outbox of their deliveries. The secret is kept
    as it was minted (the server must compute HMACs with it), in this file, which is 0600 in
    the 0700 data dir. A delivery row is written in the transaction that records its event;
    each attempt's answer is kept for ``gg hook show``."""
    db.executescript(
        """
        CREATE TABLE hooks (
            id TEXT PRIMARY KEY,
            url TEXT NOT NULL,
            events TEXT NOT NULL,
            environment TEXT,
            secret TEXT NOT NULL,
            created_by TEXT,
            created_at REAL NOT NULL,
            removed_at REAL
        );
        CREATE TABLE hook_deliveries (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,
            hook_id TEXT NOT NULL,
            event_seq INTEGER NOT NULL,
            kind TEXT NOT NULL,
            flight_id TEXT,
            body BLOB NOT NULL,
            created_at REAL NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            next_at REAL NOT NULL,
            delivered_at REAL,
            dropped_at REAL
        );
        CREATE INDEX hook_deliveries_due ON hook_deliveries(delivered_at, dropped_at, next_at);
        CREATE INDEX hook_deliveries_flight ON hook_deliveries(hook_id, flight_id, seq);
        CREATE TABLE hook_attempts (
            delivery_seq INTEGER NOT NULL,
            attempt INTEGER NOT NULL,
            at REAL NOT NULL,
            status INTEGER,
            error TEXT,
            PRIMARY KEY (delivery_seq, attempt)
        );
        """
    )


# -- priorities and fair share (820-829) ------------------------------------------------------


def _priorities(db: sqlite_utils.Database) -> None:
    """A flight's priority (high, normal, low); every flight opened before it is normal.
    ``flights_turns`` reads each (priority, opener)'s oldest ready flights without walking a
    long queue; ``flights_served`` finds when an opener was last granted a flight."""
    db.executescript(
        """
        ALTER TABLE flights ADD COLUMN priority TEXT NOT NULL DEFAULT 'normal';
        CREATE INDEX flights_turns ON flights(stage, priority, opened_by, seq);
        CREATE INDEX flights_served ON flights(opened_by, lease_granted_at);
        """
    )


# -- the web console (760-769) ----------------------------------------------------------------


def _console_sessions(db: sqlite_utils.Database) -> None:
    """A person signed in to the web console. Only the SHA-256 of the session's secret is kept
    (like every token), so a copy of this file signs nobody in; the row lives here, not in the
    server's memory, so that several servers sharing one store share the sessions."""
    db.executescript(
        """
        CREATE TABLE console_sessions (
            token_hash TEXT PRIMARY KEY,
            person_id TEXT NOT NULL,
            created_at REAL NOT NULL,
            expires_at REAL NOT NULL
        );
        CREATE INDEX console_sessions_expiry ON console_sessions(expires_at);
        CREATE INDEX console_sessions_person ON console_sessions(person_id);
        """
    )


def _console_session_tokens(db: sqlite_utils.Database) -> None:
    """A session works only while the person token it was made with is still its person's
    token: the hash of that token is kept with it, and a session without one (made before
    this migration) signs nobody in, so its person signs in again once."""
    db.executescript("ALTER TABLE console_sessions ADD COLUMN person_token_hash TEXT;")


# -- start estimates (780-789) ----------------------------------------------------------------


def _start_estimates(db: sqlite_utils.Database) -> None:
    """``durations``: how long finished flights of one kind (title, environment, agent) flew,
    and how long each pool took to warm a member, as small fading histograms
    (``gg.domain.durations``), one row per kind. ``start_estimates``: the last estimate a
    flight was shown before it started, and when it did start, for ``gg estimate accuracy``."""
    db.executescript(
        """
        CREATE TABLE durations (
            what TEXT NOT NULL CHECK (what IN ('flight', 'warmup')),
            title TEXT NOT NULL,
            environment TEXT NOT NULL DEFAULT '',
            agent TEXT NOT NULL DEFAULT '',
            weights TEXT NOT NULL,
            updated_at REAL NOT NULL,
            PRIMARY KEY (what, title, environment, agent)
        );
        CREATE INDEX durations_age ON durations(what, updated_at);
        CREATE TABLE start_estimates (
            flight_id TEXT PRIMARY KEY,
            estimated_at REAL NOT NULL,
            at REAL NOT NULL,
            low REAL NOT NULL,
            high REAL NOT NULL,
            started_at REAL NOT NULL
        );
        CREATE INDEX start_estimates_started ON start_estimates(started_at);
        """
    )


# -- identity you can check (720-729) --------------------------------------------------------


def _shown_estimates(db: sqlite_utils.Database) -> None:
    """``shown_estimates``: the last estimate a waiting flight was shown, written by the read
    that showed it, so that any replica's grant finds it and a restart does not forget it; the
    grant moves it into ``start_estimates``. Additive: a replica of the version before keeps
    its estimates in memory beside it."""
    db.executescript(
        """
        CREATE TABLE shown_estimates (
            flight_id TEXT PRIMARY KEY,
            estimated_at REAL NOT NULL,
            at REAL NOT NULL,
            low REAL NOT NULL,
            high REAL NOT NULL
        );
        CREATE INDEX shown_estimates_age ON shown_estimates(estimated_at);
        """
    )


def _identity(db: sqlite_utils.Database) -> None:
    """``skew_checked_pair``: the last version pair a check-in looked up, so a runner's
    heartbeat reads the skew events only when its build changes. ``ephemeral``: a runner
    (and the enrolment tokens that make one) that takes one flight and then retires itself.
    An enrolment token with ``uses = 0`` is spendable without limit until it expires."""
    db.executescript(
        """
        ALTER TABLE runners ADD COLUMN skew_checked_pair TEXT;
        ALTER TABLE runners ADD COLUMN ephemeral INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE enrol_tokens ADD COLUMN ephemeral INTEGER NOT NULL DEFAULT 0;
        """
    )


def _key_fingerprints(db: sqlite_utils.Database) -> None:
    """``gg runner show --fingerprint F`` is one indexed lookup, not a walk of the fleet: each
    row keeps its key's fingerprint (gg.domain.identity.key_fingerprint), filled in here for
    the rows that exist and by the store whenever a key is written."""
    from gg.domain.identity import key_fingerprint

    db.execute("ALTER TABLE runners ADD COLUMN public_key_fingerprint TEXT")
    for row in db.execute("SELECT id, public_key FROM runners").fetchall():
        db.execute("UPDATE runners SET public_key_fingerprint = ? WHERE id = ?",
                   (key_fingerprint(row[1] or ""), row[0]))
    db.execute("CREATE INDEX runners_key_fingerprint ON runners(public_key_fingerprint)")


# -- the operator's surface (770-779) -----------------------------------------------------------


def _pools_deleting(db: sqlite_utils.Database) -> None:
    """When ``gg pool delete`` asked for the pool to go: its plan is then to hold nothing, and
    the strategy is deleted once the maintainer attests an empty pool."""
    db.executescript("ALTER TABLE strategies ADD COLUMN deleting_at REAL;")


# -- consoles to a machine (870-879) -------------------------------------------------------------


def _machine_consoles(db: sqlite_utils.Database) -> None:
    """One row per console session (docs/console.md): who asked, on which runner (and flight),
    the command, when the runner heard of it, joined, and when it closed with what status.
    The open rows of a runner are what its check-in answer names and its claim is told of."""
    db.executescript(
        """
        CREATE TABLE machine_consoles (
            id TEXT PRIMARY KEY,
            runner_id TEXT NOT NULL,
            person_id TEXT NOT NULL,
            person_name TEXT NOT NULL,
            flight_id TEXT,
            command TEXT NOT NULL DEFAULT '[]',
            term TEXT NOT NULL DEFAULT 'xterm',
            rows INTEGER NOT NULL DEFAULT 24,
            cols INTEGER NOT NULL DEFAULT 80,
            opened_at REAL NOT NULL,
            heard_at REAL,
            joined_at REAL,
            closed_at REAL,
            exit_code INTEGER,
            reason TEXT
        );
        CREATE INDEX machine_consoles_open ON machine_consoles(runner_id) WHERE closed_at IS NULL;
        """
    )


# -- heartbeats at fleet scale (871-878; 879: consoles again) --------------------------------------------------------


def _runners_by_mode(db: sqlite_utils.Database) -> None:
    """The pull-mode poller reads the runners it polls (``mode = 'pull'``) whenever a flight
    may have become ready, which a fleet's check-ins signal many times a second: an index
    makes that read a look-up instead of a scan of every runner."""
    db.execute("CREATE INDEX runners_mode ON runners(mode)")


def _closed_consoles_by_age(db: sqlite_utils.Database) -> None:
    """Closed console sessions are pruned by age with the events (``gg.control.retention``):
    this index lets each batch walk the oldest closed ones first."""
    db.executescript(
        "CREATE INDEX machine_consoles_closed ON machine_consoles(closed_at) "
        "WHERE closed_at IS NOT NULL;")


# -- control-plane replicas (900-909) -----------------------------------------------------------


def _duties(db: sqlite_utils.Database) -> None:
    """Who does each background duty (gg.control.duties): one row per duty, held by one
    server process until ``until`` and renewed by it well before."""
    db.executescript(
        """
        CREATE TABLE duties (
            name TEXT PRIMARY KEY,
            holder TEXT NOT NULL,
            renewed_at REAL NOT NULL,
            until REAL NOT NULL
        );
        """
    )


# -- per-flight settings (910-919) ----------------------------------------------------------------


def _withdrawn_flight_note(db: sqlite_utils.Database) -> None:
    """Kept so that the numbers stay append-only: a flights column was added here and taken
    back before release (a column added under a previous version's replica breaks its
    prepared ``SELECT *``; docs/architecture.md). It changes nothing."""
    db.execute("SELECT 1")


# -- the job contract: concurrency keys and a grace per flight (920-929) ------------------------


def _concurrency_and_grace(db: sqlite_utils.Database) -> None:
    """A flight's concurrency key (``gg fly --concurrency KEY[:N] [--cancel-in-progress]``)
    and its grace (``--grace``), each in a table of its own keyed by flight id: a row only for
    a flight that set it, and no new flights column (docs/architecture.md). Flights of a key
    are found by ``key``: counting those flying is the claim's check."""
    db.executescript(
        """
        CREATE TABLE flight_concurrency (
            flight_id TEXT PRIMARY KEY,
            key TEXT NOT NULL,
            max_flying INTEGER NOT NULL DEFAULT 1,
            cancel_in_progress INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX flight_concurrency_key ON flight_concurrency(key);
        CREATE TABLE flight_grace (
            flight_id TEXT PRIMARY KEY,
            grace REAL NOT NULL
        );
        """
    )


# -- dependencies between flights (930-939) -------------------------------------------------------


def _dependencies(db: sqlite_utils.Database) -> None:
    """``gg fly --after F1,F2 [--after-any]`` (docs/work-graphs.md). New tables, not columns
    on ``flights`` (docs/architecture.md says why). ``flight_after`` is one row per flight
    opened with ``--after``: whether any ending will do (``any_end``) and whether it is still
    held by a dependency (``held``: the claim's queries skip a ready flight held so);
    ``flight_dependencies`` is one row per edge, in the order given, read from both ends:
    a flight's dependencies (``gg show``), and the dependents of one that just ended (the
    cascade, in the transaction that ends it)."""
    db.executescript(
        """
        CREATE TABLE flight_after (
            flight_id TEXT PRIMARY KEY,
            any_end INTEGER NOT NULL DEFAULT 0,
            held INTEGER NOT NULL DEFAULT 1
        );
        CREATE TABLE flight_dependencies (
            flight_id TEXT NOT NULL,
            dependency_id TEXT NOT NULL,
            position INTEGER NOT NULL,
            PRIMARY KEY (flight_id, dependency_id)
        );
        CREATE INDEX flight_dependencies_dependents ON flight_dependencies(dependency_id);
        """
    )


# -- resource limits (940-949) --------------------------------------------------------------


def _flight_limits(db: sqlite_utils.Database) -> None:
    """The resource limits a flight asked for (``gg fly --cpus --memory --pids``,
    gg.domain.limits), as JSON, one row per flight that asked any: a table of its own, not a
    flights column (a previous version's replicas keep prepared ``SELECT *`` on flights)."""
    db.executescript(
        """
        CREATE TABLE flight_limits (
            flight_id TEXT PRIMARY KEY,
            limits TEXT NOT NULL
        );
        """
    )


def _flight_notes(db: sqlite_utils.Database) -> None:
    """A flight's note (``gg fly --note``), free text for people, one row per flight that has
    one: a table of its own, not a flights column (docs/architecture.md)."""
    db.executescript(
        """
        CREATE TABLE flight_notes (
            flight_id TEXT PRIMARY KEY,
            note TEXT NOT NULL
        );
        """
    )


# -- pools that scale from demand (1050-1059) ------------------------------------------------


def _pool_scaling(db: sqlite_utils.Database) -> None:
    """A scaled pool's desired member count, its last decision's time (the cool-down runs from
    it) and reason: a table of its own, so a replica of the previous release reading
    ``strategies`` whole keeps working mid-upgrade."""
    db.executescript(
        """
        CREATE TABLE pool_scaling (
            pool TEXT PRIMARY KEY,
            desired INTEGER NOT NULL,
            scaled_at REAL,
            reason TEXT
        );
        """
    )


# -- several maintainers, one pool (1060-1069) --------------------------------------------


def _maintainer_checkins(db: sqlite_utils.Database) -> None:
    """Each maintainer of a pool as it last checked in: how many members its host can hold,
    whether its last cycle failed, and its own last attestation. The control plane splits
    the pool's plan among the live ones (gg.domain.pool_shares); a table of its own, so a
    replica of the previous release reading ``strategies`` whole keeps working."""
    db.executescript(
        """
        CREATE TABLE maintainer_checkins (
            pool TEXT NOT NULL,
            runner_id TEXT NOT NULL,
            capacity INTEGER,
            failing INTEGER NOT NULL DEFAULT 0,
            checked_in_at REAL NOT NULL,
            attested_at REAL,
            attestation TEXT,
            PRIMARY KEY (pool, runner_id)
        );
        """
    )


# -- retries and reruns (970-979) ---------------------------------------------------------------


def _retries_and_reruns(db: sqlite_utils.Database) -> None:
    """``gg fly --retries N [--retry-on] [--retry-delay] [--retry-elsewhere]`` and
    ``gg rerun F`` (docs/jobs.md), in tables of their own keyed by flight id (no flights
    column: docs/architecture.md). ``flight_retries``: one row per flight with retries, its
    settings and its state (``retried`` so far; ``held`` while a retry's delay runs, until
    ``offer_at``: the claim's reads skip a ready flight held so; ``avoid_runner``, the runner
    whose attempt failed, for ``--retry-elsewhere``). ``flight_attempts``: one row per attempt
    that was retried, and why. ``flight_reruns``: a rerun and the flight it reran, read from
    both ends. ``root_retries``: the root envelope's ``retries:`` per environment (a table
    of its own, not a root_envelope column, for the same reason)."""
    db.executescript(
        """
        CREATE TABLE flight_retries (
            flight_id TEXT PRIMARY KEY,
            retries INTEGER NOT NULL,
            retry_on TEXT NOT NULL,
            delay REAL,
            elsewhere INTEGER NOT NULL DEFAULT 0,
            retried INTEGER NOT NULL DEFAULT 0,
            offer_at REAL,
            held INTEGER NOT NULL DEFAULT 0,
            avoid_runner TEXT
        );
        CREATE INDEX flight_retries_held ON flight_retries(held, offer_at);
        CREATE TABLE flight_attempts (
            flight_id TEXT NOT NULL,
            epoch INTEGER NOT NULL,
            retry INTEGER NOT NULL,
            of_retries INTEGER NOT NULL,
            cause TEXT NOT NULL,
            runner_id TEXT,
            at REAL NOT NULL,
            offer_at REAL,
            PRIMARY KEY (flight_id, epoch)
        );
        CREATE TABLE flight_reruns (
            flight_id TEXT PRIMARY KEY,
            rerun_of TEXT NOT NULL
        );
        CREATE INDEX flight_reruns_of ON flight_reruns(rerun_of);
        CREATE TABLE root_retries (
            environment TEXT PRIMARY KEY,
            retries INTEGER,
            retry_on TEXT,
            delay REAL,
            elsewhere INTEGER
        );
        """
    )


# -- the list ---------------------------------------------------------------------------------

# Every migration, in the order both stores run them: strictly increasing numbers, append only.
# A new migration is its function (above, in its range's section, or in its feature's store
# module) and ONE line at the end of this list; tests/store/test_migrations.py fails when the
# numbers do not increase or when a migration is registered any other way.
MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "core", _core),
    Migration(100, "gates", _gates),
    Migration(101, "environments and the root envelope", placement.migrate_environments),
    Migration(102, "label dispositions", placement.migrate_dispositions),
    Migration(200, "runner policy override", _runner_policy_override),
    Migration(300, "fleet profiles, enrolment tokens, runner fitness", _enrolment),
    Migration(400, "pools", _pools),
    Migration(600, "key nonces", _key_nonces),
    Migration(610, "people: token expiry and removal", _people_removal),
    Migration(700, "runner groups, attributes and the fleet-wide stop", groups.migrate_groups),
    Migration(720, "runner identity: skew noted, ephemeral runners and tokens", _identity),
    Migration(721, "runner key fingerprints, indexed", _key_fingerprints),
    Migration(730, "gates: the approver clearer", approvals.migrate_approver_clearer),
    Migration(731, "approvals: environments that require one, and the root envelope's list",
              approvals.migrate_approvals),
    Migration(732, "flights: a service's spec", approvals.migrate_service_spec),
    Migration(750, "pull mode: the control plane's signing key", pull.migrate_control_key),
    Migration(751, "pull mode: a runner's mode and the address it is polled at",
              pull.migrate_runner_mode),
    Migration(760, "console sessions", _console_sessions),
    Migration(761, "console sessions: the person token each was made with",
              _console_session_tokens),
    Migration(770, "pools being deleted", _pools_deleting),
    Migration(780, "start estimates", _start_estimates),
    Migration(781, "start estimates shown, kept in the store", _shown_estimates),
    Migration(800, "run-time limits", _run_time_limits),
    Migration(810, "flights: output limit and stored output bytes", _output_caps),
    Migration(820, "flight priorities", _priorities),
    Migration(830, "retention indexes", _retention_indexes),
    Migration(840, "hooks and their outbox", _hooks),
    Migration(870, "consoles to a machine", _machine_consoles),
    Migration(871, "runners by mode", _runners_by_mode),
    Migration(879, "closed consoles by age", _closed_consoles_by_age),
    Migration(900, "duties held by one replica at a time", _duties),
    Migration(910, "reserved: a flights column withdrawn before release", _withdrawn_flight_note),
    Migration(920, "concurrency keys and a grace per flight", _concurrency_and_grace),
    Migration(930, "dependencies between flights", _dependencies),
    Migration(940, "flight limits", _flight_limits),
    Migration(950, "secrets, sealed, and the secrets each flight uses", secrets.migrate_secrets),
    Migration(960, "identity tokens: signing keys", id_tokens.migrate_signing_keys),
    Migration(970, "retries and reruns", _retries_and_reruns),
    Migration(990, "flight notes", _flight_notes),
    Migration(1000, "artifacts, inputs and their blobs", artifacts.migrate_artifacts),
    Migration(1050, "pools that scale from demand: each pool's desired member count",
              _pool_scaling),
    Migration(1060, "several maintainers, one pool: each maintainer's check-in",
              _maintainer_checkins),
)
