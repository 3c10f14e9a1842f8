"""Open, cancel, list and show flights; the waiting sentence comes from the domain."""

from __future__ import annotations

from dataclasses import fields, replace

from gg.control import approvals as approval_ops
from gg.control import artifacts as artifact_ops
from gg.control import attended as attended_ops
from gg.control import concurrency as concurrency_ops
from gg.control import dependencies as dependency_ops
from gg.control import environments as environment_ops
from gg.control import estimates as estimate_ops
from gg.control import groups as group_ops
from gg.control import keys_opened, pool_look
from gg.control import leases as lease_ops
from gg.control import limits as limit_ops
from gg.control import retries as retry_ops
from gg.control import runners as runner_ops
from gg.control import secrets as secret_ops
from gg.control import services as service_ops
from gg.control import sizes as size_ops
from gg.control.core import Core
from gg.control.lifecycle import move
from gg.domain import approvals, fitness, output, paging, retries, services, specs, timeouts, tokens
from gg.domain.concurrency import Keys
from gg.domain.console import may_cancel
from gg.domain.events import EventKind
from gg.domain.flight_spec import FlightSpec
from gg.domain.flights import Event, Flight, Priority, Stage, opened, priority_refusal
from gg.domain.limits import Limits
from gg.domain.matching import Seat, seat
from gg.domain.people import Person
from gg.domain.waiting import Context, OpenGate, Waiting, why_ended, why_waiting
from gg.errors import BadRequest, Forbidden, NotFound


def open_flight(core: Core, person: Person, spec: FlightSpec, *,
                rerun_of: str | None = None) -> Flight:
    """Open a flight of the ``spec`` its opener asked for: its defaults settled (the runner
    named, the time and output limits, a service's whole spec), held behind what holds it.
    ``rerun_of``: it reruns that flight (gg.control.reruns), linked in this transaction."""
    if problem := spec.problem():
        raise BadRequest(problem)
    if spec.repo is not None and (problem := fitness.repo_problem(spec.repo)):  # enrolment
        raise BadRequest(f"--repo: {problem}")
    kept = output.limit_for(spec.output_limit, default=core.settings.output_limit_default,
                            maximum=core.settings.output_limit_max)
    refusal = priority_refusal(spec.priority, admin=person.is_admin,
                               high_for=core.settings.high_priority)
    if refusal:
        raise Forbidden(refusal)
    service = (service_ops.new_spec(core, list(spec.command), spec.service)
               if spec.service is not None else None)
    if service is not None and spec.timeout is not None:
        raise BadRequest("a service runs until it is cancelled: --timeout does not apply")
    environment = spec.environment
    now = core.now()
    with core.store.atomic():
        target = runner_ops.resolve(core, spec.runner).id if spec.runner else None
        behind = environment_ops.admit(core, environment=environment, labels=spec.labels)
        group_ops.check_open(core, group=spec.group, where=spec.where, environment=environment,
                             repo=spec.repo)
        if spec.attended:
            attended_ops.check_open(core, target)
        if spec.after_any and not spec.after:  # --after: docs/work-graphs.md
            raise BadRequest("--after-any needs --after F1,F2: the flights to run after")
        after, held = dependency_ops.check_open(core, list(spec.after), spec.after_any)
        artifact_ops.check_open(spec.artifacts, after)  # --with-artifacts, --artifact-limit
        limit_ops.check_open(core, spec, target)  # gg fly --cpus --memory --pids
        secret_ops.check_open(core, environment, list(spec.secrets))  # gg fly --secret
        limit = None if service is not None else timeouts.limit_for(
            spec.timeout, _default_timeout(core, environment), core.settings.flight_timeout_max)
        settled = replace(spec, title=spec.title or " ".join(spec.command)[:120], runner=target,
                          timeout=limit, output_limit=kept, service=service,
                          kind=services.KIND if service is not None else "work")
        if service is None:  # a service is restarted by its runner, never retried
            settled = replace(settled, retry=retry_ops.settle(core, spec.retry, environment))
        elif spec.retry is not None and spec.retry.retries:
            raise BadRequest("a service is restarted by its runner: --retries does not apply")
        flight_id = tokens.new_id("f_")
        approval_gate = approval_ops.gate_for_new_flight(  # for this exact spec
            core, person, flight_id=flight_id, asked=spec.approval, approver=spec.approver,
            environment=environment, digest=specs.digest(specs.what_runs(settled)))
        behind = behind + ([approval_gate] if approval_gate else [])
        flight = opened(settled, held=bool(behind), gates=behind, id=flight_id,
                        opened_by=person.id, opened_at=now)
        core.store.insert_flight(flight)
        dependency_ops.record(core, flight.id, ids=after, any_end=spec.after_any, held=held)
        limit_ops.keep(core, flight.id, spec)
        if spec.note is not None:  # gg fly --note
            core.store.set_flight_note(flight.id, spec.note)
        secret_ops.keep(core, flight.id, list(spec.secrets))  # names only
        retry_ops.keep(core, flight.id, settled.retry)  # gg fly --retries
        artifact_ops.keep(core, flight.id, spec.artifacts, after)  # --with-artifacts
        core.event(EventKind.FLIGHT_OPENED, actor=person.name, flight_id=flight.id, at=now,
                   title=flight.title)
        if rerun_of is not None:  # gg rerun: linked both ways
            core.store.set_rerun(flight.id, rerun_of)
            core.event(EventKind.FLIGHT_RERUN, actor=person.name, flight_id=flight.id, at=now,
                       rerun_of=rerun_of)
        superseded = keys_opened.record(core, flight, settled, now)  # key and grace
    core.signals.ready_changed()
    for flight_id in superseded:
        core.signals.flight_changed(flight_id)
    return flight


def _default_timeout(core: Core, environment: str | None) -> float | None:
    """The root envelope's ``timeout:`` for ``environment`` (None: it sets none)."""
    root = core.store.root_envelope() if environment else None
    return root.timeouts.get(environment) if root is not None and environment else None


def cancel(core: Core, person: Person, flight_id: str) -> Flight:
    now = core.now()
    with core.store.atomic():
        flight = core.store.flight(flight_id)
        if flight is None:
            raise NotFound(f"no flight {flight_id}")
        if not may_cancel(person, flight.opened_by):
            raise Forbidden("only the flight's opener or an admin may cancel it")
        if flight.final:
            return flight
        move(core, flight, Event.CANCELLED, now, actor=person.name,
             reason=f"cancelled by {person.name}")
        approval_ops.withdraw(core, flight, person.name)
        frees = False
        if flight.stage == Stage.FLYING.value:
            lease_ops._settle_runner(core, flight.lease_runner, now)  # its lease ended here
            frees = concurrency_ops.frees_a_key(core, flight_id)
        flight = core.store.flight(flight_id)
        assert flight is not None, "cancelled just now, in this transaction"
    if frees:  # one its concurrency key held back may start now
        core.signals.ready_changed()
    core.signals.flight_changed(flight_id)
    return flight


class Snapshot:
    """Runners and leases read once, so many flights can be explained from one look."""

    def __init__(self, core: Core, now: float):
        self.core = core
        self.now = now
        runners = core.store.runners()
        self.placement = group_ops.placement(core)
        self.seats: list[Seat] = estimate_ops.fleet_seats(core, now, runners=runners,
                                                          placement=self.placement)
        # placement by size: the limits the flights explained asked, read with their keys
        # (load_keys) into one mapping every seat shares (gg.domain.matching.Seat.sizes)
        self._sizes: dict[str, Limits] = {}
        self._sized = any(s.room is not None for s in self.seats)
        if self._sized:
            self.seats = [replace(s, sizes=self._sizes) for s in self.seats]
        self.names = {r.id: r.name for r in runners}
        self._by_id = {s.runner.id: s for s in self.seats}
        self.open_gates = {g.id: g for g in core.store.gates(status="open", limit=100000)}
        # Who opened a flight matters to the ladder only through a reservation, so flights of
        # everyone who owns no reserved runner share one explanation (and one computation).
        self._reservers = {r.owner for r in runners if r.reserved}
        self.pool_reasons = pool_look.waiting_reasons(core, now)
        self._cache: dict = {}
        self._admins: set[str] | None = None  # read the first time an approval asks
        self._higher: dict[int, list[tuple[Flight, int]]] = {}
        self.keys = Keys({}, {})  # concurrency keys of the flights explained (load_keys)
        self._keys_read: set[str] = set()
        self._held = core.store.held_flights()  # --after: flights a dependency holds back
        self._retries = core.store.held_retries()  # retries whose delay holds them back
        self._avoid = core.store.avoided_ready()  # --retry-elsewhere: ready retries' runners
        self._held_by: dict[str, tuple] = {}

    def load_keys(self, flight_ids: list[str]) -> None:
        """Read the concurrency keys of these flights, and who flies with each key, and the
        limits each asked (placement by size), at once (a listing explains a page of flights
        from one read)."""
        fresh = [i for i in flight_ids if i not in self._keys_read]
        if not fresh:
            return
        self._keys_read.update(fresh)
        if self._sized:
            self._sizes.update(size_ops.asked(self.core, fresh))
        of = self.core.store.concurrency_of(fresh)
        if not of:
            return
        self.keys = Keys({**self.keys.of, **of}, self.keys.flying)
        unread = {c.key for c in of.values()} - set(self.keys.flying)
        flying = self.core.store.flying_with_keys(unread)
        self.keys.flying.update({k: flying.get(k, []) for k in unread})

    def waiting(self, flight: Flight) -> Waiting | None:
        return self.waiting_of(flight.__dict__, lambda: flight)

    def waiting_of(self, values: dict, make=None) -> Waiting | None:
        """The waiting reason of a flight given as its field values; flights that differ
        only in what the ladder does not read share one computation."""
        stage = values["stage"]
        if stage not in (Stage.READY.value, Stage.GATED.value):
            return None
        self.load_keys([values["id"]])  # read already when a listing loaded its page
        opener = values["opened_by"] if values["opened_by"] in self._reservers else None
        key = (stage, tuple(sorted(values["requires"].items())), values["runner_target"],
               opener, tuple(values["gates"]), values["repo"], values["agent"], values["kind"],
               values["priority"], values["group"], tuple(sorted(values["where"].items())),
               values["environment"], (values.get("service") or {}).get("port"),
               self.keys.of.get(values["id"]), self.held_by(values["id"]),
               self._retries.get(values["id"]), self._avoided(values),
               self._sizes.get(values["id"]))
        if key not in self._cache:
            flight = make() if make is not None else Flight(**values)
            seats = self.seats
            if flight.runner_target is not None:  # the ladder reads only that runner's seat
                seats = [s for s in (self._by_id.get(flight.runner_target),) if s is not None]
                gone = None if seats else self.core.store.runner(flight.runner_target)
                if gone is not None:  # retired: the ladder says so rather than "start it"
                    seats = [seat(gone, self.now, self.core.settings.offline_after, 0,
                                  frozenset())]
            self._cache[key] = why_waiting(flight, seats, self.context(flight))
        return self._cache[key]

    def context(self, flight: Flight) -> Context:
        gates = [OpenGate(g.id, g.guards, g.cleared_by_words, g.kind,
                          nobody_may=self._nobody_may_approve(g, flight))
                 for g in (self.open_gates.get(gid) for gid in flight.gates) if g is not None]
        missing = fitness.credential_missing_for(flight.repo, (s.runner for s in self.seats))
        self.load_keys([flight.id])
        held_by, after_any = self.held_by(flight.id)
        return Context(open_gates=gates, runner_names=self.names, credential_missing_for=missing,
                       pool_reason=pool_look.reason_for(self.pool_reasons, flight),
                       higher=self.higher(flight), quiesced_by=self.placement.quiesced_by,
                       concurrency=self.keys.of.get(flight.id), held=self.keys.held(flight.id),
                       held_by=held_by, after_any=after_any,
                       retry=retries.waiting(self._retries.get(flight.id), self.now, flight.id),
                       elsewhere_from=self._avoided(flight.__dict__))

    def _avoided(self, values: dict) -> str | None:
        """The runner a ready ``--retry-elsewhere`` retry keeps away from, if any."""
        return self._avoid.get(values["id"]) if values["stage"] == Stage.READY.value else None

    def held_by(self, flight_id: str) -> tuple:
        """(the first dependency holding the flight back, whether any ending will do), or
        (None, False) for a flight no dependency holds (read only for those held)."""
        if flight_id not in self._held:
            return None, False
        if flight_id not in self._held_by:
            self._held_by[flight_id] = dependency_ops.held_by(self.core, flight_id)
        return self._held_by[flight_id]

    def _nobody_may_approve(self, gate, flight: Flight) -> bool:
        """An approval that no live person may give: no named approver, and every admin
        opened the flight or changed it (people are read once, only when asked)."""
        if gate.kind != approvals.KIND or gate.payload.get("approver"):
            return False
        if self._admins is None:
            self._admins = {p.id for p in self.core.store.people(removed=False) if p.is_admin}
        return approvals.nobody_may_approve(
            admins=self._admins, opener=flight.opened_by,
            changed_by=gate.payload.get("changed_by"), named_approver=None)

    def higher(self, flight: Flight) -> list[tuple[Flight, int]]:
        """Ready flights of higher priority than ``flight`` (read once per priority)."""
        rank = Priority(flight.priority).rank
        if rank not in self._higher:
            above = tuple(p.value for p in Priority if p.rank < rank)
            self._higher[rank] = self.core.store.ready_kinds(above)
        return self._higher[rank]


def list_flights(core: Core, *, stage: str | None = None, limit: int = 200,
                 cursor: str | None = None) -> dict:
    """One page of the flight listing, newest first: ``{"items": [...], "next_cursor": ...}``.
    ``next_cursor`` (None on the last page) is opaque to callers; it names the place where the
    next page starts, so flights opened meanwhile never shift a page (they come first)."""
    if stage is not None and stage not in [s.value for s in Stage]:
        raise BadRequest(f"stage must be one of {', '.join(s.value for s in Stage)}")
    try:
        before = paging.read_cursor(cursor, "f")
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
    now = core.now()
    record_due(core, now)
    rows = core.store.flight_values(stages=(stage,) if stage else None, limit=limit + 1,
                                    before_seq=before, with_seq=True)
    more = len(rows) > limit
    rows = rows[:limit]
    waits = [v["id"] for v in rows if v["stage"] in (Stage.READY.value, Stage.GATED.value)]
    # The fleet is read (every runner, its seats) only when a row waits and must be explained:
    # a page of flights flying and landed names the runners it shows, nothing more.
    snap = Snapshot(core, now) if waits else None
    if snap is not None:
        snap.load_keys(waits)
    people = {p.id: p.name for p in core.store.people()}
    last = rows[-1]["_seq"] if rows else None
    items = []
    names = with_past_names(core, snap.names if snap is not None else {},
                            [v["lease_runner"] for v in rows])
    for values in rows:
        del values["_seq"]
        items.append(_view(values, snap.waiting_of(values) if snap is not None else None,
                           names, people))
    estimate_ops.add_to_rows(core, items, snap.seats if snap is not None else [], now)
    return {"items": items, "next_cursor": paging.make_cursor("f", last) if more and last is not None else None}


def row(core: Core, flight: Flight, *, opener: Person) -> dict:
    """The row of a flight just opened, as ``opener`` opened it: its record, without the
    waiting sentence (``waiting`` is null; ``GET`` the flight for it), which would cost a
    look at every runner on the hot path of opening."""
    return view(flight, None, {}, {opener.id: opener.name})


ID_TOKENS_SHOWN = 20  # a flight's newest identity tokens in its view


def show_flight(core: Core, flight_id: str, *, estimate: bool = True) -> dict:
    now = core.now()
    record_due(core, now)
    flight = core.store.flight(flight_id)
    if flight is None:
        raise NotFound(f"no flight {flight_id}")
    snap = Snapshot(core, now)
    people = {p.id: p.name for p in core.store.people()}
    out = view(flight, snap.waiting(flight),
               with_past_names(core, snap.names, [flight.lease_runner]), people)
    if estimate:  # the queue played forward: for one who reads, not for every open
        estimate_ops.add_to_rows(core, [out], snap.seats, now)
    else:
        out.update(estimate_ops.fields(None, now))
    out["stopping"] = None
    out["time_left"] = out["time_left_sentence"] = None
    if flight.stage == Stage.FLYING.value:
        left = timeouts.time_left(flight.timeout, flight.lease_granted_at, now)
        if left is not None:
            out["time_left"], out["time_left_sentence"] = left, timeouts.time_left_sentence(left)
    retired = retired_holder(core, flight, snap.names)
    if retired is not None:
        out["runner_name"] = retired
        out["stopping"] = stopping_sentence(retired)
    out["approval"] = approval_ops.approval_view(core, flight)
    out.update(concurrency_ops.of_flight(core, flight_id))
    out["note"] = core.store.flight_note(flight_id)  # gg fly --note
    out.update(dependency_ops.view(core, flight_id))  # --after: both ways
    out["secrets"] = secret_ops.names_of(core, flight_id)  # --secret: names, never values
    out.update(retry_ops.view(core, flight_id))  # --retries, and gg rerun both ways
    out.update(artifact_ops.view(core, flight_id))  # the files it left (docs/work-graphs.md)
    out["id_tokens"] = [  # gg id-token inside it: what was minted, never the token
        {"audience": e["body"].get("audience"), "epoch": e["body"].get("epoch"),
         "jti": e["body"].get("jti"), "at": e["at"], "expires_at": e["body"].get("expires_at")}
        for e in core.store.events(kind=EventKind.FLIGHT_ID_TOKEN.value, flight_id=flight_id,
                                   limit=ID_TOKENS_SHOWN, newest=True)]
    out["facts"] = core.store.facts(flight_id)
    grants = core.store.grants(flight_id)
    names = with_past_names(core, snap.names, [g["runner_id"] for g in grants])
    out["attempts"] = retry_ops.attempts(core, flight, grants=grants, facts=out["facts"],
                                         names=names)
    return out


def with_past_names(core: Core, names: dict[str, str], ids: list[str | None]) -> dict[str, str]:
    """``names`` (the live runners') plus the names of the runners among ``ids`` that are no
    longer live: a retired runner, a removed pool member, keeps its name in the flights it
    flew (its row is kept for history); one that was forgotten reads as its id."""
    missing = list({i for i in ids if i and i not in names})
    if not missing:
        return names
    found = core.store.runner_names(missing)
    return {**names, **{runner_id: found.get(runner_id, runner_id) for runner_id in missing}}


def retired_holder(core: Core, flight: Flight, names: dict[str, str]) -> str | None:
    """The name of the retired runner a flying flight is still leased to, if it is."""
    if flight.stage != Stage.FLYING.value or flight.lease_runner in names:
        return None
    if flight.lease_runner is None:  # a flying flight has its holder; none, none retired
        return None
    holder = core.store.runner(flight.lease_runner)
    return holder.name if holder is not None and holder.retired_at is not None else None


def stopping_sentence(name: str) -> str:
    return (f"runner {name} was retired and is stopping it: it becomes ready again when "
            f"{name} hands it back, or when its lease ends")


_FLIGHT_FIELDS = tuple(f.name for f in fields(Flight))


def view(flight: Flight, waiting: Waiting | None, names: dict[str, str],
         people: dict[str, str]) -> dict:
    # A shallow copy, not dataclasses.asdict: asdict deep-copies every value, which was
    # most of the time of listing 10,000 flights (docs/performance-placement.md).
    data = {name: getattr(flight, name) for name in _FLIGHT_FIELDS}
    data["command"], data["requires"], data["gates"] = (
        list(flight.command), dict(flight.requires), list(flight.gates))
    return _view(data, waiting, names, people)


def _view(data: dict, waiting: Waiting | None, names: dict[str, str],
          people: dict[str, str]) -> dict:
    """Add what people are shown to a flight's field values (a fresh dict, changed in place)."""
    holder = data["lease_runner"]
    data["runner"] = holder
    data["runner_name"] = names.get(holder) if holder else None
    data["opened_by_name"] = people.get(data["opened_by"], data["opened_by"])
    data["waiting"] = waiting.sentence if waiting else None
    data["remedy"] = waiting.remedy if waiting else None
    ended = why_ended(data["id"], data["stage"], data["ended_reason"], data["exit_code"])
    data["ended"] = ended.sentence if ended else None
    if ended is not None:
        data["remedy"] = ended.remedy
    data["lease"] = ({"runner": holder, "epoch": data["epoch"],
                      "expires_at": data["lease_expires_at"]}
                     if data["stage"] == Stage.FLYING.value else None)
    return data


def record_due(core: Core, now: float) -> None:
    """Listings show the truth: a lease past its expiry (or an attended flight past its
    deadline) is recorded first."""
    looks = core.store.next_looks()
    if not any(lease_ops.due_now(core, now, looks)):
        return
    with core.store.atomic():
        expired = lease_ops.expire_looked(core, now, looks)
    if expired:
        core.signals.ready_changed()
