"""Repository slugs and the destination rule: pure functions, no git needed."""

from __future__ import annotations

import pytest

from gg.domain.repos import destination_allowed, is_local_slug, redact_url_credentials, repo_slug


@pytest.mark.parametrize(
    ("spelling", "slug"),
    [
        ("https://github.com/acme/widgets.git", "github.com/acme/widgets"),
        ("https://github.com/acme/widgets", "github.com/acme/widgets"),
        ("https://github.com/acme/widgets/", "github.com/acme/widgets"),
        ("https://GitHub.COM/acme/widgets.git", "github.com/acme/widgets"),
        ("https://github.com:443/acme/widgets.git", "github.com/acme/widgets"),
        ("https://robot:hunter2@github.com/acme/widgets.git", "github.com/acme/widgets"),
        ("https://github.com//acme//widgets.git?x=1#frag", "github.com/acme/widgets"),
        ("http://127.0.0.1:8123/acme/widgets.git", "127.0.0.1:8123/acme/widgets"),
        ("http://localhost:80/acme/widgets", "localhost/acme/widgets"),
        ("https://git.example.com:8443/group/sub/proj.git", "git.example.com:8443/group/sub/proj"),
        ("http://[::1]:8123/acme/widgets.git", "[::1]:8123/acme/widgets"),
        ("ssh://git@github.com/acme/widgets.git", "github.com/acme/widgets"),
        ("ssh://git@github.com:22/acme/widgets", "github.com/acme/widgets"),
        ("ssh://git@github.com:2222/acme/widgets", "github.com:2222/acme/widgets"),
        ("git@github.com:acme/widgets.git", "github.com/acme/widgets"),
        ("github.com:acme/widgets.git", "github.com/acme/widgets"),
        ("git://example.org/acme/widgets.git", "example.org/acme/widgets"),
        ("github.com/acme/widgets", "github.com/acme/widgets"),
        ("github.com/acme/widgets.git", "github.com/acme/widgets"),
        ("127.0.0.1:8123/acme/widgets", "127.0.0.1:8123/acme/widgets"),
        ("GitHub.com/Acme/Widgets", "github.com/Acme/Widgets"),
        ("/srv/git/widgets.git", "/srv/git/widgets"),
        ("/srv/git//widgets.git/", "/srv/git/widgets"),
        ("file:///srv/git/widgets.git", "/srv/git/widgets"),
        ("file://localhost/srv/git/widgets.git", "/srv/git/widgets"),
        ("  https://github.com/acme/widgets.git  ", "github.com/acme/widgets"),
    ],
)
def test_repo_slug_normalises_every_spelling_to_one_name(spelling: str, slug: str) -> None:
    assert repo_slug(spelling) == slug


@pytest.mark.parametrize(
    "slug",
    ["github.com/acme/widgets", "127.0.0.1:8123/acme/widgets", "[::1]:8123/a/b", "/srv/git/w"],
)
def test_repo_slug_of_a_slug_is_the_slug(slug: str) -> None:
    assert repo_slug(slug) == slug
    assert repo_slug(repo_slug(slug)) == slug


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "   ",
        "acme/widgets",  # no host
        "widgets",
        "./widgets.git",
        "../widgets.git",
        "~/widgets.git",
        "https://github.com",
        "https://github.com/",
        "https://github.com/acme/../evil",
        "https://github.com/acme/%2e%2e/evil",
        "github.com/acme/./widgets",
        "ftp://example.org/acme/widgets",
        "ext::sh -c evil",
        "https://github.com:99999/acme/widgets",
        "https://github.com/acme/wid gets",
        "/",
        "file://",
    ],
)
def test_repo_slug_refuses_what_is_not_a_repository(bad: str) -> None:
    with pytest.raises(ValueError):
        repo_slug(bad)


def test_repo_slug_error_never_repeats_a_password_in_the_input() -> None:
    with pytest.raises(ValueError) as info:
        repo_slug("https://robot:hunter2@github.com:notaport/acme/widgets")
    assert "hunter2" not in str(info.value)


def test_local_slugs_can_never_equal_host_slugs() -> None:
    assert is_local_slug(repo_slug("/srv/git/widgets.git"))
    assert not is_local_slug(repo_slug("https://github.com/acme/widgets"))


ALLOWED = ["github.com/acme/widgets", "https://git.example.com:8443/ops/deploy.git",
           "/srv/git/mirror.git"]


@pytest.mark.parametrize(
    ("dest", "allowed"),
    [
        ("https://github.com/acme/widgets.git", True),
        ("git@github.com:acme/widgets.git", True),  # scheme does not matter
        ("ssh://git@github.com/acme/widgets", True),
        ("https://robot:pw@github.com/acme/widgets", True),  # user dropped before comparing
        ("git.example.com:8443/ops/deploy", True),
        ("/srv/git/mirror", True),
        ("file:///srv/git/mirror.git", True),
        ("https://github.com/acme/widgets-fork", False),  # no prefixes
        ("https://github.com/acme/widgets/sub", False),
        ("https://github.com/acme", False),
        ("https://github.com/Acme/widgets", False),  # path case is kept
        ("https://git.example.com/ops/deploy", False),  # port matters
        ("https://github.com.evil.org/acme/widgets", False),
        ("https://github.com/acme/widgets/../../evil/widgets", False),
        ("/srv/git/mirror/../other", False),
        ("/srv/git/other", False),
        ("not a url", False),
        ("", False),
    ],
)
def test_destination_allowed_is_an_exact_match_after_normalising(dest: str, allowed: bool) -> None:
    assert destination_allowed(dest, ALLOWED) is allowed


def test_destination_allowed_with_an_empty_list_allows_nothing() -> None:
    assert destination_allowed("github.com/acme/widgets", []) is False


def test_destination_allowed_ignores_list_entries_that_are_not_repositories() -> None:
    assert destination_allowed("github.com/acme/widgets", ["", "*", "github.com/acme/widgets"])
    assert not destination_allowed("github.com/acme/widgets", ["*", "github.com/*"])


def test_redact_url_credentials_hides_user_and_password_of_every_url() -> None:
    text = ("fatal: unable to access 'https://robot:hunter2@github.com/acme/w.git/' and "
            "http://tok@127.0.0.1:8123/x but not git@github.com:acme/w")
    redacted = redact_url_credentials(text)
    assert "hunter2" not in redacted and "robot" not in redacted and "tok@" not in redacted
    assert "https://***@github.com/acme/w.git/" in redacted
    assert "http://***@127.0.0.1:8123/x" in redacted
