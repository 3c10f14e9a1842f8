"""What an enrolled machine checks about itself every MAINTENANCE_CHECK_INTERVAL (SPEC 10).

The items come from ``gg.domain.enrolment.expected_items`` — the very list the control plane
gates on — so the two can never disagree about what "missing" means:

    agent:NAME          the agent is configured here and its program found; when the agent
                        defines a ``check`` (signed in?), that passes too
    credential:REF      the credential store holds it (repository slug or name)
    host:HOST[:PORT]    a TCP connection to it opens within a few seconds (port 443 when the
                        profile names no port)

A report is a list of ``{item, ok, detail}``; it never carries a secret (a credential item
says only whether the store holds the reference).
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

from gg.domain.enrolment import expected_items, refs_digest
from gg.domain.profiles import Profile
from gg.runner import agents as agent_config
from gg.runner.credentials import CredentialError, CredentialStore

__all__ = ["check", "host_port", "store_digest"]

CONNECT_TIMEOUT = 3.0
DEFAULT_PORT = 443


def check(profile: dict, state_dir: Path, *, connect_timeout: float = CONNECT_TIMEOUT) -> dict:
    """Check every item ``profile`` (the profile in force, as a dict) needs."""
    items = []
    digest = store_digest(state_dir)  # read before the items: a later add makes it stale
    for item in expected_items(Profile.from_dict(profile)):
        kind, _, what = item.partition(":")
        if kind == "agent":
            ok, detail = _agent(what, state_dir)
        elif kind == "credential":
            ok, detail = _credential(what, state_dir)
        else:
            ok, detail = _host(what, connect_timeout)
        items.append({"item": item, "ok": ok, "detail": detail})
    report: dict = {"checked_at": time.time(), "items": items}
    if digest is not None:
        report["credentials_digest"] = digest
    return report


def store_digest(state_dir: Path) -> str | None:
    """``refs_digest`` of what the credential store holds now (None if it cannot be read)."""
    try:
        return refs_digest(r.as_dict() for r in CredentialStore(state_dir).refs())
    except CredentialError:
        return None


def _agent(name: str, state_dir: Path) -> tuple[bool, str]:
    try:
        known = agent_config.load_agents(state_dir)
    except agent_config.AgentError as exc:
        return False, str(exc)[:300]
    agent = known.get(name)
    if agent is None:
        return False, f"agent {name} is not configured in {agent_config.AGENTS_FILE}"
    if not agent_config.present(agent):
        return False, f"agent {name}'s program {agent.command[0]} was not found"
    ok, detail = agent_config.signed_in(agent)
    return ok, f"agent {name}: {detail}"


def _credential(ref: str, state_dir: Path) -> tuple[bool, str]:
    store = CredentialStore(state_dir)
    try:
        secret = store.get_for_repo(ref) if "/" in ref else store.get(ref)
    except CredentialError as exc:
        return False, str(exc)[:300]
    if secret is None:
        return False, f"no credential {ref} in this runner's store"
    return True, f"held ({secret.fingerprint})"


def host_port(host: str) -> tuple[str, int]:
    """``host``, ``host:port`` or ``[v6]:port`` as a (host, port) pair."""
    if host.startswith("["):
        name, _, rest = host[1:].partition("]")
        return name, int(rest[1:]) if rest.startswith(":") else DEFAULT_PORT
    if host.count(":") == 1:
        name, port = host.split(":")
        return name, int(port)
    return host, DEFAULT_PORT


def _host(host: str, timeout: float) -> tuple[bool, str]:
    name, port = host_port(host)
    try:
        with socket.create_connection((name, port), timeout=timeout):
            return True, f"{name}:{port} answered"
    except OSError as exc:
        return False, f"cannot connect to {name}:{port} ({exc.strerror or type(exc).__name__})"
