"""Fitness: a runner is offered only flights it could ever do."""

from __future__ import annotations

import pytest

from gg.domain.fitness import credential_missing_for, credential_needed, repo_problem, unfit
from gg.domain.flights import Flight
from gg.domain.matching import Block, blockers, seat
from gg.domain.profiles import Profile
from gg.domain.runners import Runner

PROFILE = Profile(name="ui", purpose="p", roles=("runner",), environment="ui",
                  repository_hosts=("git.example.com",)).to_dict()
REF = {"kind": "repo", "ref": "git.example.com/acme/ui", "fingerprint": "sha256:" + "a" * 16}


def flight(**kw) -> Flight:
    return Flight(id="f_1", command=["true"], opened_by="p_1", opened_at=0.0, **kw)


def enrolled(**kw) -> Runner:
    values = dict(id="r_1", name="m1", kind="enrolled", profile="ui", profile_in_force=PROFILE,
                  labels={"environment": "ui"}, credential_refs=[REF])
    values.update(kw)
    return Runner(**values)


def test_a_fit_runner_has_no_reason_and_no_blocker():
    runner = enrolled(last_seen_at=0.0)
    work = flight(repo="https://git.example.com/acme/ui.git")
    assert unfit(work, runner) is None
    assert Block.UNFIT not in blockers(work, seat(runner, 1.0, 45.0, 0))


@pytest.mark.parametrize("runner, work, reason", [
    (enrolled(), flight(kind="maintenance"), "a maintenance flight is never flown"),
    (enrolled(profile_in_force={}), flight(), "its fleet profile ui is not in force"),
    (enrolled(profile_in_force={**PROFILE, "roles": ["maintain"]}), flight(),
     "its fleet profile ui does not give it the runner role"),
    (enrolled(), flight(agent="codex"), "its fleet profile ui runs agent shell, not codex"),
    (enrolled(), flight(repo="https://elsewhere.example.com/a/b"),
     "its fleet profile ui does not list repository host elsewhere.example.com"),
    (enrolled(), flight(repo="https://git.example.com:8443/acme/ui"),
     "its fleet profile ui does not list repository host git.example.com:8443"),
    (enrolled(credential_refs=[]), flight(repo="git@git.example.com:acme/ui.git"),
     "it holds no credential for repository git.example.com/acme/ui"),
    (Runner(id="r_2", name="plain"), flight(agent="codex"), "it does not have agent codex"),
])
def test_what_makes_a_runner_unfit(runner, work, reason):
    assert unfit(work, runner).startswith(reason)
    assert Block.UNFIT in blockers(work, seat(runner, 0.0, 45.0, 0))


def test_a_registered_runner_clones_from_any_host_it_holds_a_credential_for():
    plain = Runner(id="r_2", name="plain", credential_refs=[REF], agents=["shell", "codex"])
    assert unfit(flight(repo="https://git.example.com/acme/ui", agent="codex"), plain) is None


def test_only_a_network_repository_needs_a_credential():
    assert credential_needed("https://GIT.example.com/acme/ui.git") == "git.example.com/acme/ui"
    assert credential_needed("/srv/git/ui.git") is None
    assert credential_needed("file:///srv/git/ui.git") is None
    assert credential_needed(None) is None
    assert unfit(flight(repo="/srv/git/ui.git"), enrolled(credential_refs=[])) is None


def test_the_missing_credential_is_named_only_when_no_live_runner_holds_it():
    url = "https://git.example.com/acme/ui"
    assert credential_missing_for(url, []) == "git.example.com/acme/ui"
    assert credential_missing_for(url, [enrolled()]) is None
    assert credential_missing_for(url, [enrolled(retired_at=5.0)]) == "git.example.com/acme/ui"
    assert credential_missing_for("/srv/git/ui", []) is None


@pytest.mark.parametrize("url", ["https://bot:hunter2@git.example.com/a/b",
                                 "https://bot@git.example.com/a/b",
                                 "ssh://git:hunter2@git.example.com/a/b"])
def test_a_repository_url_carrying_a_secret_is_refused_without_repeating_it(url):
    problem = repo_problem(url)
    assert problem and "hunter2" not in problem


@pytest.mark.parametrize("url", ["git@github.com:acme/widgets.git", "/srv/git/a.git",
                                 "https://github.com/acme/widgets", "ssh://git@host.example/a/b"])
def test_ordinary_repository_urls_are_accepted(url):
    assert repo_problem(url) is None
