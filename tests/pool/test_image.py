"""The process driver's image: canonical builds, verified and confined unpacking."""

from __future__ import annotations

import hashlib
import io
import os
import stat
import tarfile
from pathlib import Path

import pytest

from gg.pool.image import (
    ImageError,
    build_image,
    context_digest,
    image_path,
    unpack_image,
)

LONG = "deep/" + "n" * 90 + "/" + "m" * 90 + ".txt"  # longer than a ustar name holds

FILES = {
    "README": b"a pool image\n",
    "bin/run.sh": b"#!/bin/sh\necho hi\n",
    "lib/data/x.json": b'{"x": 1}\n',
    "caf\u00e9.txt": b"unicode name\n",
    LONG: b"long name\n",
}
EXECUTABLE = {"bin/run.sh"}


def make_context(root: Path, *, reverse: bool = False, file_mode: int = 0o644) -> Path:
    """The same context, created in either order and with any non-exec permission bits."""
    root.mkdir(parents=True)
    items = sorted(FILES.items(), reverse=reverse)
    for rel, data in items:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        os.chmod(path, 0o755 if rel in EXECUTABLE else file_mode)
    (root / "empty").mkdir()
    os.symlink("lib/data/x.json", root / "latest")
    os.symlink("../README", root / "bin/readme")
    return root


def store_raw(images_dir: Path, data: bytes) -> str:
    """Store arbitrary bytes under their true digest, as a hostile image would arrive."""
    images_dir.mkdir(parents=True, exist_ok=True)
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    image_path(digest, images_dir).write_bytes(data)
    return digest


def hostile_tar(*entries: tuple[str, bytes | None, str | None, bytes]) -> bytes:
    """entries: (name, type, linkname, data)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, kind, linkname, data in entries:
            info = tarfile.TarInfo(name)
            info.type = kind or tarfile.REGTYPE
            info.mode = 0o644
            if linkname is not None:
                info.linkname = linkname
            if info.type == tarfile.REGTYPE:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                tar.addfile(info)
    return buf.getvalue()


# --------------------------------------------------------------------------- building


def test_same_context_gives_same_digest_whatever_the_file_times(tmp_path):
    context = make_context(tmp_path / "ctx")
    first = build_image(context, tmp_path / "images")
    for i, path in enumerate(sorted(context.rglob("*"))):
        os.utime(path, (1_000_000 + i * 7919, 2_000_000 + i * 104729), follow_symlinks=False)
    os.utime(context, (5, 5))
    second = build_image(context, tmp_path / "images")
    assert first == second
    assert first.digest.startswith("sha256:") and len(first.digest) == 7 + 64


def test_same_context_created_in_another_order_gives_same_digest(tmp_path):
    forward = build_image(make_context(tmp_path / "a"), tmp_path / "images")
    backward = build_image(make_context(tmp_path / "b", reverse=True, file_mode=0o600),
                           tmp_path / "images")
    assert forward.digest == backward.digest


def test_only_the_executable_bit_of_a_mode_counts(tmp_path):
    one = build_image(make_context(tmp_path / "a"), tmp_path / "images").digest
    context = make_context(tmp_path / "b")
    os.chmod(context / "bin/run.sh", 0o700)
    assert build_image(context, tmp_path / "images").digest == one
    os.chmod(context / "bin/run.sh", 0o644)
    assert build_image(context, tmp_path / "images").digest != one


def test_one_changed_byte_changes_the_digest(tmp_path):
    context = make_context(tmp_path / "ctx")
    before = build_image(context, tmp_path / "images").digest
    (context / "lib/data/x.json").write_bytes(b'{"x": 2}\n')
    after = build_image(context, tmp_path / "images").digest
    assert after != before
    assert (tmp_path / "images" / f"{before[7:]}.tar").is_file()  # old image kept


def test_image_is_stored_under_its_digest_and_hashes_to_it(tmp_path):
    context = make_context(tmp_path / "ctx")
    image = build_image(context, tmp_path / "images")
    assert image.path == tmp_path / "images" / f"{image.digest[7:]}.tar"
    assert "sha256:" + hashlib.sha256(image.path.read_bytes()).hexdigest() == image.digest
    assert context_digest(context) == image.digest
    assert sorted(p.name for p in (tmp_path / "images").iterdir()) == [image.path.name]


def test_tar_headers_are_canonical(tmp_path):
    image = build_image(make_context(tmp_path / "ctx"), tmp_path / "images")
    with tarfile.open(image.path) as tar:
        members = tar.getmembers()
    names = [m.name for m in members]
    assert names == sorted(names)
    assert not any(n.startswith(("./", "/")) for n in names)
    for m in members:
        assert (m.mtime, m.uid, m.gid, m.uname, m.gname) == (0, 0, 0, "", ""), m.name
        assert not {"mtime", "atime", "ctime"} & set(m.pax_headers), m.name
        if m.isdir():
            assert m.mode == 0o755
        elif m.isfile():
            assert m.mode == (0o755 if m.name in EXECUTABLE else 0o644), m.name
        else:
            assert m.issym() and m.mode == 0o777
    assert LONG in names and "caf\u00e9.txt" in names


def test_build_refuses_a_link_out_of_the_context(tmp_path):
    context = make_context(tmp_path / "ctx")
    os.symlink("../../etc/passwd", context / "lib/escape")
    with pytest.raises(ImageError, match="points outside it"):
        build_image(context, tmp_path / "images")
    os.unlink(context / "lib/escape")
    os.symlink("/etc/passwd", context / "abs")
    with pytest.raises(ImageError, match="points outside it"):
        build_image(context, tmp_path / "images")
    assert not list((tmp_path / "images").iterdir())  # nothing half-built left behind


def test_build_refuses_special_files_and_images_inside_the_context(tmp_path):
    context = make_context(tmp_path / "ctx")
    os.mkfifo(context / "pipe")
    with pytest.raises(ImageError, match="neither a file, a directory nor a symbolic link"):
        build_image(context, tmp_path / "images")
    os.unlink(context / "pipe")
    with pytest.raises(ImageError, match="cannot hold itself"):
        build_image(context, context / "images")
    with pytest.raises(ImageError, match="is not a directory"):
        build_image(tmp_path / "missing", tmp_path / "images")


# --------------------------------------------------------------------------- unpacking


def test_unpack_reproduces_files_links_and_exec_bits(tmp_path):
    context = make_context(tmp_path / "ctx")
    image = build_image(context, tmp_path / "images")
    old = os.umask(0o077)  # a strict umask must not change what the tree holds
    try:
        dest = unpack_image(image.digest, tmp_path / "images", tmp_path / "out" / "member-1")
    finally:
        os.umask(old)
    for rel, data in FILES.items():
        path = dest / rel
        assert path.read_bytes() == data
        assert stat.S_IMODE(path.stat().st_mode) == (0o755 if rel in EXECUTABLE else 0o644)
    assert (dest / "empty").is_dir() and not list((dest / "empty").iterdir())
    assert os.readlink(dest / "latest") == "lib/data/x.json"
    assert (dest / "bin/readme").read_bytes() == FILES["README"]
    assert context_digest(dest) == image.digest  # the tree round-trips to the same image


def test_unpack_refuses_a_tampered_image_before_writing_anything(tmp_path):
    image = build_image(make_context(tmp_path / "ctx"), tmp_path / "images")
    data = bytearray(image.path.read_bytes())
    data[512] ^= 0x01  # the first byte of the first file (README)
    image.path.write_bytes(bytes(data))
    with pytest.raises(ImageError, match="does not match its digest") as caught:
        unpack_image(image.digest, tmp_path / "images", tmp_path / "out")
    assert "rebuild it" in str(caught.value)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "entries, words",
    [
        ([("../evil", None, None, b"x")], "would land outside"),
        ([("ok/../../evil", None, None, b"x")], "would land outside"),
        ([("/tmp/evil", None, None, b"x")], "would land outside"),
        ([("link", tarfile.SYMTYPE, "../outside", b"")], "pointing outside"),
        ([("link", tarfile.SYMTYPE, "/etc", b"")], "pointing outside"),
        ([("a/b/link", tarfile.SYMTYPE, "../../../x", b"")], "pointing outside"),
        ([("s", tarfile.SYMTYPE, ".", b""), ("t", tarfile.SYMTYPE, "s/..", b"")],
         "resolves outside"),
        ([("dir", tarfile.SYMTYPE, "sub", b""), ("dir/f", None, None, b"x")],
         "not a directory"),
        ([("hard", tarfile.LNKTYPE, "README", b"")], "neither a file"),
        ([("dev", tarfile.CHRTYPE, None, b"")], "neither a file"),
        ([("twice", None, None, b"1"), ("twice", None, None, b"2")], "twice"),
    ],
)
def test_unpack_refuses_entries_that_escape_or_confuse_the_tree(tmp_path, entries, words):
    digest = store_raw(tmp_path / "images", hostile_tar(*entries))
    dest = tmp_path / "jail" / "dest"
    with pytest.raises(ImageError, match=words):
        unpack_image(digest, tmp_path / "images", dest)
    assert not dest.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["images", "jail"]
    assert not (tmp_path / "jail" / "evil").exists()


def test_unpack_refuses_what_is_not_a_tar(tmp_path):
    digest = store_raw(tmp_path / "images", b"definitely not a tarball" * 100)
    with pytest.raises(ImageError, match="not a readable tar archive"):
        unpack_image(digest, tmp_path / "images", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_unpack_needs_a_real_digest_a_stored_image_and_an_empty_destination(tmp_path):
    image = build_image(make_context(tmp_path / "ctx"), tmp_path / "images")
    with pytest.raises(ImageError, match="is not an image digest"):
        unpack_image("sha256:../../etc/passwd", tmp_path / "images", tmp_path / "out")
    with pytest.raises(ImageError, match="is not an image digest"):
        unpack_image(image.digest.upper(), tmp_path / "images", tmp_path / "out")
    with pytest.raises(ImageError, match="there is no image"):
        unpack_image("sha256:" + "0" * 64, tmp_path / "images", tmp_path / "out")
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "left-over").write_text("x")
    with pytest.raises(ImageError, match="not an empty directory"):
        unpack_image(image.digest, tmp_path / "images", busy)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert unpack_image(image.digest, tmp_path / "images", empty) == empty
    assert (empty / "README").read_bytes() == FILES["README"]


def test_failed_unpack_into_an_existing_empty_directory_leaves_it_empty(tmp_path):
    digest = store_raw(tmp_path / "images", hostile_tar(
        ("a-file", None, None, b"x"), ("s", tarfile.SYMTYPE, ".", b""),
        ("t", tarfile.SYMTYPE, "s/..", b"")))
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(ImageError, match="resolves outside"):
        unpack_image(digest, tmp_path / "images", dest)
    assert dest.is_dir() and not list(dest.iterdir())
