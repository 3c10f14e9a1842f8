"""A pull-mode runner: it listens, never dials out, and flies what the control plane hands it.

``gg runner up --listen HOST:PORT`` serves a small HTTP API (:mod:`gg.runner.listen`) and
opens no connection of its own. The control plane calls it every CHECK_IN_INTERVAL
(docs/runner-modes.md): ``poll`` is its check-in (readings, inventory, capabilities, the
leases it holds, its outbox of reports and hand-backs) and ``deliver`` brings the answers
(policy, admin state, renewed leases, refusals, grants).

Flights fly exactly as a dial-out runner's do (:class:`gg.runner.flight.FlightRun`: the same
workspace, sandbox, policy, output, local deadline and launcher watchdog); only their client
differs. The :class:`Relay` stands where the HTTP client stands: a report or a hand-back waits
in the outbox for the next poll, a renewal is the one the control plane makes at each poll it
gets through, and a refusal (a lease fenced by a newer epoch, a flight ended, the runner
retired) reaches the flight as the same ApiError a dial-out runner's request would get.

A lease's local expiry is counted from when the runner *answered* the poll that granted or
renewed it, plus the lifetime the control plane gave it then (``expires_at - server_time``,
a duration on the control plane's one clock, so the two clocks' skew does not matter). The
control plane made the grant or renewal after that answer reached it, so the local expiry is
never later than its own. A flight not renewed by its deadline (the stop margin before that)
is stopped here, and its tree killed by the launcher even when this runner is frozen
(docs/lease-protocol.md, "The runner stops what it cannot renew").
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, cast

from gg import __version__, keys, refusals
from gg.api.pull import Delivery, PollAsk
from gg.api.runners import CheckedIn, Claimed, LeaseRenewed
from gg.client import RETRY_CALL, ApiError, Client, Unreachable
from gg.domain.flights import Outcome
from gg.domain.health import effective_workers
from gg.domain.identity import key_fingerprint
from gg.domain.policy import Policy
from gg.domain.runners import AdminState
from gg.error_codes import ErrorCode
from gg.runner import capabilities, inventory
from gg.runner.flight import STOP_GRACE, FlightRun, Lease, fly_saying
from gg.runner.flight_artifacts import Refused
from gg.runner.sent import SentLog
from gg.runner.state import StateDir
from gg.settings import DEFAULTS, Settings

PINNED_NAME = "control-plane.pub"
REPROBE_EVERY = 300.0
ANSWERED_KEPT = 16  # polls whose answer times are remembered for their deliveries


@dataclass
class PullOptions:
    host: str
    port: int
    state_dir: Path
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    workers: int = 1
    grace: float = 30.0
    hidden: list[Path] = field(default_factory=list)
    size: dict | None = None  # --cpus/--memory: what it offers its flights (gg.domain.sizes)


PULL_ARTIFACTS = ("artifacts are not carried for flights of a pull-mode runner: it never calls "
                  "the control plane (docs/work-graphs.md, \"Artifacts\")")


class Relay:
    """What a flight would send to the control plane, held for the control plane to fetch."""

    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.outbox: dict[int, dict] = {}  # seq -> entry, oldest first
        self.done: dict[int, dict | None] = {}  # seq -> None (taken) or its refusal
        self.renewed: dict[str, tuple[int, dict]] = {}  # flight -> (count, LeaseRenewed)
        self.lease_refused: dict[str, dict] = {}  # flight -> refusal of its lease
        self.consumed: dict[str, int] = {}  # flight -> renewals the lease keeper has seen
        self._seq = 0

    def _put(self, entry: dict) -> int:
        with self.lock:
            self._seq += 1
            self.outbox[self._seq] = {"seq": self._seq, **entry}
            return self._seq

    def pending(self) -> list[dict]:
        with self.lock:
            return list(self.outbox.values())

    # -- the client FlightRun calls ------------------------------------------------------

    def report(self, flight_id: str, epoch: int, facts: list[dict], **_: Any) -> None:
        self._put({"flight": flight_id, "epoch": epoch, "kind": "report", "facts": facts})

    def hand_back(self, flight_id: str, body: dict, retry_for: float = RETRY_CALL,
                  **_: Any) -> dict:
        seq = self._put({"flight": flight_id, "epoch": body["epoch"], "kind": "hand_back",
                         "hand_back": body})
        deadline = time.monotonic() + retry_for
        with self.lock:
            while seq not in self.done:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise Unreachable("the control plane has not fetched the hand-back yet")
                self.lock.wait(min(left, 1.0))
            refusal = self.done.pop(seq)
        if refusal is not None:
            raise _error(refusal)
        return {"flight": flight_id}

    def id_token(self, flight_id: str, epoch: int, audience: str, **_: Any) -> Any:
        """Identity tokens (docs/jobs.md) are minted by the control plane at the runner's
        request, which a pull-mode runner never makes: refused in one sentence."""
        raise ApiError(409, ErrorCode.CONFLICT,
                       "identity tokens are not served to flights of a pull-mode runner: it "
                       "never calls the control plane (docs/jobs.md, \"Identity tokens\")")

    def offer_artifacts(self, *_: Any, **__: Any) -> Any:
        """Artifacts (docs/work-graphs.md) travel by the runner's own calls, which a
        pull-mode runner never makes: what a flight left is not uploaded, and the flight
        fails saying so rather than land as if its artifacts were kept."""
        raise Refused(PULL_ARTIFACTS)

    def download_input(self, *_: Any, **__: Any) -> None:
        """Inputs likewise: a flight that needs them is not started without them."""
        raise Refused(PULL_ARTIFACTS)

    def give_back(self, flight_id: str, epoch: int, reason: str) -> None:
        """A grant this runner cannot take: returned with the next poll, without waiting."""
        self._put({"flight": flight_id, "epoch": epoch, "kind": "hand_back",
                   "hand_back": {"epoch": epoch, "outcome": Outcome.RETURNED.value,
                                 "reason": reason, "key": f"{epoch}:hand-back"}})

    def renew(self, flight_id: str, epoch: int, retry_for: float = RETRY_CALL,
              **_: Any) -> LeaseRenewed:
        """The newest renewal the control plane made for this flight that the lease keeper
        has not seen yet, waiting for one (the control plane renews a lease at the first poll
        it gets through once it is due); Unreachable when none came within ``retry_for``."""
        deadline = time.monotonic() + retry_for
        with self.lock:
            while True:
                if flight_id in self.lease_refused:
                    raise _error(self.lease_refused[flight_id])
                count, renewal = self.renewed.get(flight_id, (0, None))
                if count > self.consumed.get(flight_id, 0):  # one the keeper has not seen
                    self.consumed[flight_id] = count
                    return LeaseRenewed.model_validate(renewal)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise Unreachable("the control plane has not renewed this lease lately")
                self.lock.wait(min(left, 1.0))

    # -- what a delivery brings -----------------------------------------------------------

    def settle(self, applied: list[int], refusals: list[dict],
               renewals: list[dict]) -> set[int]:
        """Drop what the control plane took, wake who waits for it; returns the hand-backs
        among them (their refusals reach the flight through :meth:`hand_back`'s caller)."""
        by_seq = {r["seq"]: r for r in refusals if r.get("seq") is not None}
        hand_backs = set()
        with self.lock:
            for seq in applied:
                entry = self.outbox.pop(seq, None)
                if entry is not None and entry["kind"] == "hand_back":
                    self.done[seq] = by_seq.get(seq)
                    hand_backs.add(seq)
            for refusal in refusals:
                if refusal.get("seq") is None:
                    self.lease_refused[refusal["flight"]] = refusal
            for renewal in renewals:
                count = self.renewed.get(renewal["flight"], (0, None))[0]
                self.renewed[renewal["flight"]] = (count + 1, renewal)
            self.lock.notify_all()
        return hand_backs

    def forget(self, flight_id: str) -> None:
        with self.lock:
            self.renewed.pop(flight_id, None)
            self.consumed.pop(flight_id, None)
            self.lease_refused.pop(flight_id, None)


def _error(refused: dict) -> ApiError:
    return refusals.refusal(int(refused.get("status") or 409),
                            str(refused.get("code") or ErrorCode.CONFLICT),
                            str(refused.get("message") or "refused"))


class PullRunner:
    """The state of a listening runner; :mod:`gg.runner.listen` serves it."""

    def __init__(self, options: PullOptions, *, say: Callable[[str], None] = print,
                 stop: threading.Event | None = None, settings: Settings | None = None):
        self.options = options
        self.say = say
        self.stop = stop or threading.Event()
        self.state = StateDir(options.state_dir)
        self.sent = SentLog(self.state.path)
        self.settings = settings if settings is not None else Settings.from_env()
        self.key = self.state.key()
        self.public_key = keys.public_text(self.key)
        fingerprint = key_fingerprint(self.public_key)
        assert fingerprint is not None, "its own key is an Ed25519 key"
        self.fingerprint = fingerprint
        self.relay = Relay()
        self.lock = threading.Lock()
        self.runs: dict[str, FlightRun] = {}
        self.threads: list[threading.Thread] = []
        self.policy: dict = {}
        self.admin_state: str | None = None
        self.protocol = DEFAULTS.protocol()
        self.runner_id: str | None = None
        self.retired = False
        self.stopping = False
        self.capabilities = capabilities.probe(reuse=True)  # its start (gg.runner.probe_cache)
        self._probed_at = time.monotonic()
        self._inventory_sent: dict | None = None
        self._capabilities_sent: dict | None = None
        self._polled: dict = {}  # what the last poll sent, confirmed by its delivery
        self._polls = 0
        self._answered: OrderedDict[int, float] = OrderedDict()  # poll -> when (monotonic)
        self.said_goodbye = threading.Event()  # a poll carrying the goodbye was delivered

    # -- the pinned control plane key -------------------------------------------------------

    @property
    def pinned_path(self) -> Path:
        return self.state.path / PINNED_NAME

    def pinned(self) -> str | None:
        try:
            return self.pinned_path.read_text().strip() or None
        except FileNotFoundError:
            return None

    def pin(self, control_key: str) -> str:
        """Pin the control plane's key (at attach); re-pinning the same key is harmless."""
        if not keys.valid_public_key(control_key):
            raise ValueError("control_key is not a base64 Ed25519 public key")
        if self.pinned() != control_key:
            tmp = self.pinned_path.with_suffix(".tmp")
            tmp.write_text(control_key + "\n")
            tmp.chmod(0o600)
            tmp.replace(self.pinned_path)
            self.say(f"attached: pinned the control plane's key {key_fingerprint(control_key)}")
        fingerprint = key_fingerprint(control_key)
        assert fingerprint is not None, "checked above to be an Ed25519 public key"
        return fingerprint

    # -- capacity -----------------------------------------------------------------------------

    @property
    def capacity(self) -> int:
        if not self.policy:
            return self.options.workers
        try:
            return effective_workers(Policy.from_dict(self.policy), self.options.workers)
        except ValueError:
            return self.options.workers

    def free_slots(self) -> int:
        if self.stopping or self.retired or self.admin_state in (
                AdminState.DRAINING.value, AdminState.DRAINED.value, AdminState.CORDONED.value):
            return 0
        with self.lock:
            return max(0, self.capacity - len(self.runs))

    # -- a poll and its delivery -----------------------------------------------------------------

    def poll(self, ask: PollAsk) -> dict:
        """The check-in the control plane fetches: what a dial-out runner would post."""
        if self.runner_id != ask.runner:
            self.say(f"polled as runner {ask.name} ({ask.runner})")
            self.runner_id = ask.runner
        if time.monotonic() - self._probed_at >= REPROBE_EVERY:
            self.capabilities = capabilities.probe()
            self._probed_at = time.monotonic()
        inv = inventory.inventory(str(self.state.path), self.options.size)
        changed = {k: v for k, v in inv.items() if k != "started_at"}
        with self.lock:
            held = [{"flight": r.id, "epoch": r.lease.epoch} for r in self.runs.values()]
        check_in: dict = {"free_slots": self.free_slots(), "readings": inventory.readings(),
                          "version": __version__, "held": [h["flight"] for h in held],
                          "workers": self.options.workers}
        if changed != self._inventory_sent:
            check_in["inventory"] = inv
            check_in["labels"] = self.options.labels
        if self.capabilities != self._capabilities_sent:
            check_in["capabilities"] = self.capabilities
        outbox = self.relay.pending()
        goodbye = self.stopping and not held and not outbox
        self._polled = {"inventory": changed if "inventory" in check_in else None,
                        "capabilities": check_in.get("capabilities"), "goodbye": goodbye}
        with self.lock:
            self._polls += 1
            number = self._polls
            self._answered[number] = time.monotonic()  # an instant before the answer leaves
            while len(self._answered) > ANSWERED_KEPT:
                self._answered.popitem(last=False)
        return {"check_in": check_in, "held": held, "outbox": outbox, "goodbye": goodbye,
                "poll": number}

    def answered_at(self, poll: int | None) -> float:
        """When this runner answered the poll a delivery names (monotonic): what its grants
        and renewals count from. A delivery that names none (an older control plane) counts
        from the newest answer, one naming a poll long forgotten from the oldest kept."""
        with self.lock:
            if poll is not None and poll in self._answered:
                return self._answered[poll]
            if self._answered:
                return next(iter(self._answered.values()) if poll is not None
                            else reversed(self._answered.values()))
        return time.monotonic()

    def deliver(self, delivery: Delivery) -> dict:
        """The control plane's answers to the last poll: applied in the order a dial-out
        runner hears them (check-in, its reports, its leases, new grants)."""
        if delivery.checked_in:
            self._checked_in(CheckedIn.model_validate(delivery.checked_in))
        answered = self.answered_at(delivery.poll)
        hand_backs = self.relay.settle(delivery.applied, delivery.refusals, delivery.renewals)
        for renewal in delivery.renewals:
            run = self.runs.get(renewal["flight"])
            if run is not None:
                run.lease_renewed(answered + (renewal["expires_at"] - renewal["server_time"]))
                if renewal.get("service") is not None:
                    run.service_spec = renewal["service"]
        for refusal in delivery.refusals:  # as the refused request's ApiError would
            run = self.runs.get(refusal["flight"])
            if run is not None and refusal.get("seq") not in hand_backs:
                run._refused(_error(refusal), raise_=False)
        if delivery.retired and not self.retired:
            self._retire()
        if self._polled.get("goodbye"):
            self.said_goodbye.set()
        taken: list[str] = []
        refused: list[str] = []
        for grant in delivery.grants:
            claimed = Claimed.model_validate(grant)
            (taken if self._take(claimed, answered) else refused).append(claimed.flight.id)
        return {"taken": taken, "refused": refused}

    def _checked_in(self, answer: CheckedIn) -> None:
        if self._polled.get("inventory") is not None:
            self._inventory_sent = self._polled["inventory"]
        if self._polled.get("capabilities") is not None:
            self._capabilities_sent = self._polled["capabilities"]
        if "send_capabilities" in answer.directives:
            self._capabilities_sent = None
        if answer.policy and answer.policy != self.policy:
            if self.policy:
                self.say("policy is now " + ", ".join(f"{k} {v}"
                                                      for k, v in sorted(answer.policy.items())))
            self.policy = dict(answer.policy)
        if answer.admin_state != self.admin_state:
            if self.admin_state is not None:
                self.say(f"admin state is now {answer.admin_state}")
            self.admin_state = answer.admin_state
        self.protocol.update(answer.protocol.model_dump())
        for flight_id in answer.ended:
            run = self.runs.get(flight_id)
            if run is not None:
                self.say(f"{flight_id}: ended by the control plane; stopping it")
                run.ended_by_server.set()
                run.lost.set()

    def _retire(self) -> None:
        self.retired = True
        self.say("this runner was retired by an admin: stopping its flights and handing them "
                 "back")
        for run in list(self.runs.values()):
            run.retire()

    def _take(self, answer: Claimed, answered: float) -> bool:
        """Fly a granted flight; a grant it cannot take (stopping, no slot) is given back.
        Its lease runs out here its lifetime after ``answered`` (the poll that got it)."""
        flight, lease = answer.flight, answer.lease
        ttl = lease.expires_at - lease.granted_at
        # the relay answers every call a flight makes of its client, held for the next poll
        run = FlightRun(client=cast(Client, self.relay), flight=flight, say=self.say,
                        lease=Lease(flight.id, lease.epoch, ttl, answer.protocol.lease_renew_at,
                                    answered + ttl,
                                    margin=answer.protocol.lease_margin or DEFAULTS.lease_margin),
                        workspace_root=self.state.workspaces, fleet=None,
                        policy=answer.policy or self.policy,
                        capabilities=self.capabilities or {}, state_dir=self.state.path,
                        hidden=list(self.options.hidden), on_unmet=self._unmet,
                        on_retired=self._retire_once, renewed_by_polls=True)
        with self.lock:
            fits = len(self.runs) < self.capacity and flight.id not in self.runs
            if fits and not (self.stopping or self.retired):
                self.runs[run.id] = run
            else:
                fits = False
        if not fits:
            self.relay.give_back(flight.id, lease.epoch, "the runner is stopping or full")
            return False
        thread = threading.Thread(target=self._fly, args=(run,), name=f"flight-{run.id}",
                                  daemon=True)
        self.threads = [t for t in self.threads if t.is_alive()] + [thread]  # ended: forgotten
        thread.start()
        return True

    def _retire_once(self) -> None:
        if not self.retired:
            self._retire()

    def _unmet(self, missing: str) -> None:
        self.say(f"cannot meet the assigned policy: {missing}")
        self.capabilities = capabilities.probe()
        self._probed_at = time.monotonic()
        self._capabilities_sent = None

    def _fly(self, run: FlightRun) -> None:
        fly_saying(run, self.say)
        with self.lock:
            self.runs.pop(run.id, None)
        self.relay.forget(run.id)

    # -- life ---------------------------------------------------------------------------------

    def request_stop(self, reason: str | None = None) -> None:
        self.stop.set()

    def shut_down(self) -> None:
        """Take nothing new, let running flights finish within the grace period, then hand
        the rest back; the hand-backs leave with the next poll (while the grace lasts)."""
        self.stopping = True
        deadline = time.monotonic() + (0.0 if self.retired else self.options.grace)
        running = list(self.runs.values())
        for run in running:
            if run.flight.kind == "service":
                run.returning.set()
        if running:
            self.say(f"stopping: letting {len(running)} flight(s) finish "
                      f"(up to {self.options.grace:g}s)")
        for t in list(self.threads):
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        for run in list(self.runs.values()):
            run.returning.set()
        for t in list(self.threads):
            t.join(timeout=STOP_GRACE + 1)
