"""The runner loop: register once, check in, claim, fly, hand back, say goodbye.

Threads: the main thread waits for a stop (SIGTERM, Ctrl-C, retirement, ``--once``);
the check-in thread reports liveness at the interval the server answers; the claim thread
holds one long-poll claim open whenever a worker slot is free; each flight flies on a thread of
:class:`Workers` (one kept waiting for the next flight once its own is over; :mod:`gg.runner.flight`).
Every loop stops by itself when ``stop`` is set.

Policy travels down: the check-in answer (and each grant) carries the assigned policy; the
runner fills ``min(policy.workers, started workers)`` slots and runs every flight under the
policy's isolation and egress, or not at all (:mod:`gg.runner.isolation`). Its capability
report is probed at start, re-probed now and then, and sent when it changed. Every request
goes through one client whose ``on_send`` hook writes the sent log (:mod:`gg.runner.sent`).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from gg import __version__, keys
from gg.api.runners import CheckedIn, Claimed, Instructed
from gg.client import (
    BACKOFF_BASE,
    BACKOFF_CAP,
    RETRY_CALL,
    RETRY_FOREVER,
    RETRY_GOODBYE,
    RETRY_JOIN,
    RETRY_REFRESH,
    RETRY_RELEASE,
    RETRY_STEP,
    ApiError,
    Client,
    ServerFault,
    Unreachable,
    same_control_plane,
)
from gg.domain.flights import Outcome
from gg.domain.health import NO_ENGINE, effective_workers
from gg.domain.identity import key_fingerprint
from gg.domain.policy import Policy
from gg.domain.runners import AdminState, Instruction, policy_digest
from gg.refusals import RunnerRetired
from gg.runner import capabilities, egress, inventory
from gg.runner.connection import ConnectionLog
from gg.runner.console import Consoles
from gg.runner.fleet import FleetState, enrol
from gg.runner.flight import STOP_GRACE, FlightRun, Lease, fly_saying
from gg.runner.flight_identity import FlightIdentities, flight_range, runs_as_root
from gg.runner.sent import SentLog
from gg.runner.state import Registration, StateDir
from gg.settings import DEFAULTS

REPROBE_EVERY = 300.0


class RunnerExit(Exception):
    """The runner must stop, with one sentence saying why."""


class Retired(RunnerExit):
    """An admin retired this runner: its flights are stopped at once and handed back."""


RETIRED_SENTENCE = "this runner was retired by an admin; it exits and will not come back"
EPHEMERAL_SENTENCE = "this ephemeral runner took its one flight and was retired; it exits"


@dataclass
class RunnerOptions:
    server: str
    state_dir: Path
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    workers: int | None = None  # None: the policy's (remembered from the last start), else 1
    once: bool = False
    grace: float = 30.0
    person_token: str | None = None
    enrol_token: str | None = None  # enrolment: spent once, on the first start
    hidden: list[Path] = field(default_factory=list)  # masked in sandboxes (the config dir)
    member_code: str | None = None  # a pool member's one-time ggm_ code (GG_MEMBER_CODE)
    flight_uids: str | None = None  # BASE[:COUNT]: a root runner's flight uids (flight_identity)
    size: dict | None = None  # --cpus/--memory: what it offers its flights (gg.domain.sizes)


class Runner:
    def __init__(self, options: RunnerOptions, *, say: Callable[[str], None] = print,
                 stop: threading.Event | None = None):
        self.options = options
        self.say = say
        self.stop = stop or threading.Event()
        self.state = StateDir(options.state_dir)
        self.sent = SentLog(self.state.path)
        self.connection = ConnectionLog(options.server, say)
        hooks: dict[str, Any]  # the clients' hooks, of their several types
        hooks = {"on_send": self.sent.record, "on_retry": self.connection.retry,
                 "on_reached": self.connection.reached}
        self.client = Client(options.server, stop=self.stop, **hooks)
        self.claim_client = Client(options.server, stop=self.stop, **hooks)
        self.protocol = DEFAULTS.protocol()
        # Policy travels down whole: without --workers the runner starts with the workers its
        # policy last said (kept in its state dir), so a raise takes effect at the next start
        # without a change to the host's command line.
        self.workers = options.workers or self.state.policy_workers() or 1
        # A root runner's flights run as one flight identity per worker slot (flight_identity).
        self.identities = (FlightIdentities(flight_range(options.flight_uids), self.workers)
                           if runs_as_root() else None)
        self.runs: dict[str, FlightRun] = {}
        self.flight_threads = Workers(self._fly)  # the threads flights fly on
        self.slots = threading.Condition()
        self.taken = 0
        self.exit_reason: str | None = None
        self.retired = False
        self.registration: Registration | None = None
        self._inventory_sent: dict | None = None
        self.fleet = FleetState(self.state.path, self.client, say)  # enrolment
        self.fleet.refresh = lambda: self._check_in_once(retry_for=RETRY_REFRESH)
        self.policy: dict = {}  # replaced whole when it changes, never changed in place
        self._capacity_of: tuple[dict | None, int] = (None, self.workers)
        self.admin_state: str | None = None
        self._health_said: str | None = None
        self.capabilities: dict | None = None
        self._capabilities_sent: dict | None = None
        self._probed_at = 0.0
        self.check_now = threading.Event()
        self.checked_in = threading.Event()  # set by every full check-in that was answered
        self.claim_parked = False  # a heartbeat claim is on the wire (it is this runner's check-in)
        self._extras_sent: dict | None = None
        self._heeded: str | None = None
        self._heeded_at = 0.0
        self.consoles = Consoles(self)  # consoles to this machine (docs/console.md)
        self.readings = inventory.Readings()  # sampled at most once a second

    def _inventory(self) -> dict:
        return inventory.inventory(str(self.state.path), self.options.size)

    @property
    def capacity(self) -> int:
        """Worker slots to fill now: a lowered policy applies at once, raising needs a restart."""
        policy = self.policy
        if not policy:
            return self.workers
        if self._capacity_of[0] is not policy:  # worked out once per policy it is sent
            try:
                slots = effective_workers(Policy.from_dict(policy), self.workers)
            except ValueError:
                slots = self.workers
            self._capacity_of = (policy, slots)
        return self._capacity_of[1]

    # -- life ------------------------------------------------------------------------------

    def run(self) -> int:
        answer = self.come_online()
        profile = f", profile {self.fleet.profile_name}" if self.fleet.enrolled else ""
        assert self.registration is not None, "come_online registered it"
        self.say(f"runner {self.registration.name} ({self.registration.runner_id}) is up: "
                 f"{self.workers} worker(s), labels "
                 f"{_labels(answer.labels) or '(none)'}{profile}")
        claimer = threading.Thread(target=self._claim_loop, name="claim", daemon=True)
        claimer.start()
        while not self.stop.wait(0.5):
            pass
        return self._shut_down()

    def come_online(self) -> CheckedIn:
        """Register (once), check in, and keep checking in until ``stop``: what every runner
        process does, whether it flies flights (:meth:`run`) or maintains a pool
        (:mod:`gg.pool.maintainer`). Returns the first check-in's answer."""
        self._register()
        left = egress.clear(self.state.path)  # a killed predecessor's flight namespaces
        if left:
            self.say(f"removed what an earlier run left of its flights' networks: "
                     f"{', '.join(left)}")
        self._probe(reuse=True)  # a later probe always measures (gg.runner.probe_cache)
        answer = self._check_in_once(retry_for=RETRY_FOREVER)
        self.fleet.sync_credentials()  # enrolment: references, never secrets
        self.fleet.start(self.stop)
        checker = threading.Thread(target=self._check_in_loop, name="check-in", daemon=True)
        checker.start()
        return answer

    def request_stop(self, reason: str | None = None, *, retired: bool = False) -> None:
        if reason and not self.exit_reason:
            self.exit_reason = reason
        if retired and not self.retired:
            self.retired = True
            for run in list(self.runs.values()):
                run.retire()  # stop them now: the flights wait for this runner's hand-back
        self.stop.set()
        self.check_now.set()
        with self.slots:
            self.slots.notify_all()

    def _shut_down(self) -> int:
        """Stop claiming, let running flights finish within the grace period, return the rest.

        A retired runner has no grace: its flights were stopped the moment it was refused
        (SIGTERM to each process group, SIGKILL after STOP_GRACE) and are handed back as
        returned, which is what makes them ready again (or their leases expire)."""
        deadline = time.monotonic() + (0.0 if self.retired else self.options.grace)
        try:  # stop claiming: free the parked claim at once
            self.client.claim(0, 0, retry_for=RETRY_RELEASE)
        except (ApiError, Unreachable):
            pass
        self.consoles.stop_all()
        running = [r for r in list(self.runs.values())]
        if running and self.retired:
            self.say(f"stopping {len(running)} flight(s) at once and handing them back")
            for run in running:
                run.retire()
        for run in running:  # a service never finishes: handed back now, for another runner
            if run.flight.kind == "service":
                run.returning.set()
        if running and not self.exit_reason:
            self.say(f"stopping: letting {len(running)} flight(s) finish "
                     f"(up to {self.options.grace:g}s)")
        self._wait_for_flights(deadline)
        for run in list(self.runs.values()):
            run.returning.set()
        self._wait_for_flights(time.monotonic() + STOP_GRACE + 10)
        if not self.runs:  # its flights' networks are gone with them: the host table too
            egress.clear(self.state.path)
        retired = self.retired
        if not retired:
            try:
                self.client.stop = threading.Event()
                self.client.goodbye(retry_for=RETRY_GOODBYE)
            except (ApiError, Unreachable):
                pass
        self.say(self.exit_reason or "goodbye")
        if self.exit_reason == EPHEMERAL_SENTENCE:  # it did what it was enrolled for
            return 0
        return 1 if retired else 0

    def _wait_for_flights(self, deadline: float) -> None:
        """Until every flight was handed back (or ``deadline``, monotonic, passed)."""
        with self.slots:
            while self.runs:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self.slots.wait(left)

    # -- registration and credential ----------------------------------------------------------

    def _register(self) -> None:
        reg = self.state.registration()
        first_start = not self.state.key_path.exists()
        key = self.state.key()
        if first_start:  # the one time it is told unasked: compare it with gg runner show
            self.say(f"this runner's key is new; its fingerprint is "
                     f"{key_fingerprint(keys.public_text(key))}")
        if reg is not None and same_control_plane(reg.server, self.options.server):
            if self.options.enrol_token:
                self.say("this runner is registered already; the enrolment token was not spent")
            self.registration = reg
            self.client.token = reg.credential
            self.claim_client.token = reg.credential
            return
        if self.options.enrol_token:  # enrolment: nobody signs in on this machine
            self._enrol(key)
            return
        if self.options.member_code:  # a pool member: its maintainer's one-time code
            self._join_pool(key)
            return
        if not self.options.person_token:
            raise RunnerExit("this runner is not registered yet: sign in first "
                             "(gg login --server URL --token-file FILE), or enrol it with "
                             "gg runner up --enrol TOKEN, and run gg runner up again")
        body = {"name": self.options.name, "public_key": keys.public_text(key),
                "labels": self.options.labels, "workers": self.workers,
                "inventory": self._inventory(), "version": __version__}
        try:
            answer = self.client.register(body, key, token=self.options.person_token,
                                          retry_for=RETRY_FOREVER)
        except ApiError as exc:
            raise RunnerExit(f"registration refused: {exc.message}") from None
        self._save_registration(answer.runner.id, answer.credential,
                                answer.credential_expires_at)

    def _save_registration(self, runner_id: str, credential: str,
                           expires_at: float | None) -> None:
        reg = Registration(server=self.options.server, runner_id=runner_id,
                           name=self.options.name, credential=credential,
                           credential_expires_at=expires_at)
        self.state.save_registration(reg)
        self.registration = reg
        self.client.token = reg.credential
        self.claim_client.token = reg.credential

    def _enrol(self, key) -> None:
        body = {"name": self.options.name, "public_key": keys.public_text(key),
                "workers": self.workers, "version": __version__,
                "inventory": self._inventory()}
        assert self.options.enrol_token, "called only when it was given"
        try:
            answer = enrol(self.client, self.options.enrol_token, body, key)
        except ApiError as exc:
            raise RunnerExit(f"enrolment refused: {exc.message}") from None
        self._save_registration(answer.runner.id, answer.credential,
                                answer.credential_expires_at)
        reg = self.registration
        assert reg is not None, "_save_registration set it just now"
        self.say(f"enrolled as {reg.name} ({reg.runner_id}) with profile "
                 f"{answer.profile.name if answer.profile else None}; the token is spent and "
                 "not needed again")

    def _join_pool(self, key) -> None:
        """A pool member exchanges its one-time code (from its maintainer) for a credential;
        its labels are the pool strategy's, whatever the machine was started with."""
        body = {"public_key": keys.public_text(key),
                "inventory": self._inventory(), "version": __version__}
        assert self.options.member_code, "called only when it was given"
        try:
            answer = self.client.join_pool(self.options.member_code, body, key,
                                           retry_for=RETRY_JOIN)
        except ApiError as exc:
            raise RunnerExit(f"the member code was refused: {exc.message}") from None
        self.options.labels = dict(answer.labels)
        self._save_registration(answer.runner.id, answer.credential,
                                answer.credential_expires_at)

    def _renew_credential(self) -> None:
        assert self.registration is not None, "a check-in's directive: it is registered"
        key = self.state.key()
        challenge = self.client.challenge(retry_for=RETRY_STEP)
        message = f"gg-renew:{self.registration.runner_id}:{challenge.nonce}".encode()
        answer = self.client.renew_credential(challenge.nonce, keys.sign(key, message),
                                              retry_for=RETRY_STEP)
        self.registration.credential = answer.credential
        self.registration.credential_expires_at = answer.expires_at
        self.state.save_registration(self.registration)
        self.client.token = answer.credential
        self.claim_client.token = answer.credential
        self.say("credential renewed")

    # -- check-in -----------------------------------------------------------------------------

    def _check_in_loop(self) -> None:
        while not self.stop.is_set():
            asked = self.check_now.wait(self.protocol["check_in_interval"])
            self.check_now.clear()
            if self.stop.is_set():
                return
            if time.monotonic() - self._probed_at >= REPROBE_EVERY:
                self._probe()
            if not asked and self._heartbeat_suffices():
                continue  # the parked claim is this interval's check-in
            try:
                self._check_in_once(retry_for=self.protocol["check_in_interval"])
            except (Unreachable, ServerFault):
                continue
            except RunnerExit as exc:
                self.request_stop(str(exc), retired=isinstance(exc, Retired))

    def _heartbeat_suffices(self) -> bool:
        """Whether the parked claim (which carries the readings and re-parks every
        CHECK_IN_INTERVAL) can stand for this interval's check-in: a full one is sent when no
        claim is parked, when flights are held (their ends travel in its answer), or when the
        inventory, capabilities, labels, agents or a maintenance report have something new."""
        if not self.claim_parked or self.runs or self.consoles.named:
            return False  # (a console named and not yet joined: its check-ins name it again)
        inv = self._inventory()
        if {k: v for k, v in inv.items() if k not in ("started_at",)} != self._inventory_sent:
            return False
        if self.capabilities is not None and self.capabilities != self._capabilities_sent:
            return False
        return self.fleet.check_in_extras() == self._extras_sent

    def _check_in_once(self, retry_for: float) -> CheckedIn:
        inv = self._inventory()
        changed = {k: v for k, v in inv.items() if k not in ("started_at",)}
        body = {"free_slots": max(0, self.capacity - self.taken), "readings": self.readings(),
                "version": __version__, "held": list(self.runs), "workers": self.workers}
        if changed != self._inventory_sent:
            body["inventory"] = inv
            body["labels"] = self.options.labels  # what this start states (may differ from
            # the labels it registered with; the server recomputes dispositions)
        extras = self.fleet.check_in_extras()  # enrolment: agents, maintenance report
        body.update(extras)
        caps = self.capabilities
        if caps is not None and caps != self._capabilities_sent:
            body["capabilities"] = caps
        try:
            answer = self.client.check_in(body, retry_for=retry_for)
        except ServerFault:
            raise  # the control plane's fault, not a refusal of this runner: try again later
        except ApiError as exc:
            refusal = Retired if isinstance(exc, RunnerRetired) else RunnerExit
            raise refusal(self._refusal_sentence(exc)) from None
        self._inventory_sent = changed
        self._extras_sent = extras
        self.fleet.absorb(answer.profile, interval=answer.protocol.maintenance_check_interval,
                          sent=body)
        if "capabilities" in body:
            self._capabilities_sent = caps
        if "send_capabilities" in answer.directives and "capabilities" not in body:
            self._capabilities_sent = None  # the server has none on file: send them now
            self.check_now.set()
        self._apply(answer)
        self.consoles.absorb(answer.consoles)  # dial each console waiting for this runner
        self.protocol.update(answer.protocol.model_dump())
        # Never back off longer than a quarter of the renewal slack: a lease must be renewed before it
        # runs out even when the control plane was away (5 s at the default 20 s slack).
        renew_at = self.protocol.get("lease_renew_at", DEFAULTS.lease_renew_at)
        cap = min(BACKOFF_CAP, max(BACKOFF_BASE, float(renew_at) / 4))
        self.client.backoff_cap = self.claim_client.backoff_cap = cap
        self.protocol["check_in_interval"] = answer.check_in_interval
        for flight_id in answer.ended:
            run = self.runs.get(flight_id)
            if run is not None:
                self.say(f"{flight_id}: ended by the control plane; stopping it")
                run.ended_by_server.set()
                run.lost.set()
        if "renew_credential" in answer.directives:
            try:
                self._renew_credential()
            except (ApiError, Unreachable) as exc:
                self.say(f"could not renew the credential yet: {exc}")
        self.checked_in.set()
        return answer

    def _probe(self, reuse: bool = False) -> None:
        self.capabilities = capabilities.probe(
            flight_identity=self.identities.first() if self.identities else None, reuse=reuse)
        self._probed_at = time.monotonic()

    def _apply(self, answer: CheckedIn) -> None:
        """Take the assigned policy and admin state the control plane sent down."""
        policy = answer.policy
        if policy and policy != self.policy:
            if self.policy:
                self.say("policy is now " + ", ".join(f"{k} {v}" for k, v in sorted(policy.items())))
            self.policy = dict(policy)
            self.state.remember_policy_workers(policy.get("workers"))
            with self.slots:
                self.slots.notify_all()
        state = answer.admin_state
        if state and state != self.admin_state:
            if self.admin_state is not None:
                self.say(f"admin state is now {state}")
            self.admin_state = state
            with self.slots:
                self.slots.notify_all()  # resumed: claim again
        health = answer.health
        if health and health != "ok" and health != self._health_said:
            self.say(f"health: {health}")
            if health.endswith(NO_ENGINE):  # newly: the engine's info may only have been slow
                self._probed_at = float("-inf")  # past its 3 s (a busy host); probe again once
                self.check_now.set()
        self._health_said = health

    def policy_unmet(self, missing: str) -> None:
        """A flight could not run under the policy: probe again and tell the server at once."""
        self.say(f"cannot meet the assigned policy: {missing}")
        self._probe()
        self._capabilities_sent = None
        self.check_now.set()

    def _refusal_sentence(self, exc: ApiError) -> str:
        if isinstance(exc, RunnerRetired):
            return EPHEMERAL_SENTENCE if "ephemeral" in exc.message else RETIRED_SENTENCE
        if exc.status == 401:
            return ("the control plane no longer accepts this runner's credential; "
                    f"remove {self.state.registration_path} and register again")
        return f"the control plane refused this runner: {exc.message}"

    # -- claiming -------------------------------------------------------------------------------

    @property
    def draining(self) -> bool:
        """Told to take nothing new: no claims until a check-in says otherwise."""
        return self.admin_state in (AdminState.DRAINING.value, AdminState.DRAINED.value)

    def _claim_loop(self) -> None:
        while not self.stop.is_set():
            with self.slots:
                while (self.taken >= self.capacity or self.draining) and not self.stop.is_set():
                    self.slots.wait(1.0)
            if self.stop.is_set():
                return
            # A claim re-parks at least every CHECK_IN_INTERVAL: it carries the readings and
            # counts as the check-in (docs/lease-protocol.md, "Heartbeats").
            wait = min(self.protocol["claim_wait"], self.protocol["check_in_interval"])
            free = max(1, self.capacity - self.taken)
            self.claim_parked = True
            try:
                answer = self.claim_client.claim(
                    free, wait, readings=self.readings(), policy=policy_digest(self.policy),
                    retry_for=RETRY_FOREVER)
            except Unreachable:
                continue
            except ApiError as exc:
                if exc.status in (401, 403):
                    self.request_stop(self._refusal_sentence(exc),
                                      retired=isinstance(exc, RunnerRetired))
                    return
                self.stop.wait(1.0)
                continue
            finally:
                self.claim_parked = False
            if answer is None:
                continue
            if isinstance(answer, Instructed):
                self._heed(answer.instruction.kind)
                continue
            self._take(answer)
            if self.options.once:
                return

    def _heed(self, kind: str) -> None:
        """An instruction answered the claim: act on it before claiming again."""
        if kind == Instruction.DRAIN:
            if not self.draining:
                self.say("told to drain: taking nothing new")
                self.admin_state = AdminState.DRAINING.value
        interval = self.protocol["check_in_interval"]
        again = self._heeded == kind and time.monotonic() - self._heeded_at < interval
        self._heeded, self._heeded_at = kind, time.monotonic()
        self.checked_in.clear()
        self.check_now.set()  # a full check-in now: the state, the policy, the directives
        if kind != Instruction.DRAIN:  # claim again once it was answered (at most an interval)
            self.checked_in.wait(interval)
        if again:  # told the same twice in a row: the check-in did not settle it; go gently
            self.stop.wait(interval)

    def _take(self, answer: Claimed) -> None:
        run = self._taken(answer)
        if run is not None:
            self.flight_threads.fly(run)

    def _taken(self, answer: Claimed) -> FlightRun | None:
        """The flight ``answer`` granted, counted as taken; None when it went straight back
        (granted while this runner stops)."""
        flight = answer.flight
        lease = answer.lease
        ttl = lease.expires_at - lease.granted_at
        run = FlightRun(client=self.client, flight=flight, say=self.say,
                        lease=Lease(flight.id, lease.epoch, ttl, answer.protocol.lease_renew_at,
                                    time.monotonic() + ttl, answer.protocol.started_within,
                                    answer.protocol.lease_margin or DEFAULTS.lease_margin),
                        workspace_root=self.state.workspaces, fleet=self.fleet,
                        policy=answer.policy or self.policy,
                        capabilities=self.capabilities or {}, state_dir=self.state.path,
                        hidden=list(self.options.hidden), on_unmet=self.policy_unmet,
                        identities=self.identities,
                        on_retired=lambda: self.request_stop(RETIRED_SENTENCE, retired=True),
                        claim_next=(self._next_wanted if answer.protocol.hand_back_claims
                                    else None),
                        usage_rides=answer.protocol.hand_back_usage)
        if self.stop.is_set():  # granted while stopping: give it straight back
            try:
                self.client.hand_back(flight.id, {"epoch": lease.epoch, "outcome": Outcome.RETURNED,
                                                  "reason": "the runner is stopping",
                                                  "key": f"{lease.epoch}:hand-back"},
                                      retry_for=RETRY_CALL)
            except (ApiError, Unreachable):
                pass
            return None
        with self.slots:
            self.taken += 1
            self.runs[run.id] = run
        return run

    def _next_wanted(self) -> int:
        """Slots a hand-back asks to fill at once: its own, unless nothing new may be taken."""
        return 0 if self.stop.is_set() or self.draining or self.options.once else 1

    def _fly(self, run: FlightRun | None) -> None:
        while run is not None:
            fly_saying(run, self.say)
            # The hand-back's answer may carry the next flight: this thread flies it too,
            # counted as taken before this one's slot frees (no claim races for the slot).
            following = self._taken(run.next) if run.next is not None else None
            with self.slots:
                self.taken -= 1
                self.runs.pop(run.id, None)
                self.slots.notify_all()
            run = following
        if self.options.once:
            self.request_stop()


WORKER_IDLE = 60.0  # seconds a flight's thread waits for the next flight before it ends


class _Worker:
    __slots__ = ("run", "wake")

    def __init__(self, run) -> None:
        self.run = run
        self.wake = threading.Event()


class Workers:
    """The threads flights fly on. A thread whose flight is over waits up to ``idle_for``
    seconds for the next one, so a busy runner starts no thread per flight; a new thread is
    started only when none is waiting. Every thread is a daemon: a flight stuck past the
    runner's stop grace never holds the process up."""

    def __init__(self, fly: Callable[[FlightRun], None], idle_for: float = WORKER_IDLE) -> None:
        self._fly, self._idle_for = fly, idle_for
        self._lock = threading.Lock()
        self._idle: list[_Worker] = []  # the one that waited least is handed the next flight
        self.started = 0  # threads started in all (for tests and diagnostics)

    def fly(self, run: FlightRun) -> None:
        with self._lock:
            if self._idle:
                worker = self._idle.pop()
                worker.run = run
                worker.wake.set()
                return
            self.started += 1
        threading.Thread(target=self._serve, args=(_Worker(run),), name="flights",
                         daemon=True).start()

    def _serve(self, worker: _Worker) -> None:
        while True:
            run, worker.run = worker.run, None
            self._fly(run)
            del run  # nothing of the flight is kept while the thread waits
            with self._lock:
                worker.wake.clear()
                self._idle.append(worker)
            worker.wake.wait(self._idle_for)
            with self._lock:
                if worker.run is None:  # none came: this thread ends
                    if worker in self._idle:
                        self._idle.remove(worker)
                    return


def _labels(labels: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
