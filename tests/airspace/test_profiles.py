"""Fleet profile files: every field, its defaults, and errors naming file, line and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from gg.airspace import AirspaceError, load_profile, profile_from_mapping
from gg.airspace.profiles import read_profile
from gg.airspace.yamlfile import read_yaml
from gg.domain.policy import Policy
from gg.domain.profiles import Profile

FULL = """\
purpose: builds and tests the web UI
roles: [runner, maintain]
environment: ui
agent: claude
repository-hosts: [Git.Example.com, "git.example.com:2222"]
destinations:
  - https://git.example.com/acme/ui.git
  - /srv/git/site.git
trackers: ["jira:UI"]
credentials: [git.example.com/acme/ui, npm-token]
sweeps: true
ownership: open
policy:
  isolation: container
  egress: none
  workers: 4
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / "airspace" / "fleet" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def error_of(tmp_path: Path, text: str, name: str = "ui") -> AirspaceError:
    with pytest.raises(AirspaceError) as caught:
        load_profile(write(tmp_path, name, text))
    return caught.value


def test_a_full_profile_loads_every_field(tmp_path):
    profile = load_profile(write(tmp_path, "ui", FULL))
    assert profile == Profile(
        name="ui", purpose="builds and tests the web UI", roles=("runner", "maintain"),
        environment="ui", agent="claude",
        repository_hosts=("git.example.com", "git.example.com:2222"),
        destinations=("https://git.example.com/acme/ui.git", "/srv/git/site.git"),
        trackers=("jira:UI",), credentials=("git.example.com/acme/ui", "npm-token"),
        sweeps=True, ownership="open",
        policy=Policy(isolation="container", egress="none", workers=4))


def test_a_minimal_profile_takes_the_documented_defaults(tmp_path):
    profile = load_profile(write(tmp_path, "ui", "purpose: p\nroles: [runner]\nenvironment: ui\n"))
    assert profile.agent == "shell"
    assert profile.repository_hosts == profile.destinations == profile.trackers == ()
    assert profile.credentials == () and profile.sweeps is False
    assert profile.ownership == "organisation"
    assert profile.policy == Policy(isolation="sandbox", egress="all", workers=1)


def test_an_unknown_key_is_refused_naming_file_line_and_key(tmp_path):
    error = error_of(tmp_path, "purpose: p\nroles: [runner]\nenvironment: ui\n"
                               "policy:\n  isolation: sandbox\n  wrokers: 2\n")
    assert (error.file, error.line, error.key) == (str(tmp_path / "airspace/fleet/ui.yaml"), 6,
                                                   "policy.wrokers")
    assert str(error).endswith("ui.yaml:6: policy.wrokers: is not a known key (did you mean workers?)")


def test_an_unknown_top_level_key_lists_the_known_ones_when_nothing_is_close(tmp_path):
    error = error_of(tmp_path, "purpose: p\nroles: [runner]\nenvironment: ui\nzzz: 1\n")
    assert error.line == 4 and error.key == "zzz" and "known keys are purpose, roles" in str(error)


def test_a_bad_enum_value_reads_like_the_spec_example(tmp_path):
    text = "purpose: p\nroles: [runner]\nenvironment: ui\nsweeps: false\nagent: shell\n" \
           "ownership: organisation\npolicy: {isolation: sandbx}\n"
    error = error_of(tmp_path, text)
    assert str(error).endswith(
        'airspace/fleet/ui.yaml:7: policy.isolation: must be one of none, sandbox, container, gvisor '
        '(got "sandbx")')


@pytest.mark.parametrize("line,expected", [
    ("sweeps: maybe", 'sweeps: must be true or false (got "maybe")'),
    ("policy: {workers: four}", 'policy.workers: must be a whole number (got "four")'),
    ("policy: {workers: true}", "policy.workers: must be a whole number (got true)"),
    ("policy: {workers: 0}", "policy.workers: must be from 1 to 256 (got 0)"),
    ("policy: {workers: 257}", "policy.workers: must be from 1 to 256 (got 257)"),
    ("policy: sandbox", 'policy: must be a mapping of keys to values (got "sandbox")'),
    ("trackers: jira", 'trackers: must be a list (got "jira")'),
    ("agent: 7", "agent: must be text (got 7)"),
    ("egress: all", "egress: is not a known key here (it belongs under policy)"),
    ("image: ci:1", "image: is not a known key here (it belongs under policy)"),
    ("policy: {image: 'Not An Image'}", "policy.image: must be an image reference like "
                                        "registry.example.com/ci/python:3.12, not 'Not An Image'"),
])
def test_wrong_types_are_refused_on_their_line(tmp_path, line, expected):
    error = error_of(tmp_path, f"purpose: p\nroles: [runner]\nenvironment: ui\n{line}\n")
    assert error.line == 4
    assert str(error).endswith(f"ui.yaml:4: {expected}")


@pytest.mark.parametrize("text,key,fragment", [
    ("roles: []", "roles", "at least one"),
    ("roles: [runner, sweeper]", "roles[1]", "must be one of runner, maintain"),
    ("roles: [runner, runner]", "roles[1]", 'repeats "runner" (already roles[0])'),
    ("environment: UI", "environment", "lowercase"),
    ("agent: /usr/bin/claude", "agent", "not a path"),
    ("repository-hosts: [git.example.com, GIT.example.com]", "repository-hosts[1]", "repeats"),
    ("repository-hosts: ['bad host']", "repository-hosts[0]", "not a host name"),
    ("destinations: [relative/dir]", "destinations[0]", "absolute path"),
    ("credentials: ['has space']", "credentials[0]", "credential name"),
    ("ownership: mine", "ownership", "must be one of organisation, open, claimed"),
    ("policy: {egress: some}", "policy.egress", "must be one of none, allowlist, all"),
])
def test_bad_values_are_refused_with_their_key(tmp_path, text, key, fragment):
    lines = {"purpose": "purpose: p", "roles": "roles: [runner]", "environment": "environment: ui"}
    lines[text.split(":")[0]] = text  # replaces a required line, or adds one
    error = error_of(tmp_path, "\n".join(lines.values()) + "\n")
    assert error.key == key and fragment in error.problem


def test_missing_required_keys_are_each_named(tmp_path):
    path = write(tmp_path, "ui", "agent: shell\n")
    errors = read_profile(read_yaml(path), "ui").errors
    assert [(e.key, e.problem) for e in errors] == [
        ("purpose", "is required"), ("roles", "is required"), ("environment", "is required")]


def test_an_empty_file_says_what_a_profile_needs(tmp_path):
    assert "purpose, roles and environment" in str(error_of(tmp_path, ""))


def test_the_file_stem_is_the_profile_name_and_must_be_a_name(tmp_path):
    error = error_of(tmp_path, "purpose: p\nroles: [runner]\nenvironment: ui\n", name="Bad Name")
    assert error.line is None and "profile name" in str(error)


def test_a_duplicate_key_in_a_profile_is_refused(tmp_path):
    error = error_of(tmp_path, "purpose: p\nroles: [runner]\nenvironment: ui\nenvironment: api\n")
    assert (error.line, error.key) == (4, "environment") and "twice" in error.problem


def test_malformed_yaml_in_a_profile_names_the_file_and_line(tmp_path):
    error = error_of(tmp_path, "purpose: p\nroles: [runner\n")
    assert error.line == 3 and "malformed YAML" in str(error) and str(error).startswith(
        str(tmp_path / "airspace/fleet/ui.yaml"))


def test_a_posted_mapping_is_validated_with_the_same_rules_and_no_line():
    profile = profile_from_mapping("ui", {"purpose": "p", "roles": ["runner"],
                                          "environment": "ui"})
    assert profile.policy.isolation == "sandbox"
    with pytest.raises(AirspaceError) as caught:
        profile_from_mapping("ui", {"purpose": "p", "roles": ["runner"], "environment": "ui",
                                    "policy": {"isolation": "sandbx"}})
    assert caught.value.line is None
    assert str(caught.value) == ('<request>: policy.isolation: must be one of none, sandbox, '
                                 'container, gvisor (got "sandbx")')


def test_a_posted_mapping_that_is_not_a_mapping_is_refused():
    with pytest.raises(AirspaceError, match="must be a mapping"):
        profile_from_mapping("ui", ["purpose"])
