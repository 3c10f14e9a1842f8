"""The runner's credential store and its git credential helper, on real files and processes."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import sys
import threading
from datetime import datetime, timezone
from pathlib import Path

import pytest

from gg.runner.credentials import (
    BARE_TOKEN_USERNAME,
    CredentialError,
    CredentialRef,
    CredentialStore,
    Secret,
)
from gg.runner.git import git_environment

SECRET = "robot:pw-5f1c9a7e3b2d4c6e8a0b"  # long and unusual, so a match is never an accident
PASSWORD = SECRET.split(":", 1)[1]
REPO_URL = "https://github.com/acme/widgets.git"
SLUG = "github.com/acme/widgets"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def fixed_clock() -> datetime:
    return datetime(2025, 3, 1, 12, 0, 0, 123456, tzinfo=timezone.utc)


@pytest.fixture
def store(tmp_path: Path) -> CredentialStore:
    return CredentialStore(tmp_path / "state", clock=fixed_clock)


def test_a_repository_secret_comes_back_for_any_spelling_of_the_repository(store) -> None:
    ref = store.add(repo=REPO_URL, secret=SECRET)
    assert ref.kind == "repo" and ref.ref == SLUG
    for spelling in (SLUG, REPO_URL, "git@github.com:acme/widgets.git"):
        assert store.get_for_repo(spelling).reveal() == SECRET
    assert store.get_for_repo("github.com/acme/other") is None


def test_a_named_secret_comes_back_by_its_name_only(store) -> None:
    store.add(name="tracker-token", secret="tok_abcdef0123456789")
    assert store.get("tracker-token").reveal() == "tok_abcdef0123456789"
    assert store.get("other") is None
    assert store.get_for_repo(SLUG) is None


def test_the_ref_holds_kind_slug_fingerprint_and_time_but_never_the_secret(store) -> None:
    ref = store.add(repo=REPO_URL, secret=SECRET)
    expected = "sha256:" + hashlib.sha256(SECRET.encode()).hexdigest()[:16]
    assert ref == CredentialRef("repo", SLUG, expected,
                                datetime(2025, 3, 1, 12, 0, 0, tzinfo=timezone.utc))
    assert ref.as_dict() == {"kind": "repo", "ref": SLUG, "fingerprint": expected,
                             "added_at": "2025-03-01T12:00:00Z"}
    assert store.refs() == [ref]
    for text in (repr(ref), str(ref.as_dict()), repr(store.refs()), repr(store)):
        assert PASSWORD not in text


def test_refs_list_every_credential_sorted_by_kind_then_ref(store) -> None:
    store.add(repo="https://github.com/acme/zeta", secret="t1")
    store.add(name="b-name", secret="t2")
    store.add(repo="https://github.com/acme/alpha", secret="t3")
    store.add(name="a-name", secret="t4")
    assert [(r.kind, r.ref) for r in store.refs()] == [
        ("name", "a-name"), ("name", "b-name"),
        ("repo", "github.com/acme/alpha"), ("repo", "github.com/acme/zeta")]


def test_a_fresh_store_lists_nothing_and_makes_no_files(tmp_path: Path) -> None:
    store = CredentialStore(tmp_path / "state")
    assert store.refs() == []
    assert store.get_for_repo(SLUG) is None
    assert not (tmp_path / "state").exists()


def test_key_and_entries_are_private_to_the_runner(store, tmp_path: Path) -> None:
    store.add(repo=REPO_URL, secret=SECRET)
    state = tmp_path / "state"
    assert mode(state / "credential.key") == 0o600
    assert mode(state / "credentials") == 0o700
    entries = list((state / "credentials").iterdir())
    assert len(entries) == 1 and mode(entries[0]) == 0o600


def test_files_stay_private_under_a_permissive_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        CredentialStore(tmp_path / "state").add(repo=REPO_URL, secret=SECRET)
    finally:
        os.umask(old)
    state = tmp_path / "state"
    assert mode(state) == 0o700
    assert mode(state / "credential.key") == 0o600
    assert mode(state / "credentials") == 0o700
    assert all(mode(p) == 0o600 for p in (state / "credentials").iterdir())


def test_nothing_on_disk_contains_the_secret(store, tmp_path: Path) -> None:
    store.add(repo=REPO_URL, secret=SECRET)
    store.add(name="bare", secret="ghp_0123456789abcdefXYZ")
    for path in (tmp_path / "state").rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            for needle in (SECRET, PASSWORD, "ghp_0123456789abcdefXYZ"):
                assert needle.encode() not in data, f"{needle!r} in {path}"


def test_adding_again_replaces_the_secret(store) -> None:
    first = store.add(repo=REPO_URL, secret=SECRET)
    second = store.add(repo=SLUG, secret="robot:another-password-1")
    assert first.fingerprint != second.fingerprint
    assert store.get_for_repo(SLUG).reveal() == "robot:another-password-1"
    assert len(store.refs()) == 1


def test_remove_forgets_one_credential_and_says_whether_there_was_one(store) -> None:
    store.add(repo=REPO_URL, secret=SECRET)
    store.add(name="keep", secret="t")
    assert store.remove(repo=SLUG) is True
    assert store.remove(repo=SLUG) is False
    assert store.get_for_repo(SLUG) is None
    assert [r.ref for r in store.refs()] == ["keep"]


def test_two_stores_on_one_state_dir_share_one_key(tmp_path: Path) -> None:
    stores = [CredentialStore(tmp_path / "state") for _ in range(8)]
    barrier = threading.Barrier(len(stores))
    errors: list[BaseException] = []

    def add(i: int) -> None:
        try:
            barrier.wait(timeout=10)
            stores[i].add(name=f"n{i}", secret=f"secret-{i}")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=add, args=(i,)) for i in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert errors == []
    reader = CredentialStore(tmp_path / "state")
    assert [reader.get(f"n{i}").reveal() for i in range(8)] == [f"secret-{i}" for i in range(8)]


def test_a_secret_never_shows_itself_in_repr_str_or_format() -> None:
    secret = Secret(SECRET)
    for text in (repr(secret), str(secret), f"{secret}", "%s" % secret, repr([secret])):
        assert PASSWORD not in text
        assert secret.fingerprint in text


def test_git_is_given_user_and_password_or_a_bare_token_as_x_access_token() -> None:
    assert Secret("robot:pa:ss").git_username_password() == ("robot", "pa:ss")
    assert Secret("ghp_token").git_username_password() == (BARE_TOKEN_USERNAME, "ghp_token")
    assert BARE_TOKEN_USERNAME == "x-access-token"


def test_one_trailing_line_break_from_a_file_is_dropped(store) -> None:
    store.add(name="a", secret="tok-1\n")
    store.add(name="b", secret="tok-2\r\n")
    assert store.get("a").reveal() == "tok-1"
    assert store.get("b").reveal() == "tok-2"


@pytest.mark.parametrize(
    "bad",
    ["", "\n", "line1-hunter2\nline2", "hunter2\x00x", "user:", ":hunter2", "tab\thunter2"],
)
def test_a_malformed_secret_is_refused_without_repeating_it(store, bad: str) -> None:
    with pytest.raises(CredentialError) as info:
        store.add(repo=REPO_URL, secret=bad)
    assert "hunter2" not in str(info.value)
    assert store.refs() == []


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"repo": REPO_URL, "name": "x"}, {"name": "../escape"}, {"name": ""},
     {"name": "has space"}, {"repo": "acme/widgets"}, {"repo": "https://github.com/"}],
)
def test_a_bad_target_is_refused_with_a_sentence(store, kwargs: dict) -> None:
    with pytest.raises(CredentialError):
        store.add(secret="tok", **kwargs)


def test_an_entry_moved_onto_another_repository_does_not_open(store, tmp_path: Path) -> None:
    store.add(repo="github.com/acme/widgets", secret=SECRET)
    store.add(repo="github.com/acme/other", secret="robot:other-password")
    entries = {p.read_text(): p for p in (tmp_path / "state" / "credentials").iterdir()}
    widgets = next(p for text, p in entries.items() if "acme/widgets" in text)
    other = next(p for text, p in entries.items() if "acme/other" in text)
    forged = widgets.read_text().replace("acme/widgets", "acme/other")
    other.write_text(forged)
    with pytest.raises(CredentialError) as info:
        store.get_for_repo("github.com/acme/other")
    assert PASSWORD not in str(info.value)


def test_a_replaced_key_makes_secrets_unreadable_with_a_clear_error(store, tmp_path) -> None:
    store.add(repo=REPO_URL, secret=SECRET)
    key = tmp_path / "state" / "credential.key"
    key.unlink()
    CredentialStore(tmp_path / "state").add(name="new", secret="t")  # makes a new key
    with pytest.raises(CredentialError) as info:
        store.get_for_repo(SLUG)
    assert "gg credential add" in str(info.value)
    assert PASSWORD not in str(info.value)


def test_a_key_readable_by_others_is_refused(store, tmp_path: Path) -> None:
    store.add(repo=REPO_URL, secret=SECRET)
    os.chmod(tmp_path / "state" / "credential.key", 0o644)
    with pytest.raises(CredentialError, match="chmod 600"):
        store.get_for_repo(SLUG)


# -- the git credential helper, run the way git runs it ---------------------------------------


def run_helper(state_dir: Path | None, request: str, operation: str = "get",
               ) -> subprocess.CompletedProcess:
    env = git_environment(state_dir or Path("/nonexistent"))  # the environment git gives it
    if state_dir is None:
        del env["GG_STATE_DIR"]
    return subprocess.run([sys.executable, "-P", "-m", "gg.runner.git_credential_helper",
                           operation], input=request, env=env, capture_output=True,
                          text=True, timeout=30, cwd="/")


def test_helper_answers_for_exactly_the_matching_repository(store, tmp_path: Path) -> None:
    store.add(repo="http://127.0.0.1:8123/acme/widgets.git", secret=SECRET)
    store.add(repo="https://git.example.com/acme/widgets", secret="bare-token-123")
    state = tmp_path / "state"
    match = run_helper(state, "protocol=http\nhost=127.0.0.1:8123\npath=acme/widgets.git\n\n")
    assert match.returncode == 0
    assert match.stdout == f"username=robot\npassword={PASSWORD}\n"
    token = run_helper(state, "protocol=https\nhost=git.example.com\npath=acme/widgets.git\n\n")
    assert token.stdout == "username=x-access-token\npassword=bare-token-123\n"
    via_url = run_helper(state, "url=http://127.0.0.1:8123/acme/widgets.git\n\n")
    assert via_url.stdout == match.stdout
    for other in ("protocol=http\nhost=127.0.0.1:8123\npath=acme/other.git\n\n",
                  "protocol=http\nhost=127.0.0.1:9999\npath=acme/widgets.git\n\n",
                  "protocol=http\nhost=127.0.0.1:8123\n\n"):  # no path: repository unknown
        result = run_helper(state, other)
        assert result.returncode == 0 and result.stdout == ""


def test_helper_never_sends_a_secret_over_plain_http_to_another_machine(store, tmp_path) -> None:
    store.add(repo="http://git.example.com/acme/widgets.git", secret=SECRET)
    result = run_helper(tmp_path / "state",
                        "protocol=http\nhost=git.example.com\npath=acme/widgets.git\n\n")
    assert result.returncode == 0 and result.stdout == ""


@pytest.mark.parametrize("operation", ["store", "erase"])
def test_helper_store_and_erase_change_nothing(store, tmp_path: Path, operation: str) -> None:
    store.add(repo="http://127.0.0.1:8123/acme/widgets.git", secret=SECRET)
    request = ("protocol=http\nhost=127.0.0.1:8123\npath=acme/widgets.git\n"
               "username=robot\npassword=other\n\n")
    result = run_helper(tmp_path / "state", request, operation)
    assert result.returncode == 0 and result.stdout == ""
    assert store.get_for_repo("127.0.0.1:8123/acme/widgets").reveal() == SECRET


def test_helper_without_a_state_dir_answers_nothing_and_says_why() -> None:
    result = run_helper(None, "protocol=https\nhost=github.com\npath=acme/widgets.git\n\n")
    assert result.returncode == 0 and result.stdout == ""
    assert "GG_STATE_DIR" in result.stderr


def test_helper_with_an_unreadable_store_answers_nothing_and_leaks_nothing(store, tmp_path):
    store.add(repo=REPO_URL, secret=SECRET)
    os.chmod(tmp_path / "state" / "credential.key", 0o644)
    result = run_helper(tmp_path / "state",
                        "protocol=https\nhost=github.com\npath=acme/widgets.git\n\n")
    assert result.returncode == 0 and result.stdout == ""
    assert "chmod 600" in result.stderr and PASSWORD not in result.stderr
