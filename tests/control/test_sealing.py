"""Sealing values under the key file: AES-GCM, bound to what the value is, rotation."""

import os
import stat

import pytest

from gg.control import sealing
from gg.control.sealing import Sealed, SealingError


def test_the_key_file_is_made_0600_on_first_use_and_opens_what_it_sealed(tmp_path):
    path = tmp_path / "secrets.key"
    sealed = sealing.seal(path, b"value", b"NAME\0")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert b"value" not in sealed.sealed and len(sealed.nonce) == 12
    assert sealing.open_sealed(path, sealed, b"NAME\0") == b"value"


def test_each_seal_has_its_own_nonce(tmp_path):
    path = tmp_path / "secrets.key"
    a, b = sealing.seal(path, b"v", b"c"), sealing.seal(path, b"v", b"c")
    assert a.nonce != b.nonce and a.sealed != b.sealed


def test_a_value_moved_to_another_name_does_not_open(tmp_path):
    path = tmp_path / "secrets.key"
    sealed = sealing.seal(path, b"value", b"A\0")
    with pytest.raises(SealingError, match="does not open under its key"):
        sealing.open_sealed(path, sealed, b"B\0")


def test_another_key_file_says_so_in_one_sentence(tmp_path):
    sealed = sealing.seal(tmp_path / "one.key", b"value", b"A\0")
    with pytest.raises(SealingError, match="GG_SECRETS_KEY_FILE") as caught:
        sealing.open_sealed(tmp_path / "two.key", sealed, b"A\0", "secret A")
    assert "\n" not in str(caught.value) and "secret A" in str(caught.value)


def test_a_file_that_is_no_key_is_one_sentence(tmp_path):
    path = tmp_path / "secrets.key"
    path.write_text("not a key\n")
    with pytest.raises(SealingError, match="does not hold a key"):
        sealing.seal(path, b"v", b"c")


def test_rotation_reseals_under_a_new_key_and_keeps_the_old_one(tmp_path):
    path = tmp_path / "secrets.key"
    rows = {"A": sealing.seal(path, b"one", b"A"), "B": sealing.seal(path, b"two", b"B")}
    old_id = rows["A"].key_id

    def reseal(key):
        for name, s in list(rows.items()):
            rows[name] = sealing.seal(path, sealing.open_sealed(path, s, name.encode()),
                                      name.encode(), key=key)
        return len(rows)

    new_id, count = sealing.rotate(path, reseal, lambda: {s.key_id for s in rows.values()})
    assert count == 2 and new_id != old_id and rows["A"].key_id == new_id
    assert sealing.key_id(sealing.current_key(path)) == new_id
    assert sealing.key_id(sealing._read(tmp_path / "secrets.key.old")) == old_id
    assert not (tmp_path / "secrets.key.new").exists()
    assert sealing.open_sealed(path, rows["B"], b"B") == b"two"


def test_a_rotation_that_fails_changes_no_key(tmp_path):
    path = tmp_path / "secrets.key"
    before = sealing.key_id(sealing.current_key(path))

    def fail(key):
        raise SealingError("no")

    with pytest.raises(SealingError):
        sealing.rotate(path, fail, set)
    assert sealing.key_id(sealing.current_key(path)) == before
    assert not (tmp_path / "secrets.key.new").exists()


def test_a_rotation_stopped_after_its_transaction_is_finished_by_the_next(tmp_path):
    path = tmp_path / "secrets.key"
    sealing.current_key(path)
    left = os.urandom(32)
    sealing._write(tmp_path / "secrets.key.new", left)
    stored = Sealed(sealing.key_id(left), b"n" * 12, b"x")
    seen = []
    sealing.rotate(path, lambda key: seen.append(key) or 0, lambda: {stored.key_id})
    assert sealing._read(tmp_path / "secrets.key.old") == left  # promoted, then kept as old
