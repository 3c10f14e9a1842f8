"""The maintainer: ask for the plan, carry it out through the driver, attest. It never decides.

``gg runner maintain POOL`` is a runner process (its own state dir, registration and
check-ins) that flies nothing. Its loop, which stops by itself after ``max_cycles`` or when
``stop`` is set::

    come online (register once, check in, keep checking in)
    every next_plan_in seconds (the control plane says; a few seconds):
        plan   <- GET  /v1/pools/POOL/plan      403: not allowed to maintain it -> exit
        clean:    members this host holds that the plan does not list are removed (the
                  control plane no longer knows them)
        act:      each action in order: the control plane's side first (POST .../actions:
                  it checks the action against a fresh plan, mints codes and retires what
                  must stop), then the driver's; the first failure ends the cycle
        attest -> POST /v1/pools/POOL/attest     which member processes run, what was done

Members outlive the maintainer: stopping or killing it leaves them running, and the next
maintainer on this host (same state dir) adopts them through the driver's ``members()``.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from gg import config
from gg.api.pools import ActionTaken, MaintainerPlan
from gg.client import RETRY_GOODBYE, RETRY_STEP, ApiError, Unreachable
from gg.errors import GGError
from gg.pool.drivers import Driver, MemberLaunch, make_driver
from gg.runner.loop import Runner, RunnerExit, RunnerOptions

RETRY_EVERY = 5.0  # after a refusal that may pass (not in force, another maintainer, away)
# After a cycle whose actions failed (a start the driver could not make, say), the next plan
# waits twice as long as the last, up to this: a host that cannot make machines is not asked
# to every few seconds, and `gg pools` shows the failure and the wait.
BACKOFF_MAX = 300.0


def backoff_pause(interval: float, failures: int, most: float = BACKOFF_MAX) -> float:
    """The pause before the next plan after ``failures`` failed cycles in a row (0: none)."""
    if failures <= 0:
        return interval
    return min(most, interval * 2 ** failures)


NAME_ROOM = 63  # a runner name's length


def default_name(host: str, pool: str) -> str:
    """``HOST-maintain-POOL``; when that is longer than a runner name may be, its first
    characters and a digest of the whole, so two long pool names never share a name (live
    runner names are unique: a second maintainer under a taken name would be refused)."""
    full = f"{host}-maintain-{pool}"
    if len(full) <= NAME_ROOM:
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()[:8]
    return f"{full[:NAME_ROOM - 9]}-{digest}"


class MaintainerExit(Exception):
    """The maintainer must stop, with one sentence saying why; ``forbidden`` when it was
    refused the pool."""

    def __init__(self, message: str, *, forbidden: bool = False):
        super().__init__(message)
        self.forbidden = forbidden


@dataclass
class MaintainerOptions:
    server: str
    pool: str
    state_dir: Path
    name: str
    images_dir: Path
    person_token: str | None = None
    enrol_token: str | None = None
    max_cycles: int | None = None
    commands_dir: Path | None = None  # driver command: where the strategy's executables are
    capacity: int | None = None  # the most members this host holds; None: no limit of its own


class Maintainer:
    def __init__(self, options: MaintainerOptions, *, say: Callable[[str], None] = print,
                 stop: threading.Event | None = None,
                 make: Callable[..., Driver] = make_driver):
        self.options = options
        self.say = say
        self.stop = stop or threading.Event()
        self.runner = Runner(RunnerOptions(server=options.server, state_dir=options.state_dir,
                                           name=options.name, person_token=options.person_token,
                                           enrol_token=options.enrol_token),
                             say=say, stop=self.stop)
        self.api = self.runner.client
        self._make = make
        self._driver: Driver | None = None
        self._driver_key: tuple | None = None
        self._said: str | None = None
        self.failures = 0  # cycles in a row whose actions failed
        self._never_joined: list[str] = []  # the last attestation's members that never joined
        self.backoff_max = BACKOFF_MAX

    @property
    def hidden(self) -> list[Path]:
        """This maintainer's directories, hidden from its members' flights: its state (its key,
        its credential, every member's home) and the config dir (a person's token)."""
        return [self.options.state_dir, config.config_dir()]

    @property
    def members_dir(self) -> Path:
        return self.options.state_dir / "members"

    def run(self) -> int:
        try:
            self.runner.come_online()
        except RunnerExit as exc:
            raise MaintainerExit(str(exc)) from None
        reg = self.runner.registration
        assert reg is not None, "come_online registered the runner, or raised"
        self.say(f"maintainer {self.options.name} ({reg.runner_id}) for pool "
                 f"{self.options.pool} is up")
        cycles = 0
        try:
            while not self.stop.is_set():
                pause = self.cycle()
                cycles += 1
                if self.options.max_cycles is not None and cycles >= self.options.max_cycles:
                    break
                self.stop.wait(pause)
        finally:
            self._goodbye()
        if self.runner.exit_reason:
            raise MaintainerExit(self.runner.exit_reason)
        return 0

    def request_stop(self) -> None:
        self.stop.set()

    # -- one cycle ------------------------------------------------------------------------

    def cycle(self) -> float:
        """Plan, act, attest once; returns how long to wait before the next plan."""
        pool = self.options.pool
        try:
            plan = self.api.pool_plan(pool, self.options.capacity, retry_for=RETRY_STEP)
        except Unreachable as exc:
            self._once(f"the control plane is away ({exc.message}); trying again")
            return RETRY_EVERY
        except ApiError as exc:
            if exc.status in (401, 403):
                raise MaintainerExit(exc.message, forbidden=exc.status == 403) from None
            self._once(f"not maintaining pool {pool} yet: {exc.message}")
            return RETRY_EVERY
        driver = self._driver_for(plan)
        did = self._clean(driver, plan)
        problem = driver.problem()
        if problem is not None:
            self._once(f"the {driver.name} driver cannot work here: {problem}")
        else:
            self._said = None
            did += self._carry_out(driver, plan)
        failed = [d for d in did if not d.get("ok", True)]
        error = failed[-1].get("error") if failed else None
        if self._never_joined and error is None:
            error = (f"member {', '.join(self._never_joined)} never checked in before its "
                     "member code expired")
        # A failure stands until a cycle's actions all go through and no member it made is
        # still on its way (one that never joins is the next failure, not a success).
        settling = any(m.state in ("starting", "resetting") for m in plan.members
                       if m.maintainer_id in (None, self._me))
        if error is not None:
            self.failures += 1
        elif not settling:
            self.failures = 0
        pause = backoff_pause(float(plan.next_plan_in), self.failures, self.backoff_max)
        backoff = ({"failures": self.failures, "retry_in": pause, "error": error}
                   if self.failures else None)
        self._attest(driver, did, problem, backoff)
        return pause

    def _driver_for(self, plan: MaintainerPlan) -> Driver:
        key = (plan.driver, plan.pool, tuple(sorted((plan.command or {}).items())))
        if self._driver is None or self._driver_key != key:
            extra: dict[str, Any] = {}
            if plan.driver == "command":
                extra = {"command": plan.command, "commands_dir": self.options.commands_dir}
            self._driver = self._make(plan.driver, pool=plan.pool, root=self.members_dir,
                                      images_dir=self.options.images_dir, hide=self.hidden,
                                      **extra)
            self._driver_key = key
        return self._driver

    def _clean(self, driver: Driver, plan: MaintainerPlan) -> list[dict]:
        """Members on this host that the control plane does not list are gone for it."""
        known = {m.id for m in plan.members}
        did = []
        for member_id in driver.members():
            if member_id in known:
                continue
            try:
                driver.remove(member_id)
                did.append({"action": "clean", "member_id": member_id, "ok": True})
            except GGError as exc:
                did.append({"action": "clean", "member_id": member_id, "ok": False,
                            "error": exc.message})
        return did

    def _carry_out(self, driver: Driver, plan: MaintainerPlan) -> list[dict]:
        steps: list[dict] = []
        for action in plan.actions:
            steps += [action] * (action["count"] if action["action"] == "start" else 1)
        did = []
        for action in steps:
            kind, member_id = action["action"], action.get("member_id")
            try:
                did.append(self._step(driver, plan, kind, member_id, action.get("digest")))
            except (ApiError, Unreachable, GGError) as exc:
                did.append({"action": kind, "member_id": member_id, "ok": False,
                            "error": exc.message})
                self.say(f"{kind} {member_id or ''}".rstrip() + f" failed: {exc.message}")
                break  # ask for a new plan rather than carry out a stale one
        return did

    def _step(self, driver: Driver, plan: MaintainerPlan, kind: str, member_id: str | None,
              digest: str | None) -> dict:
        """The control plane's side first, then the driver's."""
        pool, ref = self.options.pool, plan.image.ref
        if digest is not None:
            driver.prepare(digest, ref)
        answer = self.api.pool_act(pool, kind, member_id, retry_for=RETRY_STEP)
        done: dict[str, Any] = {"action": kind, "member_id": member_id, "ok": True}
        if kind == "remove":
            assert member_id is not None, "pool_act refused a remove that names no member"
            held_by = {m.id: m.maintainer_id for m in plan.members}.get(member_id)
            # a member of a maintainer gone silent (an orphan): its machine is on that host,
            # unless the driver reaches it from here too (a provider's list names it)
            if held_by in (None, self._me) or member_id in driver.members():
                driver.remove(member_id)
        elif kind == "reset":
            driver.reset(self._launch(answer, ref))
        else:  # start, roll, replace
            if kind != "start":
                assert member_id is not None, "pool_act refused one that names no member"
                driver.remove(member_id)
            driver.start(self._launch(answer, ref))
            assert answer.member is not None, "the answer to a start names the new member"
            done["new_member"] = answer.member.id
        self.say(" ".join(filter(None, (kind, member_id, done.get("new_member")))))
        return done

    def _launch(self, answer: ActionTaken, ref: str) -> MemberLaunch:
        member = answer.member
        # the answer to a start or a reset: the member, the digest it runs and its code
        assert member is not None and member.digest is not None and answer.code is not None
        return MemberLaunch(member_id=member.id, name=member.name, digest=member.digest,
                            code=answer.code, server=self.options.server, image_ref=ref)

    def _attest(self, driver: Driver, did: list[dict], problem: str | None,
                backoff: dict | None = None) -> None:
        try:
            members = [{"id": m, "process": "running" if driver.running(m) else "exited"}
                       for m in driver.members()]
        except GGError as exc:
            members, problem = [], problem or exc.message
        body: dict[str, Any] = {"members": members, "did": did,
                                "driver": {"name": driver.name, "problem": problem},
                                "backoff": backoff}
        try:
            answer = self.api.attest(self.options.pool, body, retry_for=RETRY_STEP)
            self._never_joined = list(answer.never_joined)
        except Unreachable as exc:
            self._once(f"could not attest ({exc.message}); trying again")
        except ApiError as exc:
            if exc.status in (401, 403):
                raise MaintainerExit(exc.message, forbidden=exc.status == 403) from None
            self.say(f"the attestation was refused: {exc.message}")

    # -- small things ---------------------------------------------------------------------

    @property
    def _me(self) -> str | None:
        reg = self.runner.registration
        return reg.runner_id if reg is not None else None

    def _once(self, line: str) -> None:
        """Say a waiting line once, not every cycle."""
        if line != self._said:
            self.say(line)
            self._said = line

    def _goodbye(self) -> None:
        try:
            self.api.stop = threading.Event()  # the goodbye must not be cut short by stop
            self.api.goodbye(retry_for=RETRY_GOODBYE)
        except (ApiError, Unreachable):
            pass
