"""Health: does what this runner can enforce meet the policy it was assigned?

The server runs this on every check-in with the runner's capability report (see
``gg.runner.capabilities``); the runner runs the same checks before it starts a flight, so the
two can never disagree about what is missing. Health is ``ok`` or ``degraded: <the one missing
piece>``; a degraded runner gets no work, and the next check-in that meets the policy clears it.

The checks run from the most fundamental to the most specific, and the first one that fails
names the missing piece::

    isolation allowed        policy    none needs a --dev server
    capability report        host      a report must exist before anything can be measured
    egress allowlist         host      egress allowlist: the runner can make a flight's network
                                       namespace and its nftables rules (root, nft, ip)
    bubblewrap installed     host      sandbox, or egress none without isolation
    bubblewrap namespaces    host      sandbox: the sandbox actually starts here
    sandbox confinement      host      sandbox: inside it, no capabilities, no_new_privs, own
                                       pid namespace, a uid that is not 0, /proc/sys read-only
                                       (as the probe read them)
    network namespace        host      egress none (sandbox or none): an empty netns can be made
    container engine         host      container: podman or docker answers
    gvisor                   host      gvisor: a flight of the probe's shape runs under runsc
                                       (not as uid 0 on a root runner)
    resource limits          host      the policy's default limits (cpus, memory, pids):
                                       each one's cgroup controller is there
                                       ("cgroup controller pids not available")
    workers                  never fails; raising past the started count is only a note

Policy problems come first because no change on the host can fix them. Checks the policy does
not need are not listed: ``gg runner show`` prints exactly the list that decided health.

Capability keys read here (all produced by ``gg.runner.capabilities.probe``): ``bwrap``
(path or None), ``bwrap_usable`` (bool), ``confinement`` (dict or None), ``netns`` (bool),
``container_engine`` (name or None). A report without ``confinement`` comes from a runner that
predates the check, whose sandbox kept its capabilities: it reads degraded until upgraded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gg.domain import limits as limit_rules
from gg.domain.policy import Policy
from gg.domain.runners import HealthState

PolicyLike = Policy | Mapping[str, Any]

NONE_NEEDS_DEV = "isolation none is allowed only on a --dev server"
ALLOWLIST_NEEDS = "egress allowlist needs nftables (nft) and root"
NO_REPORT = "no capability report yet"
NO_BWRAP = "bubblewrap not installed"
BWRAP_UNUSABLE = "bubblewrap cannot create namespaces here"
CAPABILITIES_KEPT = "the sandbox cannot drop its capabilities"
NO_NEW_PRIVS_UNSET = "the sandbox cannot set no_new_privs"
NO_PID_NAMESPACE = "the sandbox gets no pid namespace of its own"
FLIGHTS_AS_ROOT = "flights would run as root"
PROC_SYS_WRITABLE = "the sandbox's /proc/sys is writable"
CONFINEMENT_UNREPORTED = "the runner does not report its sandbox confinement (upgrade gg on it)"
NO_NETNS = "network namespaces unavailable"
NO_ENGINE = "no container engine reachable"
GVISOR_UNUSABLE = "gvisor (runsc) is not usable"

CHECKS_PASSED = "checks passed"
CHECKS_STALE = "checks stale"
CHECKS_PENDING = "checks pending"
CHECKS_NEVER_RUN = "checks never run"


@dataclass(frozen=True)
class Check:
    """One line of ``gg runner show``. A failed check's detail is the missing piece itself."""

    name: str
    passed: bool
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "passed": self.passed, "detail": self.detail}


@dataclass(frozen=True)
class Health:
    ok: bool
    missing: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def text(self) -> str:
        return HealthState.OK.value if self.ok else f"{HealthState.DEGRADED.value}: {self.missing}"

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "missing": self.missing, "text": self.text,
                "notes": list(self.notes)}


def _check(name: str, passed: bool, ok_detail: str, missing: str) -> Check:
    return Check(name, passed, ok_detail if passed else missing)


def _policy_checks(policy: Policy, dev: bool) -> list[Check]:
    out: list[Check] = []
    if policy.isolation == "none":
        out.append(_check("isolation allowed", dev, "isolation none on a --dev server",
                          NONE_NEEDS_DEV))
    else:
        out.append(Check("isolation allowed", True,
                         f"isolation {policy.isolation} is allowed on any server"))
    return out


def _needs_report(policy: Policy) -> bool:
    return policy.isolation != "none" or policy.egress != "all"


def _allowlist_check(caps: Mapping[str, Any]) -> Check:
    """The runner makes each flight a network namespace with its own nftables rules
    (gg.runner.egress): it says it can in ``egress_controls``, or why not."""
    if "allowlist" in (caps.get("egress_controls") or ()):
        return Check("egress allowlist", True,
                     "a network namespace with nftables rules per flight")
    why = caps.get("egress_allowlist_error")
    return Check("egress allowlist", False,
                 f"egress allowlist needs {why}" if why else ALLOWLIST_NEEDS)


def _host_checks(policy: Policy, caps: Mapping[str, Any]) -> list[Check]:
    out: list[Check] = []
    if not _needs_report(policy):
        return out
    out.append(_check("capability report", bool(caps), "received", NO_REPORT))
    if policy.egress == "allowlist":
        out.append(_allowlist_check(caps))
    if policy.isolation == "container":
        engine = caps.get("container_engine")
        out.append(_check("container engine", bool(engine), f"{engine} answers", NO_ENGINE))
        return out  # the engine cuts egress itself (--network none); joins an allowlist's
    if policy.isolation == "gvisor":
        out.append(_gvisor_check(caps))
        return out  # runsc cuts egress itself (--network=none); runs in an allowlist's
    if policy.isolation == "none" and policy.egress == "allowlist":
        return out  # the command itself, in the flight's network namespace
    bwrap = caps.get("bwrap")
    out.append(_check("bubblewrap installed", bool(bwrap), f"at {bwrap}", NO_BWRAP))
    if policy.isolation == "sandbox":
        out.append(_check("bubblewrap namespaces", bool(caps.get("bwrap_usable")),
                          "a sandbox starts here", BWRAP_UNUSABLE))
        if caps.get("bwrap_usable"):  # when no sandbox starts, the check above names it
            out.append(_confinement_check(caps))
    if policy.egress == "none":
        out.append(_check("network namespace", bool(caps.get("netns")),
                          "an empty network namespace can be made", NO_NETNS))
    return out


def _gvisor_check(caps: Mapping[str, Any]) -> Check:
    """A gVisor flight of the probe's shape ran here, as a uid that is not 0."""
    gvisor = caps.get("gvisor")
    if not isinstance(gvisor, Mapping):
        return Check("gvisor", False, f"{GVISOR_UNUSABLE}: not reported by this runner")
    if not gvisor.get("usable"):
        why = gvisor.get("error") or "runsc is not installed"
        return Check("gvisor", False, f"{GVISOR_UNUSABLE}: {why}")
    return Check("gvisor", True, f"a flight runs under {gvisor.get('path') or 'runsc'}")


def confinement_missing(confinement: Mapping[str, Any] | None) -> str | None:
    """The first piece of sandbox confinement the capability report says does not hold."""
    if confinement is None:
        return BWRAP_UNUSABLE
    if confinement.get("capabilities") != "dropped":
        return CAPABILITIES_KEPT
    if not confinement.get("no_new_privs"):
        return NO_NEW_PRIVS_UNSET
    if not confinement.get("pid_namespace"):
        return NO_PID_NAMESPACE
    if confinement.get("uid") == 0:  # a report from before the identity has no uid
        return f"{FLIGHTS_AS_ROOT} (the sandbox keeps uid 0)"
    if confinement.get("proc_sys_writable"):
        return PROC_SYS_WRITABLE
    return None


def _confinement_check(caps: Mapping[str, Any]) -> Check:
    if "confinement" not in caps:
        return Check("sandbox confinement", False, CONFINEMENT_UNREPORTED)
    confinement = caps["confinement"]
    missing = confinement_missing(confinement)
    if missing is not None:
        return Check("sandbox confinement", False, missing)
    userns = " in a user namespace" if confinement.get("user_namespace") else ""
    uid = f", as uid {confinement['uid']}" if isinstance(confinement.get("uid"), int) else ""
    return Check("sandbox confinement", True,
                 f"capabilities dropped, no_new_privs, own pid namespace{userns}{uid}")


def _limit_checks(policy: Policy, caps: Mapping[str, Any]) -> list[Check]:
    """The policy's default limits apply to every flight: each one's controller must be
    here. (A limit only a flight asks for is checked when that flight comes.)"""
    defaults, _ = limit_rules.policy_limits(policy.to_dict())
    if not defaults:
        return []
    missing = limit_rules.missing_controller(defaults, caps.get("flight_limits"))
    return [_check("resource limits", missing is None,
                   f"{defaults.text()} enforced by cgroups", missing or "")]


def workers_note(policy: Policy, started_workers: int) -> str | None:
    """Raising workers past what the runner started with takes a restart; lowering does not."""
    if policy.workers > started_workers:
        return (f"workers raised to {policy.workers} needs a restart "
                f"(started with {started_workers})")
    return None


def effective_workers(policy: Policy, started_workers: int) -> int:
    """Slots the runner can fill right now: a lowered policy applies at once."""
    return max(0, min(policy.workers, started_workers))


def _as_policy(policy: PolicyLike) -> Policy:
    return policy if isinstance(policy, Policy) else Policy.from_dict(policy)


def checks(policy: PolicyLike, capabilities: Mapping[str, Any] | None, *, dev: bool,
           started_workers: int) -> list[Check]:
    """Every check that decides this runner's health, in the order they are judged."""
    policy = _as_policy(policy)
    caps = capabilities or {}
    out = _policy_checks(policy, dev) + _host_checks(policy, caps) + _limit_checks(policy, caps)
    note = workers_note(policy, started_workers)
    out.append(Check("workers", True,
                     note or f"{effective_workers(policy, started_workers)} of "
                             f"{started_workers} started"))
    return out


def judge_health(policy: PolicyLike, capabilities: Mapping[str, Any] | None, *, dev: bool,
                 started_workers: int) -> Health:
    policy = _as_policy(policy)
    listed = checks(policy, capabilities, dev=dev, started_workers=started_workers)
    failed = next((c for c in listed if not c.passed), None)
    note = workers_note(policy, started_workers)
    notes = (note,) if note else ()
    if failed is None:
        return Health(ok=True, notes=notes)
    return Health(ok=False, missing=failed.detail, notes=notes)


def first_missing(policy: PolicyLike, capabilities: Mapping[str, Any] | None) -> str | None:
    """What the runner itself cannot enforce (the dev rule is the server's business)."""
    policy = _as_policy(policy)
    return judge_health(policy, capabilities, dev=True, started_workers=policy.workers).missing


def checks_verdict(listed: Sequence[Check], reported_at: float | None, now: float,
                   stale_after: float, *, policy_changed: bool = False) -> str:
    """One phrase for the checks column.

    Precedence: never run (no report) > stale (the report is older than ``stale_after``, so
    nothing it says can be trusted) > pending (the policy changed since the report and the
    last report does not meet it; the next check-in will judge it) > N checks failed > checks
    passed. A changed policy that the last report already meets reads ``checks passed``: the
    listing under it shows every check ✓, and a verdict must not say otherwise.
    """
    if reported_at is None:
        return CHECKS_NEVER_RUN
    if now - reported_at > stale_after:
        return CHECKS_STALE
    failed = sum(1 for c in listed if not c.passed)
    if policy_changed and failed:
        return CHECKS_PENDING
    if failed:
        return f"{failed} check{'s' if failed != 1 else ''} failed"
    return CHECKS_PASSED
