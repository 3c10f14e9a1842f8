"""The one HTTP client, used by the CLI, the runner and the maintainer.

Every retry decision lives here: connection failures, timeouts and 502/503/504 are
retried with exponential backoff and full jitter for as long as the caller allows
(``retry_for`` seconds, or until ``stop`` is set); anything the server answered
deliberately (4xx) is raised at once as an :class:`ApiError` of its code's class
(``gg.refusals``: ``RunnerRetired``, ``FlightEnded``, ...). A lease call (renew, report,
hand-back) is stored once however often it arrives (it carries its epoch and key), so for
it every 5xx, a 500 included, is "try again", never an answer (:class:`ServerFault` when
the budget ran out).

Several control plane replicas: ``server`` may be a comma-separated list of URLs
(``--server``, ``GG_SERVER``). A request goes to the replica that last answered (remembered
for the whole process, per list). A connection that could not be made carried nothing, so
the same attempt goes on to the next replica at once, whatever the caller's budget; a
failure after the request may have reached a replica (a reset, a timeout, a 502/503/504)
is an outcome unknown, retried only as the budget above allows, at the next replica.

Every method returns the answer's model from ``gg.api`` (parsed with ``model_validate``), so
callers read attributes; :meth:`Client.request` alone returns the raw JSON.

The transport is ``http.client`` (:class:`PlainHttp`), one keep-alive connection per thread:
a command starts without importing an HTTP library (``gg fly`` stays within its start-up
budget), and a runner's requests cost a fifth of the CPU they cost through httpx.

``on_send(method, path, params, body)`` is called before every attempt that puts a request
on the wire, retries included: the runner passes its sent log (``gg.runner.sent``) so that
everything it sends is recorded in one place. The hook never sees the Authorization header.
"""

from __future__ import annotations

import http.client
import json as _json
import random
import sys
import threading
import time
import urllib.parse
import weakref
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from gg import __version__
from gg.api import paths
from gg.error_codes import ErrorCode
from gg.errors import GGError
from gg.refusals import ApiError, ServerFault, refusal  # noqa: F401 - callers import them here

if TYPE_CHECKING:
    from pydantic import BaseModel

PAGE_MAX = 1000  # the most rows one page of a listing holds (the server's bound)


class _Lazy:
    """A module imported on first use: a command pays for the wire models it reads, not for
    all of them (``gg --help`` and ``gg fly`` start faster). Nothing is looked up before an
    attribute is read, not even where the module's file is."""

    __slots__ = ("_name",)

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        import importlib

        return getattr(importlib.import_module(self._name), attr)


def _lazy(name: str) -> Any:
    return _Lazy(name)


# The wire modules, loaded on first use at run time; the type checker reads them as they are.
if TYPE_CHECKING:
    from gg import keys
    from gg.api import approvals as ap
    from gg.api import artifacts as ar
    from gg.api import consoles as co
    from gg.api import enrolment as e
    from gg.api import events as ev
    from gg.api import flights as f
    from gg.api import gates as g
    from gg.api import graphs as gh
    from gg.api import groups as gr
    from gg.api import hooks as h
    from gg.api import id_tokens as it
    from gg.api import people as pe
    from gg.api import placement as pl
    from gg.api import pools as po
    from gg.api import runners as r
    from gg.api import schemas as s
    from gg.api import secrets as se
    from gg.api import services as sv
else:
    keys = _lazy("gg.keys")
    e = _lazy("gg.api.enrolment")
    ev = _lazy("gg.api.events")
    f = _lazy("gg.api.flights")
    g = _lazy("gg.api.gates")
    gh = _lazy("gg.api.graphs")
    h = _lazy("gg.api.hooks")
    pe = _lazy("gg.api.people")
    pl = _lazy("gg.api.placement")
    po = _lazy("gg.api.pools")
    r = _lazy("gg.api.runners")
    s = _lazy("gg.api.schemas")
    se = _lazy("gg.api.secrets")
    ap = _lazy("gg.api.approvals")
    gr = _lazy("gg.api.groups")
    sv = _lazy("gg.api.services")
    co = _lazy("gg.api.consoles")
    it = _lazy("gg.api.id_tokens")
    ar = _lazy("gg.api.artifacts")

_RETRY_STATUSES = (502, 503, 504)

# Seconds, named once. A request gives up after TIMEOUT; between retries it pauses a random
# time up to BACKOFF_BASE * 2**attempt, never longer than BACKOFF_CAP.
TIMEOUT = 15.0
BACKOFF_BASE = 0.2
BACKOFF_CAP = 5.0

# Retry budgets: how long a caller keeps retrying while the control plane is away or busy.
RETRY_FOREVER = float("inf")  # until stopped: registration, the first check-in, each claim
RETRY_FOLLOW = 120.0  # following a flight's output (gg fly --wait, gg show --follow)
# Following a flight that waits: how often its waiting sentence is read again (a change in
# the fleet, such as a runner going offline, changes the sentence without a new fact).
WAITING_POLL = 2.0
RETRY_JOIN = 60.0  # spending an enrolment token or a pool member's one-time code
RETRY_STEP = 30.0  # one step of longer work: credential renewal, a maintainer's plan and acts
RETRY_FLIGHT_MIN = 30.0  # a flight's reports and hand-back: twice its lease, at least this
RETRY_CALL = 10.0  # a one-off call: credential references, a hand-back while stopping
RETRY_REFRESH = 5.0  # a check-in the enrolment state asks for at once
RETRY_GOODBYE = 3.0  # the goodbye on the way out
RETRY_RELEASE = 2.0  # freeing a parked claim on the way out

M = TypeVar("M", bound="BaseModel")
SendHook = Callable[[str, str, "dict | None", Any], None]
# on_retry(failure, pause): a request failed and is tried again after ``pause`` seconds.
RetryHook = Callable[[Exception, float], None]


class Unreachable(GGError):
    status = 0
    code = ErrorCode.UNREACHABLE

    def __init__(self, message: str, *, where: str | None = None):
        super().__init__(message)
        # the control plane no request reached (None: not said): a connection refused, reset
        # or dropped mid-answer all mean that it cannot be reached there
        self.where = where


def replicas(server: str) -> list[str]:
    """The URLs of a ``--server`` value: one, or several separated by commas."""
    return [part.strip().rstrip("/") for part in server.split(",") if part.strip()]


def same_control_plane(a: str, b: str) -> bool:
    """Whether two ``--server`` values name the same control plane: they share a replica
    (a list that gained or lost a replica, or was reordered, still does)."""
    return bool(set(replicas(a)) & set(replicas(b)))


# The replica that last answered, per list of URLs (shared by every client of the process:
# the runner's claim client and its other client learn from each other).
_last_good: dict[tuple[str, ...], str] = {}
_last_good_lock = threading.Lock()


def _try_again(status: int, idempotent: bool) -> bool:
    """Whether an answer is retried: a gateway's or a control plane's that is unavailable
    (502/503/504) always; any other 5xx only for a request that is stored once however often
    it arrives (a lease call), where trying again can do no harm."""
    return status in _RETRY_STATUSES or (idempotent and 500 <= status < 600)


def _not_sent(exc: Exception) -> bool:
    """The request never left: no connection was made."""
    if isinstance(exc, TransportFailed):
        return exc.kind in ("ConnectError", "ConnectTimeout")
    httpx = sys.modules.get("httpx")  # a test's transport
    return httpx is not None and isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout,
                                                  httpx.PoolTimeout))


class Client:
    def __init__(self, server: str, token: str | None = None, *, timeout: float = TIMEOUT,
                 stop: threading.Event | None = None, backoff_cap: float = BACKOFF_CAP,
                 on_send: SendHook | None = None, on_retry: RetryHook | None = None,
                 on_reached: Callable[[], None] | None = None):
        self.servers = replicas(server) or [server.rstrip("/")]
        self._list = tuple(self.servers)
        self.token = token
        self.on_send = on_send
        self.on_retry = on_retry  # the runner logs each failure and its retry's delay
        self.on_reached = on_reached  # ...and when an answer comes again
        self.stop = stop or threading.Event()
        self.backoff_cap = backoff_cap
        self._timeout = timeout
        self._transports: dict[str, PlainHttp] = {}  # one per replica, made when first used
        self._override = None  # a transport a test puts in place of every replica's

    @property
    def _http(self):
        """The transport to the replica the next request goes to."""
        return self._override or self._transport(self.server)

    @_http.setter
    def _http(self, transport) -> None:
        self._override = transport

    def _transport(self, base: str) -> "PlainHttp":
        transport = self._transports.get(base)
        if transport is None:
            transport = self._transports[base] = PlainHttp(
                base, self._timeout, {"user-agent": f"gg/{__version__}"})
        return transport

    @property
    def server(self) -> str:
        """The replica the next request goes to: the one that last answered."""
        return _last_good.get(self._list, self.servers[0])

    def _answered(self, base: str) -> None:
        if _last_good.get(self._list) != base:
            with _last_good_lock:
                _last_good[self._list] = base

    def _failed(self, base: str) -> None:
        """``base`` failed: the next request goes to the replica after it (unless another
        thread has moved on already)."""
        if len(self.servers) == 1:
            return
        with _last_good_lock:
            if _last_good.get(self._list, self.servers[0]) == base:
                i = self.servers.index(base)
                _last_good[self._list] = self.servers[(i + 1) % len(self.servers)]

    def close(self) -> None:
        for transport in [*self._transports.values(), *([self._override] if self._override else [])]:
            transport.close()

    def request(self, method: str, path: str, *, json: Any = None, params: dict | None = None,
                timeout: float | None = None, retry_for: float = 0.0, token: str | None = None,
                idempotent: bool = False) -> Any:
        """``idempotent``: the server stores this request once however often it arrives, so
        every 5xx is retried within ``retry_for``, not only 502/503/504."""
        deadline = time.monotonic() + retry_for
        attempt = 0
        headers = {}
        bearer = token or self.token
        if bearer:
            headers["authorization"] = f"Bearer {bearer}"
        unsent = 0  # replicas in a row this attempt could not connect to
        while True:
            base = self.server
            if self.on_send is not None:
                self.on_send(method, path, params, json)
            try:
                http = self._override or self._transport(base)
                response = http.request(method, path, json=json, params=params,
                                              headers=headers,
                                              **({} if timeout is None else {"timeout": timeout}))
            except Exception as exc:
                if not _unreachable(exc):
                    raise
                self._failed(base)
                if _not_sent(exc):
                    unsent += 1
                    if unsent < len(self.servers) and not self.stop.is_set():
                        continue  # nothing reached it: the same attempt, at the next replica
                where = (base if unsent < 2 else
                         "any of " + ", ".join(self.servers))
                failure: Exception = Unreachable(
                    f"cannot reach the control plane at {where} "
                    f"({getattr(exc, 'kind', type(exc).__name__)})", where=where)
            else:
                if not _try_again(response.status_code, idempotent):
                    self._answered(base)
                    if self.on_reached is not None:
                        self.on_reached()
                    return _decode(response)
                self._failed(base)
                failure = _error(response)
            unsent = 0
            attempt += 1
            pause = random.uniform(0, min(self.backoff_cap, BACKOFF_BASE * 2 ** min(attempt, 10)))
            if self.stop.is_set() or time.monotonic() + pause > deadline:
                raise failure
            if self.on_retry is not None:
                self.on_retry(failure, pause)
            self.stop.wait(pause)

    # -- people -------------------------------------------------------------------------

    def health(self, **kw) -> s.Health:
        return _one(s.Health, self.request("GET", paths.HEALTH, **kw))

    def whoami(self) -> pe.Whoami:
        return _one(pe.Whoami, self.request("GET", paths.WHOAMI))

    def add_person(self, name: str, admin: bool, ttl: float | str | None = None) -> pe.PersonWithToken:
        return _one(pe.PersonWithToken, self.request(
            "POST", paths.PEOPLE, json={"name": name, "admin": admin, "ttl": ttl}))

    def people(self, removed: bool = False) -> list[pe.Person]:
        return _many(pe.Person, self.request(
            "GET", paths.PEOPLE, params={"removed": "true" if removed else "false"}))

    def remove_person(self, name: str) -> pe.Person:
        return _one(pe.Person, self.request("DELETE", paths.PERSON.format(name=_segment(name))))

    def rotate_person_token(self, name: str, ttl: float | str | None = None) -> pe.PersonWithToken:
        return _one(pe.PersonWithToken, self.request(
            "POST", paths.PERSON_TOKEN.format(name=_segment(name)), json={"ttl": ttl}))

    # -- hooks (admin) ---------------------------------------------------------------------

    def add_hook(self, url: str, on: list[str], environment: str | None = None) -> h.HookWithSecret:
        return _one(h.HookWithSecret, self.request(
            "POST", paths.HOOKS, json={"url": url, "on": on, "environment": environment}))

    def hooks(self) -> list[h.Hook]:
        return _many(h.Hook, self.request("GET", paths.HOOKS))

    def hook(self, hook_id: str) -> h.HookDetail:
        return _one(h.HookDetail, self.request("GET", paths.HOOK.format(hook_id=_segment(hook_id))))

    def remove_hook(self, hook_id: str) -> h.Hook:
        return _one(h.Hook, self.request("DELETE", paths.HOOK.format(hook_id=_segment(hook_id))))

    # -- secrets (docs/jobs.md): a value goes in, never out ---------------------------------

    def set_secret(self, name: str, value: str, environment: str | None = None) -> se.SecretSetAnswer:
        return _one(se.SecretSetAnswer, self.request(
            "PUT", paths.SECRET.format(name=_segment(name)),
            json={"value": value, "environment": environment}))

    def secrets(self) -> list[se.Secret]:
        return _many(se.Secret, self.request("GET", paths.SECRETS))

    def remove_secret(self, name: str, environment: str | None = None) -> se.SecretRemoved:
        params = {"environment": environment} if environment else None
        return _one(se.SecretRemoved, self.request(
            "DELETE", paths.SECRET.format(name=_segment(name)), params=params))

    # -- runners (as the runner) ----------------------------------------------------------

    def key_nonce(self, purpose: str, public_key: str, **kw) -> r.KeyNonce:
        return _one(r.KeyNonce, self.request(
            "POST", paths.KEY_NONCES, json={"purpose": purpose, "public_key": public_key}, **kw))

    def proved(self, purpose: str, key, body: dict, **kw) -> dict:
        """``body`` with this machine's key proved for ``purpose``: its public key, a fresh
        nonce from the control plane and the private key's signature over both."""
        nonce = self.key_nonce(purpose, keys.public_text(key), **kw).nonce
        return {**body, **keys.prove(key, purpose, nonce)}

    def proving(self, purpose: str, key, path: str, body: dict, *, retry_for: float = 0.0,
                **kw) -> Any:
        """POST ``body`` to ``path`` with ``key`` proved, retrying like :meth:`request` but
        with a fresh nonce for every attempt: a nonce is spent by the first request that
        reaches the server, even when its answer is lost on the way back."""
        deadline = time.monotonic() + retry_for
        attempt = 0
        while True:
            left = max(0.0, deadline - time.monotonic())
            try:
                signed = self.proved(purpose, key, body, retry_for=left,
                                     **{k: v for k, v in kw.items() if k == "timeout"})
                return self.request("POST", path, json=signed, **kw)
            except (Unreachable, ApiError) as exc:
                if isinstance(exc, ApiError) and exc.status not in _RETRY_STATUSES:
                    raise
                failure = exc
            attempt += 1
            pause = random.uniform(0, min(self.backoff_cap, BACKOFF_BASE * 2 ** min(attempt, 10)))
            if self.stop.is_set() or time.monotonic() + pause > deadline:
                raise failure
            if self.on_retry is not None:
                self.on_retry(failure, pause)
            self.stop.wait(pause)

    def register(self, body: dict, key=None, **kw) -> r.Registered:
        """Register this machine as the signed-in person; ``key`` (its private key) is proved."""
        if key is not None:
            return _one(r.Registered, self.proving("register", key, paths.RUNNERS, body, **kw))
        return _one(r.Registered, self.request("POST", paths.RUNNERS, json=body, **kw))

    def check_in(self, body: dict, **kw) -> r.CheckedIn:
        return _one(r.CheckedIn, self.request("POST", paths.RUNNER_CHECK_IN, json=body, **kw))

    def claim(self, free_slots: int, wait: float, *, readings: dict | None = None,
              policy: str | None = None, **kw) -> r.Claimed | r.Instructed | None:
        """Claim work, parked up to ``wait`` seconds. With ``readings`` the claim is also the
        runner's heartbeat (its check-in) and may be answered with an instruction."""
        body: dict = {"free_slots": free_slots, "wait": wait}
        if readings is not None:
            body.update(readings=readings, policy=policy)
        answer = self.request("POST", paths.RUNNER_CLAIM, json=body, timeout=wait + 15.0, **kw)
        if isinstance(answer, dict) and "instruction" in answer:
            return r.Instructed.model_validate(answer)
        return _maybe(r.Claimed, answer)

    def renew(self, flight_id: str, epoch: int, **kw) -> r.LeaseRenewed:
        return _one(r.LeaseRenewed, self.request(
            "POST", paths.LEASE_RENEW.format(flight_id=flight_id), json={"epoch": epoch},
            idempotent=True, **kw))

    def report(self, flight_id: str, epoch: int, facts: list[dict], **kw) -> r.FactsStored:
        return _one(r.FactsStored, self.request(
            "POST", paths.LEASE_FACTS.format(flight_id=flight_id),
            json={"epoch": epoch, "facts": facts}, idempotent=True, **kw))

    def hand_back(self, flight_id: str, body: dict, **kw) -> r.HandedBack:
        """The hand-back. A runner sends ``claim_next`` only when its grant's protocol said
        ``hand_back_claims``, but during a rolling upgrade the grant may come from a replica
        of the new version and the hand-back reach one of the previous version, which
        refuses a body field it does not know (400, before anything is stored): it is then
        sent again without it, and the runner claims its next flight itself
        (docs/scale-out.md, "upgrades with two adjacent versions side by side"). The same
        for the usage note beside `started` (``hand_back_usage``): sent again without it."""
        path = paths.LEASE_HAND_BACK.format(flight_id=flight_id)
        started = [f for f in body.get("facts") or [] if f.get("kind") == "started"]
        without_usage = {k: v for k, v in body.items() if k != "facts"}
        if started:
            without_usage["facts"] = started
        tries = [body]  # then what an older replica takes: without the usage note, then
        if without_usage != body:  # without claim_next either
            tries.append(without_usage)
        if "claim_next" in body:
            tries.append({k: v for k, v in without_usage.items() if k != "claim_next"})
        for sent in tries[:-1]:
            try:
                return _one(r.HandedBack, self.request("POST", path, json=sent, idempotent=True,
                                                       **kw))
            except ApiError as exc:
                if exc.status != 400:
                    raise
        return _one(r.HandedBack, self.request("POST", path, json=tries[-1], idempotent=True,
                                               **kw))

    def id_token(self, flight_id: str, epoch: int, audience: str, **kw) -> it.IdTokenMinted:
        """A signed identity token for a flight this runner holds at ``epoch``."""
        return _one(it.IdTokenMinted, self.request(
            "POST", it.LEASE_ID_TOKEN.format(flight_id=_segment(flight_id)),
            json={"epoch": epoch, "audience": audience}, **kw))

    # -- artifacts (docs/work-graphs.md) ---------------------------------------------------

    def offer_artifacts(self, flight_id: str, epoch: int, artifacts: list[dict],
                        **kw) -> ar.ArtifactsNeeded:
        return _one(ar.ArtifactsNeeded, self.request(
            "POST", ar.LEASE_ARTIFACTS.format(flight_id=_segment(flight_id)),
            json={"epoch": epoch, "artifacts": artifacts}, idempotent=True, **kw))

    def upload_artifact(self, flight_id: str, epoch: int, name: str, body, *, sha256: str,
                        size: int) -> ar.ArtifactStored:
        """``body`` (a file open for reading, at its start) sent a chunk at a time."""
        path = ar.LEASE_ARTIFACT.replace("{name:path}", _path(name)).format(
            flight_id=_segment(flight_id))
        return _one(ar.ArtifactStored, self.streamed(
            "PUT", path, params={"epoch": epoch, "sha256": sha256, "size": size},
            body=(body, size)))

    def artifacts(self, flight_id: str) -> ar.Artifacts:
        return _one(ar.Artifacts, self.request(
            "GET", ar.ARTIFACTS.format(flight_id=_segment(flight_id))))

    def download_artifact(self, flight_id: str, name: str, sink: Callable[[bytes], Any]) -> str:
        """Artifact ``name`` of a flight, handed to ``sink`` a chunk at a time; its SHA-256 as
        the server stored it."""
        path = ar.ARTIFACT.replace("{name:path}", _path(name)).format(
            flight_id=_segment(flight_id))
        return self.streamed("GET", path, sink=sink)

    def download_input(self, flight_id: str, epoch: int, dependency_id: str, name: str,
                       sink: Callable[[bytes], Any]) -> str:
        path = ar.LEASE_INPUT.replace("{name:path}", _path(name)).format(
            flight_id=_segment(flight_id), dependency_id=_segment(dependency_id))
        return self.streamed("GET", path, params={"epoch": epoch}, sink=sink)

    def streamed(self, method: str, path: str, *, params: dict | None = None,
                 body: tuple[Any, int] | None = None,
                 sink: Callable[[bytes], Any] | None = None) -> Any:
        """One request whose body (a file and its length) or answer (to ``sink``) goes a
        chunk at a time, never whole in memory; not retried (the caller may, from the
        start). With ``sink``: the answer's ``x-gg-sha256``; else its JSON."""
        headers = {"authorization": f"Bearer {self.token}"} if self.token else {}
        base = self.server
        try:
            answer = self._transport(base).stream(method, path, params=params, headers=headers,
                                                  body=body, sink=sink)
        except Exception as exc:
            if not _unreachable(exc):
                raise
            self._failed(base)
            raise Unreachable(f"cannot reach the control plane at {base} "
                              f"({getattr(exc, 'kind', type(exc).__name__)})", where=base) from None
        self._answered(base)
        if answer.status_code >= 400:
            raise _error(answer)
        return answer.digest if sink is not None else answer.json()

    def rotate_signing_key(self) -> it.SigningKeyRotated:
        return _one(it.SigningKeyRotated, self.request("POST", it.SIGNING_KEY_ROTATE))

    def goodbye(self, **kw) -> s.Ok:
        return _one(s.Ok, self.request("POST", paths.RUNNER_GOODBYE, **kw))

    def challenge(self, **kw) -> r.Challenge:
        return _one(r.Challenge, self.request("POST", paths.RUNNER_CHALLENGE, **kw))

    def renew_credential(self, nonce: str, signature: str, **kw) -> r.CredentialRenewed:
        return _one(r.CredentialRenewed, self.request(
            "POST", paths.RUNNER_CREDENTIAL, json={"nonce": nonce, "signature": signature}, **kw))

    # -- operator views ---------------------------------------------------------------------

    def runners(self, limit: int | None = None) -> list[r.RunnerRow]:
        """The oldest ``limit`` runners (every one when None), following the listing's pages;
        a server that does not page answers every runner, cut here."""
        if limit is None:
            return _many(r.RunnerRow, self.request("GET", paths.RUNNERS))
        rows: list[r.RunnerRow] = []
        params: dict = {}
        while len(rows) < limit:
            params["limit"] = want = min(PAGE_MAX, limit - len(rows))
            page = _many(r.RunnerRow, self.request("GET", paths.RUNNERS, params=params))
            rows.extend(page)
            if len(page) < want or len(page) > want:  # the last page, or every runner at once
                break
            params["after"] = page[-1].id
        return rows[:limit]

    def runner(self, ref: str) -> r.RunnerDetail:
        return _one(r.RunnerDetail, self.request("GET", paths.RUNNER.format(ref=_segment(ref))))

    def runner_by_fingerprint(self, fingerprint: str) -> r.RunnerDetail:
        return _one(r.RunnerDetail, self.request("GET", paths.RUNNER_BY_FINGERPRINT,
                                                 params={"fingerprint": fingerprint}))

    def open_flight(self, body: dict, *, plain: bool = False) -> f.FlightRow | Plain:
        """The opened flight's row; ``plain``: read as sent (:class:`Plain`)."""
        answer = self.request("POST", paths.FLIGHTS, json=body)
        return Plain(answer) if plain else _one(f.FlightRow, answer)

    def open_graph(self, flights: list[dict]) -> gh.GraphOpenedList:
        """Open many flights in one transaction, all or none (``gg fly --file``): each
        body is an open's with its ``name`` and the names it ``needs``."""
        return _one(gh.GraphOpenedList, self.request("POST", paths.GRAPHS,
                                                     json={"flights": flights}))

    def graph(self, flight_id: str) -> gh.FlightGraph:
        """The graph ``flight_id`` belongs to (``gg flights --graph F``)."""
        return _one(gh.FlightGraph, self.request(
            "GET", paths.FLIGHT_GRAPH.format(flight_id=flight_id)))

    def flights_page(self, stage: str | None = None, limit: int = 200,
                     cursor: str | None = None) -> f.FlightPage:
        """One page of the listing, newest first (at most PAGE_MAX rows a page)."""
        params: dict = {"limit": min(limit, PAGE_MAX)}
        if stage:
            params["stage"] = stage
        if cursor:
            params["cursor"] = cursor
        return _one(f.FlightPage, self.request("GET", paths.FLIGHTS, params=params))

    def flights(self, stage: str | None = None, limit: int | None = 200) -> list[f.FlightRow]:
        """The newest ``limit`` flights (every one when None), following the listing's cursors."""
        rows: list[f.FlightRow] = []
        cursor = None
        while limit is None or len(rows) < limit:
            want = PAGE_MAX if limit is None else limit - len(rows)
            page = self.flights_page(stage, want, cursor)
            rows.extend(page.items)
            cursor = page.next_cursor
            if cursor is None:
                break
        return rows

    def flight(self, flight_id: str, *, plain: bool = False) -> f.FlightDetail | Plain:
        answer = self.request("GET", paths.FLIGHT.format(flight_id=flight_id))
        return Plain(answer) if plain else _one(f.FlightDetail, answer)

    def facts(self, flight_id: str, after: int = 0, wait: float = 0, *, plain: bool = False,
              **kw) -> f.FactsPage | Plain:
        answer = self.request("GET", paths.FLIGHT_FACTS.format(flight_id=flight_id),
                              params={"after": after, "wait": wait}, timeout=wait + 15.0, **kw)
        return Plain(answer) if plain else _one(f.FactsPage, answer)

    def estimate_accuracy(self, since: float | None = None) -> f.EstimateAccuracy:
        params = {} if since is None else {"since": since}
        return _one(f.EstimateAccuracy, self.request("GET", paths.ESTIMATE_ACCURACY,
                                                     params=params))

    def rerun(self, flight_id: str, changes: dict) -> f.FlightRow:
        """``gg rerun``: a new flight from ``flight_id``'s spec, with ``changes``."""
        return _one(f.FlightRow, self.request(
            "POST", paths.FLIGHT_RERUN.format(flight_id=flight_id), json=changes))

    def cancel(self, flight_id: str) -> f.FlightDetail:
        return _one(f.FlightDetail, self.request(
            "POST", paths.FLIGHT_CANCEL.format(flight_id=flight_id)))

    def gates(self, status: str = "open") -> list[g.Gate]:
        return _many(g.Gate, self.request("GET", paths.GATES, params={"status": status}))

    def gate(self, gate_id: str) -> g.Gate:
        return _one(g.Gate, self.request("GET", paths.GATE.format(gate_id=gate_id)))

    def clear_gate(self, gate_id: str) -> g.Gate:
        return _one(g.Gate, self.request("POST", paths.GATE_CLEAR.format(gate_id=gate_id)))

    # -- the action queue (docs/approvals.md) --------------------------------------------------

    def approve(self, flight_id: str, digest: str | None = None) -> f.FlightDetail:
        return _one(f.FlightDetail, self.request(
            "POST", ap.FLIGHT_APPROVE.format(flight_id=_segment(flight_id)),
            json={"digest": digest}))

    def reject(self, flight_id: str, reason: str | None = None) -> f.FlightDetail:
        return _one(f.FlightDetail, self.request(
            "POST", ap.FLIGHT_REJECT.format(flight_id=_segment(flight_id)),
            json={"reason": reason}))

    def force(self, flight_id: str) -> ap.Forced:
        return _one(ap.Forced, self.request(
            "POST", ap.FLIGHT_FORCE.format(flight_id=_segment(flight_id))))

    def pending(self) -> list[ap.PendingFlight]:
        return _many(ap.PendingFlight, self.request("GET", ap.PENDING))

    def services(self) -> list[sv.ServiceRow]:
        return _many(sv.ServiceRow, self.request("GET", sv.SERVICES))

    def update_service(self, flight_id: str, command: list[str] | None,
                       env: dict[str, str] | None) -> sv.ServiceUpdated:
        return _one(sv.ServiceUpdated, self.request(
            "POST", sv.SERVICE_UPDATE.format(flight_id=_segment(flight_id)),
            json={"command": command, "env": env}))

    def set_environment_approval(self, name: str, required: bool) -> ap.EnvironmentApproval:
        return _one(ap.EnvironmentApproval, self.request(
            "PUT", ap.ENVIRONMENT_APPROVAL.format(name=_segment(name)),
            json={"approval": "required" if required else "none"}))
    # -- admin ------------------------------------------------------------------------------

    def change_runner_state(self, ref: str, action: str) -> r.StateChanged:
        path = {"cordon": paths.RUNNER_CORDON, "drain": paths.RUNNER_DRAIN,
                "resume": paths.RUNNER_RESUME}[action]
        return _one(r.StateChanged, self.request("POST", path.format(ref=_segment(ref))))

    def drain_labelled(self, labels: dict[str, str]) -> list[r.StateChange]:
        return _many(r.StateChange, self.request(
            "POST", paths.RUNNERS_DRAIN, json={"labels": labels}))

    def attach_runner(self, url: str, name: str, fingerprint: str | None = None) -> r.Attached:
        """``gg runner attach``: the control plane polls the pull-mode runner at ``url``."""
        return _one(r.Attached, self.request(
            "POST", paths.RUNNER_ATTACH, json={"url": url, "name": name, "fingerprint": fingerprint},
            timeout=60.0))

    def retire_runner(self, ref: str) -> r.Retired:
        return _one(r.Retired, self.request("POST", paths.RUNNER_RETIRE.format(ref=_segment(ref))))

    def forget_runner(self, ref: str) -> r.Forgotten:
        return _one(r.Forgotten, self.request("DELETE", paths.RUNNER.format(ref=_segment(ref))))

    def set_policy(self, ref: str, **policy) -> r.RunnerDetail:
        body = {k: v for k, v in policy.items() if v is not None}
        return _one(r.RunnerDetail, self.request(
            "POST", paths.RUNNER_POLICY.format(ref=_segment(ref)), json=body))

    def events(self, **params) -> list[ev.Event]:
        wait = params.get("wait", 0) or 0
        clean = {k: v for k, v in params.items() if v is not None}
        return _many(ev.Event, self.request("GET", paths.EVENTS, params=clean, timeout=wait + 15.0))

    # -- enrolment: profiles, tokens, enrolled runners, credential references ---------------

    def apply_profile(self, name: str, mapping: dict, dry_run: bool = False) -> e.ProfileApplied:
        return _one(e.ProfileApplied, self.request(
            "PUT", paths.PROFILE.format(name=name), json={"profile": mapping},
            params=_dry(dry_run)))

    def profiles(self) -> list[e.ProfileView]:
        return _many(e.ProfileView, self.request("GET", paths.PROFILES))

    def profile(self, name: str) -> e.ProfileView:
        return _one(e.ProfileView, self.request("GET", paths.PROFILE.format(name=name)))

    def mint_enrol_token(self, body: dict) -> e.EnrolTokenMinted:
        return _one(e.EnrolTokenMinted, self.request("POST", paths.ENROL_TOKENS, json=body))

    def enrol_tokens(self) -> list[e.EnrolTokenView]:
        return _many(e.EnrolTokenView, self.request("GET", paths.ENROL_TOKENS))

    def revoke_enrol_token(self, fingerprint: str) -> e.EnrolTokenView:
        return _one(e.EnrolTokenView, self.request(
            "POST", paths.ENROL_TOKEN_REVOKE.format(fingerprint=fingerprint)))

    def enrol(self, token: str, body: dict, key=None, **kw) -> e.Enrolled:
        """Spend one use of an enrolment token (it travels as the bearer, never in a URL);
        ``key`` (this machine's private key) is proved."""
        if key is not None:
            return _one(e.Enrolled, self.proving(
                "enrol", key, paths.ENROL, body, token=token, **kw))
        return _one(e.Enrolled, self.request("POST", paths.ENROL, json=body, token=token, **kw))

    def set_credential_refs(self, refs: list[dict], **kw) -> e.CredentialRefsSet:
        return _one(e.CredentialRefsSet, self.request(
            "PUT", paths.RUNNER_CREDENTIALS, json={"refs": refs}, **kw))

    def credential_refs(self) -> list[e.CredentialRefRow]:
        return _many(e.CredentialRefRow, self.request("GET", paths.CREDENTIALS))

    # -- placement: environments, the root envelope, labels, ownership, plans ----------------

    def chart_environment(self, name: str, means: str) -> pl.EnvironmentCharted:
        return _one(pl.EnvironmentCharted, self.request(
            "POST", pl.ENVIRONMENTS, json={"name": name, "means": means}))

    def environments(self) -> list[pl.EnvironmentView]:
        return _many(pl.EnvironmentView, self.request("GET", pl.ENVIRONMENTS))

    def environment(self, name: str) -> pl.EnvironmentView:
        return _one(pl.EnvironmentView, self.request("GET", pl.ENVIRONMENT.format(name=name)))

    def remove_environment(self, name: str) -> s.Removed:
        return _one(s.Removed, self.request("DELETE", pl.ENVIRONMENT.format(name=_segment(name))))

    def delete_profile(self, name: str) -> s.Removed:
        return _one(s.Removed, self.request("DELETE", paths.PROFILE.format(name=_segment(name))))

    def delete_strategy(self, name: str) -> s.Removed:
        return _one(s.Removed, self.request("DELETE", paths.STRATEGY.format(name=_segment(name))))

    def delete_pool(self, pool: str) -> s.Removed:
        return _one(s.Removed, self.request("DELETE", paths.POOL.format(pool=_segment(pool))))

    def apply_root(self, mapping: dict, dry_run: bool = False) -> pl.RootApplied:
        return _one(pl.RootApplied, self.request("PUT", pl.ROOT, json=mapping,
                                                 params=_dry(dry_run)))

    def root(self) -> pl.RootView:
        return _one(pl.RootView, self.request("GET", pl.ROOT))

    def labels(self) -> list[r.LabelDispositions]:
        return _many(r.LabelDispositions, self.request("GET", pl.LABELS))

    def change_ownership(self, ref: str, action: str) -> r.OwnershipChanged:
        """Claim, unclaim, reserve or release a runner (as a person)."""
        path = {"claim": pl.RUNNER_CLAIM, "unclaim": pl.RUNNER_UNCLAIM,
                "reserve": pl.RUNNER_RESERVE, "release": pl.RUNNER_RELEASE}[action]
        return _one(r.OwnershipChanged, self.request("POST", path.format(ref=ref)))

    def set_ownership(self, ref: str, state: str) -> r.OwnershipChanged:
        return _one(r.OwnershipChanged, self.request(
            "POST", pl.RUNNER_OWNERSHIP.format(ref=ref), json={"ownership": state}))

    def plan(self, flight_id: str) -> f.Plan:
        return _one(f.Plan, self.request("GET", pl.FLIGHT_PLAN.format(flight_id=flight_id)))

    # -- strategies and pools (people) --------------------------------------------------------

    def strategies(self) -> list[po.Strategy]:
        return _many(po.Strategy, self.request("GET", paths.STRATEGIES))

    def strategy(self, name: str) -> po.Strategy:
        return _one(po.Strategy, self.request("GET", paths.STRATEGY.format(name=name)))

    def apply_strategy(self, name: str, mapping: dict, dry_run: bool = False) -> po.StrategyApplied:
        return _one(po.StrategyApplied, self.request(
            "PUT", paths.STRATEGY.format(name=name), json={"strategy": mapping},
            params=_dry(dry_run)))

    def pin_strategy_digest(self, name: str, digest: str) -> po.DigestPinned:
        return _one(po.DigestPinned, self.request(
            "POST", paths.STRATEGY_DIGEST.format(name=name), json={"digest": digest}))

    def pools(self) -> list[po.Pool]:
        return _many(po.Pool, self.request("GET", paths.POOLS))

    def pool(self, pool: str) -> po.Pool:
        return _one(po.Pool, self.request("GET", paths.POOL.format(pool=pool)))

    def allow_maintainer(self, pool: str, runner: str) -> po.MaintainerAllowed:
        return _one(po.MaintainerAllowed, self.request(
            "POST", paths.POOL_ALLOW.format(pool=pool), json={"runner": runner}))

    # -- pools (their maintainer and members) ---------------------------------------------------

    def pool_plan(self, pool: str, capacity: int | None = None, **kw) -> po.MaintainerPlan:
        """This maintainer's share of the plan; asking checks it in with ``capacity``."""
        params = {"capacity": capacity} if capacity is not None else None
        return _one(po.MaintainerPlan, self.request(
            "GET", paths.POOL_PLAN.format(pool=pool), params=params, **kw))

    def pool_act(self, pool: str, action: str, member_id: str | None = None, **kw) -> po.ActionTaken:
        return _one(po.ActionTaken, self.request(
            "POST", paths.POOL_ACTIONS.format(pool=pool),
            json={"action": action, "member_id": member_id}, **kw))

    def attest(self, pool: str, body: dict, **kw) -> po.Attested:
        return _one(po.Attested, self.request(
            "POST", paths.POOL_ATTEST.format(pool=pool), json=body, **kw))

    def join_pool(self, code: str, body: dict, key=None, **kw) -> po.MemberJoined:
        """A pool member spends its one-time code; ``key`` (its private key) is proved."""
        if key is not None:
            return _one(po.MemberJoined, self.proving(
                "join", key, paths.MEMBER_JOIN, body, token=code, **kw))
        return _one(po.MemberJoined, self.request(
            "POST", paths.MEMBER_JOIN, json=body, token=code, **kw))

    # -- groups, attributes and the fleet-wide stop (docs/groups.md) -----------------------

    def groups(self) -> list[gr.GroupView]:
        return _many(gr.GroupView, self.request("GET", paths.GROUPS))

    def set_group(self, name: str, body: dict) -> gr.GroupChanged:
        return _one(gr.GroupChanged, self.request(
            "PUT", paths.GROUP.format(name=_segment(name)), json=body))

    def group(self, name: str) -> gr.GroupDetail:
        return _one(gr.GroupDetail, self.request("GET", paths.GROUP.format(name=_segment(name))))

    def delete_group(self, name: str) -> gr.GroupDeleted:
        return _one(gr.GroupDeleted, self.request(
            "DELETE", paths.GROUP.format(name=_segment(name))))

    def group_drain(self, name: str, draining: bool) -> gr.GroupChanged:
        path = paths.GROUP_DRAIN if draining else paths.GROUP_RESUME
        return _one(gr.GroupChanged, self.request("POST", path.format(name=_segment(name))))

    def group_demand(self, name: str) -> gr.GroupDemand:
        return _one(gr.GroupDemand, self.request(
            "GET", paths.GROUP_DEMAND.format(name=_segment(name))))

    def attributes(self) -> list[gr.AttributeView]:
        return _many(gr.AttributeView, self.request("GET", paths.ATTRIBUTES))

    def set_attribute(self, key: str, values: list[str]) -> gr.AttributeView:
        return _one(gr.AttributeView, self.request(
            "PUT", paths.ATTRIBUTE.format(key=_segment(key)), json={"values": values}))

    def move_runner(self, ref: str, group: str) -> gr.RunnerMoved:
        return _one(gr.RunnerMoved, self.request(
            "POST", paths.RUNNER_GROUP.format(ref=_segment(ref)), json={"group": group}))

    def fleet_state(self) -> gr.FleetState:
        return _one(gr.FleetState, self.request("GET", paths.FLEET))

    def fleet_stop(self, quiesce: bool) -> gr.FleetState:
        return _one(gr.FleetState, self.request(
            "POST", paths.FLEET_QUIESCE if quiesce else paths.FLEET_RESUME))

    # -- consoles to a machine (docs/console.md) ---------------------------------------------

    def open_console(self, body: dict) -> co.ConsoleOpened:
        return _one(co.ConsoleOpened, self.request("POST", co.CONSOLES, json=body))

    def dial_console(self, console_id: str, side: str, *, open_timeout: float = TIMEOUT):
        """The console's WebSocket at the control plane (``side``: ``person`` or ``runner``),
        a ``websockets.sync.client`` connection: the same server URL (``http`` becomes
        ``ws``, ``https`` ``wss``), the same bearer token in the same header, the same TLS
        verification (``SSL_CERT_FILE`` included) as
        every other request. Not retried: the caller decides (the runner dials again while
        its check-ins keep naming the console)."""
        from websockets.sync.client import connect

        template = co.CONSOLE_PERSON if side == "person" else co.CONSOLE_RUNNER
        path = template.format(console_id=_segment(console_id))
        url = ws_url(self.server) + path
        if self.on_send is not None:
            self.on_send("WEBSOCKET", path, None, None)
        headers = {"authorization": f"Bearer {self.token}"} if self.token else {}
        try:
            return connect(url, additional_headers=headers, user_agent_header=f"gg/{__version__}",
                           ssl=_tls_context() if url.startswith("wss:") else None,
                           open_timeout=open_timeout, compression=None, max_size=2 ** 24)
        except (OSError, TimeoutError) as exc:
            raise Unreachable(f"cannot reach the control plane at {self.server} "
                              f"({type(exc).__name__})") from None
        except Exception as exc:  # the handshake was refused (websockets' InvalidStatus, …)
            status = getattr(getattr(exc, "response", None), "status_code", 0) or 0
            raise refusal(status, ErrorCode.CONSOLE_REFUSED,
                          f"the control plane refused the console connection ({exc})") from None


def ws_url(server: str) -> str:
    """The WebSocket URL of a control plane reached at ``server`` (http -> ws, https -> wss)."""
    if server.startswith("https://"):
        return "wss://" + server[len("https://"):]
    if server.startswith("http://"):
        return "ws://" + server[len("http://"):]
    return server


def _one(model: type[M], value: Any) -> M:
    return model.model_validate(value)


def _many(model: type[M], value: Any) -> list[M]:
    from pydantic import TypeAdapter

    # a list of a model named at run time, which a static type cannot spell
    return TypeAdapter(list[model]).validate_python(value)  # type: ignore[valid-type]


class Plain(dict):
    """An answer read as it was sent, for a command that only prints it: its fields (and
    those of the objects in it) read as attributes, named as on the wire, with the values of
    the JSON (an enum is its value, a time its number). Reading it builds no wire model, so
    such a command never imports pydantic; the server's typed answer is the model's (the
    ``--json`` a command prints is the same either way)."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        try:
            return _plain(self[name])
        except KeyError:
            raise AttributeError(name) from None

    def __getitem__(self, name: str) -> Any:
        return _plain(dict.__getitem__(self, name))

    def get(self, name: str, default: Any = None) -> Any:
        return _plain(dict.get(self, name, default))


def _plain(value: Any) -> Any:
    if type(value) is dict:
        return Plain(value)
    if type(value) is list:
        return [_plain(v) for v in value]
    return value


def _maybe(model: type[M], value: Any) -> M | None:
    """A claim's answer: None is "nothing for you" (204)."""
    return None if value is None else model.model_validate(value)


STREAM_CHUNK = 1024 ** 2  # an artifact's bytes sent or read at a time
IDLE_KEPT = 8  # idle keep-alive connections a transport keeps for the next requests
ONE_SEND_MOST = 64 * 1024  # a request's body joined to its head in one send, up to this size


class _OneSend:
    """A request's head and body leave in one send. ``http.client`` sends them with two
    calls, and with ``TCP_NODELAY`` each leaves at once as a segment of its own: two system
    calls for the sender, two segments for the kernel (on loopback it does the receiver's
    share in the sender's call too) and a server woken for the head before the body. A
    connection told :attr:`joining` holds the head the next :meth:`send` is given and sends
    it with the body that follows (a body of at most :data:`ONE_SEND_MOST` bytes)."""

    joining = False
    _head = b""

    def send(self, data) -> None:
        if self.joining:  # the head: kept for the body, which http.client sends next
            self.joining = False
            self._head = bytes(data)
            return
        if self._head:
            data, self._head = self._head + bytes(data), b""
        super().send(data)  # type: ignore[misc]  # http.client.HTTPConnection.send

    def getresponse(self) -> http.client.HTTPResponse:
        if self._head:  # a head whose body never came (http.client skips an empty one)
            head, self._head = self._head, b""
            super().send(head)  # type: ignore[misc]
        return super().getresponse()  # type: ignore[misc]

    def close(self) -> None:
        self.joining, self._head = False, b""
        super().close()  # type: ignore[misc]


class _Connection(_OneSend, http.client.HTTPConnection):
    pass


class _TlsConnection(_OneSend, http.client.HTTPSConnection):
    pass


class PlainHttp:
    """The transport: ``http.client`` over keep-alive connections, answering what
    :meth:`Client.request` reads (a status and the JSON). A request takes an idle connection
    (the one used last) or opens one, and gives it back once its answer is read, so threads
    that come and go (a runner's flights) share a few connections instead of each opening
    its own; at most :data:`IDLE_KEPT` idle ones are kept. A kept-alive connection the
    server closed while it was idle is opened again once for the same request (the server
    never read it); every other failure is one of :attr:`errors`, which the client retries
    within the caller's ``retry_for``."""

    errors = (OSError, http.client.HTTPException)  # each raised as a TransportFailed

    def __init__(self, base_url: str, timeout: float, headers: dict[str, str]):
        try:
            url = urllib.parse.urlsplit(base_url)
            host, self._port = url.hostname, url.port
        except ValueError:
            host = None
        if not host or url.scheme not in ("http", "https"):
            raise Unreachable(f"cannot reach the control plane at {base_url}: not an http(s) "
                              "URL")
        self._host: str = host
        self._tls = url.scheme == "https"
        self._prefix = url.path.rstrip("/")
        self._proxy = _proxy_for(url.scheme, self._host)
        if self._proxy is not None and not self._tls:  # a plain proxy is sent whole URLs
            self._prefix = f"http://{url.netloc}{self._prefix}"
        self._timeout = timeout
        self._headers = headers
        self._idle: list[_Connection | _TlsConnection] = []  # the last one given back last
        self._lock = threading.Lock()
        self._opened: weakref.WeakSet = weakref.WeakSet()  # close() closes those in use too

    def request(self, method: str, path: str, *, json: Any = None, params: dict | None = None,
                headers: dict | None = None, timeout: float | None = None) -> "PlainAnswer":
        target = self._prefix + path
        if params:
            target += "?" + urllib.parse.urlencode({k: _query_value(v) for k, v in params.items()})
        sent = {**self._headers, **(headers or {})}
        if self._proxy is not None and not self._tls:
            sent.update(self._proxy[2])
        body = None
        if json is not None:
            body = _json.dumps(json, ensure_ascii=False, separators=(",", ":"),
                               allow_nan=False).encode()
            sent["content-type"] = "application/json"
        wait = self._timeout if timeout is None else timeout
        for fresh in (False, True):
            conn, reused = self._connection(fresh)
            conn.timeout = wait
            kept = False
            try:
                if conn.sock is None:
                    conn.connect()
                else:
                    conn.sock.settimeout(wait)
            except self.errors as exc:
                conn.close()
                raise TransportFailed("ConnectTimeout" if isinstance(exc, TimeoutError)
                                      else "ConnectError") from exc
            try:
                conn.joining = body is not None and len(body) <= ONE_SEND_MOST
                conn.request(method, target, body=body, headers=sent)
                response = conn.getresponse()
                answer = PlainAnswer(response.status, response.read())
                kept = not response.will_close
                return answer
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as exc:
                conn.close()
                if not reused or fresh:
                    raise TransportFailed("RemoteProtocolError") from exc
            except self.errors as exc:
                conn.close()
                raise TransportFailed("ReadTimeout" if isinstance(exc, TimeoutError)
                                      else "ReadError") from exc
            except BaseException:
                conn.close()
                raise
            finally:
                self._give_back(conn, kept)
        raise AssertionError("unreachable")  # pragma: no cover

    def stream(self, method: str, path: str, *, params: dict | None, headers: dict,
               body: tuple[Any, int] | None, sink: Callable[[bytes], Any] | None) -> "PlainAnswer":
        """:meth:`request` with a file's body sent, or a 2xx answer's body handed to
        ``sink``, STREAM_CHUNK bytes at a time (an artifact: never whole in memory)."""
        target = self._prefix + path
        if params:
            target += "?" + urllib.parse.urlencode({k: _query_value(v) for k, v in params.items()})
        sent = {**self._headers, **headers}
        if self._proxy is not None and not self._tls:
            sent.update(self._proxy[2])
        if body is not None:
            sent.update({"content-type": "application/octet-stream",
                         "content-length": str(body[1])})
        conn, _ = self._connection(True)
        conn.timeout = max(self._timeout, 60.0)
        conn.blocksize = STREAM_CHUNK
        try:
            conn.connect()
            conn.request(method, target, body=body[0] if body is not None else None,
                         headers=sent)
            response = conn.getresponse()
            if sink is None or response.status >= 300:
                return PlainAnswer(response.status, response.read())
            while block := response.read(STREAM_CHUNK):
                sink(block)
            answer = PlainAnswer(response.status, b"")
            answer.digest = response.getheader("x-gg-sha256") or ""
            return answer
        except self.errors as exc:
            raise TransportFailed("ReadTimeout" if isinstance(exc, TimeoutError)
                                  else "ReadError") from exc
        finally:
            conn.close()

    def _connection(self, fresh: bool) -> "tuple[_Connection | _TlsConnection, bool]":
        """An idle connection (True: it was used before) or, when there is none or
        ``fresh`` is asked, a new one (False)."""
        if not fresh:
            with self._lock:
                idle = self._idle.pop() if self._idle else None
            if idle is not None:
                return idle, idle.sock is not None
        host, port = (self._host, self._port) if self._proxy is None else self._proxy[:2]
        conn: _Connection | _TlsConnection
        if self._tls:
            conn = _TlsConnection(host, port, timeout=self._timeout, context=_tls_context())
            if self._proxy is not None:  # through the proxy's CONNECT tunnel
                conn.set_tunnel(self._host, self._port or 443, headers=self._proxy[2])
        else:
            conn = _Connection(host, port, timeout=self._timeout)
        self._opened.add(conn)
        return conn, False

    def _give_back(self, conn: "_Connection | _TlsConnection", kept: bool) -> None:
        """``conn`` after a request: idle for the next one when its answer was read whole
        and the server keeps it open, else closed."""
        if kept and conn.sock is not None:
            with self._lock:
                if len(self._idle) < IDLE_KEPT:
                    self._idle.append(conn)
                    return
        conn.close()

    def close(self) -> None:
        with self._lock:
            self._idle.clear()
        for conn in list(self._opened):
            conn.close()


def _proxy_for(scheme: str, host: str) -> "tuple[str, int, dict[str, str]] | None":
    """The proxy the environment names for ``scheme`` (``HTTPS_PROXY``, ``HTTP_PROXY``,
    ``ALL_PROXY``, lower case too) unless ``NO_PROXY`` exempts ``host``: (host, port, the
    headers it wants, ``Proxy-Authorization`` when the URL carries a user)."""
    import urllib.request

    proxies = urllib.request.getproxies_environment()
    proxy = proxies.get(scheme) or proxies.get("all")
    # proxy_bypass_environment is undocumented, so typeshed leaves it out
    if not proxy or urllib.request.proxy_bypass_environment(  # type: ignore[attr-defined]
            host, proxies):
        return None
    parts = urllib.parse.urlsplit(proxy if "://" in proxy else "http://" + proxy)
    if not parts.hostname:
        return None
    headers: dict[str, str] = {}
    if parts.username:
        import base64

        pair = (f"{urllib.parse.unquote(parts.username)}:"
                f"{urllib.parse.unquote(parts.password or '')}")
        headers["Proxy-Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
    return parts.hostname, parts.port or 80, headers


class TransportFailed(Exception):
    """A request that got no answer; ``kind`` says how, in the words a person reads in
    "cannot reach the control plane at URL (ConnectError)"."""

    def __init__(self, kind: str):
        super().__init__(kind)
        self.kind = kind


class PlainAnswer:
    __slots__ = ("status_code", "content", "digest")

    def __init__(self, status_code: int, content: bytes):
        self.status_code = status_code
        self.content = content
        self.digest = ""  # a streamed artifact's x-gg-sha256

    def json(self) -> Any:
        return _json.loads(self.content)


_TLS: list = []


def _tls_context():
    """The certificates an HTTPS control plane is checked against, as httpx chose them: the
    files ``SSL_CERT_FILE``/``SSL_CERT_DIR`` name when set, else certifi's bundle where it is
    installed (a host without a CA store of its own still verifies), else the system's."""
    if not _TLS:
        import os
        import ssl

        context = ssl.create_default_context()
        if not (os.environ.get("SSL_CERT_FILE") or os.environ.get("SSL_CERT_DIR")):
            try:
                import certifi
            except ImportError:
                pass
            else:
                context.load_verify_locations(cafile=certifi.where())
        _TLS.append(context)
    return _TLS[0]


def _unreachable(exc: Exception) -> bool:
    """A failure to reach the server or to hear its answer (retried), not a bug. A transport
    with httpx's ``request`` (a test's fake network, ``httpx.MockTransport``) fails with
    httpx's transport errors."""
    if isinstance(exc, TransportFailed):
        return True
    httpx = sys.modules.get("httpx")
    return httpx is not None and isinstance(exc, httpx.TransportError)


def _query_value(value: Any) -> str:
    """A query value as httpx writes it (``true``/``false``, an empty string for None)."""
    if value is True:
        return "true"
    if value is False:
        return "false"
    return "" if value is None else str(value)


def _path(name: str) -> str:
    """An artifact's name (a relative path) in a URL: each part quoted, the slashes kept."""
    return "/".join(urllib.parse.quote(part, safe="") for part in name.split("/"))


def _segment(ref: str) -> str:
    """A user-typed name as one path segment (``a/b`` must not become two)."""
    return urllib.parse.quote(ref, safe="")


def _decode(response) -> Any:
    if response.status_code == 204:
        return None
    if response.status_code >= 400:
        raise _error(response)
    return response.json()


def _error(response) -> ApiError:
    """The answer's refusal as its class (``gg.refusals``)."""
    try:
        body = response.json()["error"]
        return refusal(response.status_code, str(body["code"]), str(body["message"]))
    except (ValueError, KeyError, TypeError):
        return refusal(response.status_code, ErrorCode.HTTP_ERROR,
                       f"the control plane answered {response.status_code}")


def _dry(dry_run: bool) -> dict | None:
    """The query of an apply that only says what it would do."""
    return {"dry_run": "true"} if dry_run else None
