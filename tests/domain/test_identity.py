"""The pure rules of identity you can check: key fingerprints, version skew, who holds a name."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from cryptography.hazmat.primitives import serialization

from gg import keys
from gg.domain.identity import (
    holds_name,
    key_fingerprint,
    normalise_fingerprint,
    openssh_public_key,
    skew,
    skew_pair,
    skew_warns,
)
from gg.domain.runners import Runner

from support import new_key

A, B = "a" * 40, "b" * 40


def test_the_fingerprint_is_what_ssh_keygen_prints_for_the_same_key(tmp_path):
    if shutil.which("ssh-keygen") is None:
        pytest.skip("ssh-keygen is absent (Debian package openssh-client; .ci/run installs it)")
    key = new_key()
    path = tmp_path / "key.pub"
    path.write_bytes(key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                                   serialization.PublicFormat.OpenSSH))
    printed = subprocess.run(["ssh-keygen", "-lf", str(path)], capture_output=True, text=True,
                             check=True).stdout.split()[1]
    assert key_fingerprint(keys.public_text(key)) == printed
    assert openssh_public_key(keys.public_text(key)) == path.read_text().strip()


def test_a_text_that_is_not_an_ed25519_key_has_no_fingerprint():
    assert key_fingerprint("not base64!") is None
    assert key_fingerprint("AAAA") is None


def test_a_pasted_fingerprint_is_read_as_gg_shows_it():
    assert normalise_fingerprint("  sha256:abc/+d=\n") == "SHA256:abc/+d"
    assert normalise_fingerprint("abc") == "SHA256:abc"


@pytest.mark.parametrize("runner, server, verdict", [
    (("0.1.0", A), ("0.1.0", A), "none"),
    (("0.0.9", A), ("0.1.0", A), "skewed"),
    (("0.0.9", None), ("0.1.0", A), "skewed"),  # the versions differ: the commit cannot help
    (("0.1.0", B), ("0.1.0", A), "skewed"),
    (("0.1.0", "unknown"), ("0.1.0", A), "unknown"),
    (("0.1.0", None), ("0.1.0", A), "unknown"),
    (("0.1.0", A), ("0.1.0", "unknown"), "unknown"),
    ((None, A), ("0.1.0", A), "unknown"),
])
def test_version_skew_compares_version_and_build_commit(runner, server, verdict):
    assert skew(*runner, *server) == verdict


def test_a_skew_event_is_recorded_for_skewed_and_unknown_once_per_pair():
    seen: set[str] = set()
    warned = []
    for runner, verdict in [(("0.0.9", A), "skewed"), (("0.0.9", A), "skewed"),
                            (("0.1.0", A), "none"), ((None, None), "unknown"),
                            (("0.0.9", A), "skewed"), ((None, None), "unknown")]:
        pair = skew_pair(*runner, "0.1.0", A)
        if skew_warns(verdict, pair, seen):
            warned.append(pair)
        seen.add(pair)
    assert warned == [f"0.0.9+{A}/0.1.0+{A}", f"unknown+unknown/0.1.0+{A}"]


def _runner(**fields) -> Runner:
    return Runner(id="r_1", name="web", created_at=0.0, **fields)


@pytest.mark.parametrize("fields, lease, now, holds", [
    ({"last_seen_at": 100.0}, False, 110.0, True),  # online
    ({"last_seen_at": 100.0}, False, 200.0, False),  # offline
    ({"last_seen_at": 100.0, "goodbye_at": 101.0}, False, 102.0, False),  # said goodbye
    ({"last_seen_at": 100.0}, True, 200.0, True),  # offline, but still holds a lease
    ({"last_seen_at": 100.0, "retired_at": 105.0, "admin_state": "retired"}, True, 106.0, False),
    ({}, False, 10.0, True),  # registered a moment ago, not checked in yet
    ({}, False, 100.0, False),  # registered long ago and never came
])
def test_a_live_runner_holds_its_name(fields, lease, now, holds):
    assert holds_name(_runner(**fields), now, 45.0, holds_lease=lease) is holds
