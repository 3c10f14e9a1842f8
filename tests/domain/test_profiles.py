"""Profile value rules and the stored shape of a profile."""

from __future__ import annotations

import json

import pytest

from gg.domain.policy import Policy
from gg.domain.profiles import (
    Profile,
    agent_problem,
    credential_problem,
    destination_problem,
    host_problem,
    item_key,
    name_problem,
)


def test_a_profile_round_trips_through_json_with_underscored_keys():
    profile = Profile(name="ui", purpose="p", roles=("runner", "maintain"), environment="ui",
                      repository_hosts=("git.example.com:2222",), destinations=("/srv/git/ui",),
                      trackers=("t",), credentials=("npm-token",), sweeps=True, ownership="open",
                      policy=Policy(isolation="container", egress="none", workers=3))
    data = json.loads(json.dumps(profile.to_dict()))
    assert "repository_hosts" in data and data["policy"]["workers"] == 3
    assert Profile.from_dict(data) == profile


def test_from_dict_fills_defaults_for_rows_written_before_a_field_existed():
    profile = Profile.from_dict({"name": "ui", "purpose": "p", "roles": ["runner"],
                                 "environment": "ui"})
    assert profile.agent == "shell" and profile.policy == Policy()
    assert profile.ownership == "organisation" and profile.sweeps is False


@pytest.mark.parametrize("name,ok", [("ui", True), ("ui-2_x", True), ("a" * 63, True),
                                     ("a" * 64, False), ("UI", False), ("2ui", False), ("", False)])
def test_names_are_short_lowercase_and_start_with_a_letter(name, ok):
    assert (name_problem(name) is None) is ok


def test_an_agent_is_a_name_never_a_path():
    assert agent_problem("claude-code") is None
    assert "not a path" in agent_problem("/usr/bin/claude")


@pytest.mark.parametrize("host,ok", [
    ("git.example.com", True), ("git.example.com:2222", True), ("localhost", True),
    ("10.0.0.1:22", True), ("[::1]:22", True), ("[::1]", True),
    ("git .example.com", False), ("-bad.com", False), ("host:0", False), ("host:99999", False),
    ("::1", False), ("[nothex]:22", False), ("https://git.example.com", False),
])
def test_repository_hosts_are_host_names_with_an_optional_port(host, ok):
    assert (host_problem(host) is None) is ok


def test_destinations_are_remote_urls_or_absolute_paths_and_never_carry_a_password():
    assert destination_problem("https://git.example.com/acme/ui.git") is None
    assert destination_problem("git@git.example.com:acme/ui.git") is None
    assert destination_problem("/srv/git/ui.git") is None
    assert destination_problem("relative/path") is not None
    problem = destination_problem("https://bob:hunter2@git.example.com/acme/ui.git")
    assert "password" in problem and "hunter2" not in problem


def test_credentials_are_names_or_repositories():
    assert credential_problem("npm-token") is None
    assert credential_problem("git.example.com/acme/ui") is None
    assert credential_problem("has space") is not None


def test_item_keys_make_respellings_one_item():
    assert item_key("repository-hosts", "GIT.Example.com") == "git.example.com"
    assert item_key("destinations", "https://git.example.com/acme/ui.git") == \
        item_key("destinations", "git@git.example.com:acme/ui")
    assert item_key("credentials", "npm-token") == "npm-token"
