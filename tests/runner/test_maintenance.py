"""The maintenance check: agent present, credentials held, repository hosts reachable."""

from __future__ import annotations

import socket

from gg.domain.enrolment import refs_digest
from gg.domain.profiles import Profile
from gg.runner.credentials import CredentialStore
from gg.runner.maintenance import check, host_port, store_digest


def profile(**kw) -> dict:
    return Profile(name="ui", purpose="p", roles=("runner",), environment="ui", **kw).to_dict()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_every_item_the_profile_needs_is_checked(tmp_path):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    open_port, shut_port = listener.getsockname()[1], closed_port()
    CredentialStore(tmp_path).add(name="npm", secret="t0ken")
    try:
        report = check(profile(agent="codex", credentials=("npm", "git.example.com/a/b"),
                               repository_hosts=(f"127.0.0.1:{open_port}",
                                                 f"127.0.0.1:{shut_port}")),
                       tmp_path, connect_timeout=2.0)
    finally:
        listener.close()
    found = {i["item"]: (i["ok"], i["detail"]) for i in report["items"]}
    assert found["agent:codex"] == (False, "agent codex is not configured in agents.toml")
    assert found["credential:npm"][0] is True
    assert found["credential:git.example.com/a/b"] == (
        False, "no credential git.example.com/a/b in this runner's store")
    assert found[f"host:127.0.0.1:{open_port}"][0] is True
    assert found[f"host:127.0.0.1:{shut_port}"][0] is False
    assert "t0ken" not in str(report)


def test_the_report_names_the_store_it_was_checked_against(tmp_path):
    assert check(profile(), tmp_path)["credentials_digest"] == refs_digest([])
    ref = CredentialStore(tmp_path).add(name="npm", secret="t0ken")
    assert store_digest(tmp_path) == refs_digest([ref.as_dict()])
    assert check(profile(), tmp_path)["items"] == [
        {"item": "agent:shell", "ok": True, "detail": "agent shell: no sign-in check defined"}]


def test_hosts_without_a_port_are_checked_on_443():
    assert host_port("git.example.com") == ("git.example.com", 443)
    assert host_port("git.example.com:2222") == ("git.example.com", 2222)
    assert host_port("[::1]:22") == ("::1", 22)
    assert host_port("[::1]") == ("::1", 443)
