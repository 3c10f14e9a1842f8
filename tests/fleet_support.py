"""Helpers the enrolment tests share: a profile and an airspace on disk (keys: support.py)."""

from __future__ import annotations

from pathlib import Path

UI = {"purpose": "builds the web UI", "roles": ["runner"], "environment": "ui",
      "repository-hosts": ["git.example.com"], "policy": {"isolation": "sandbox",
                                                          "workers": 2}}


# A capability report of a host that can run the sandbox (what gg.runner.capabilities.probe
# reports where bubblewrap works), for use-case tests of profiles that ask for isolation.
# What the probe reads inside a sandbox that holds (gg.runner.capabilities).
CONFINED = {"layout": "allowlist", "capabilities": "dropped", "no_new_privs": True,
            "user_namespace": True, "pid_namespace": True}
SANDBOX_CAPABILITIES = {"bwrap": "/usr/bin/bwrap", "bwrap_usable": True, "bwrap_error": None,
                        "confinement": CONFINED,
                        "netns": True, "container_engine": None, "tools": ["bwrap", "git"],
                        "isolation_levels": ["none", "sandbox"], "egress_controls": ["all", "none"]}


def write_profile(airspace: Path, name: str, text: str) -> Path:
    path = airspace / "fleet" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def profile_yaml(environment: str = "ui", *, hosts: list[str] = (), destinations: list[str] = (),
                 credentials: list[str] = (), agent: str = "shell") -> str:
    """A profile a --dev control plane accepts (isolation none: the runner needs no sandbox)."""
    def flow(items):
        return "[" + ", ".join(f'"{i}"' for i in items) + "]"
    return (f"purpose: tests {environment}\nroles: [runner]\nenvironment: {environment}\n"
            f"agent: {agent}\nrepository-hosts: {flow(hosts)}\n"
            f"destinations: {flow(destinations)}\ncredentials: {flow(credentials)}\n"
            "policy:\n  isolation: none\n  egress: all\n  workers: 1\n")


def apply_and_clear(fleet, airspace: Path, name: str, text: str) -> dict:
    """``gg fleet apply`` a profile and clear its gate as the owner; returns the apply answer."""
    import json

    write_profile(airspace, name, text)
    done = fleet.gg("fleet", "apply", name, "--airspace", str(airspace), "--json")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    if answer.get("gate"):
        cleared = fleet.gg("gate", "clear", answer["gate"]["id"])
        assert cleared.returncode == 0, cleared.stderr
    return answer


def mint(fleet, profile: str, *args: str) -> str:
    import json

    done = fleet.gg("fleet", "enroll", profile, "--json", *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["token"]
