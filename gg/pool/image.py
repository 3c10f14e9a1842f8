"""The ``process`` driver's image: a canonical tarball of a build context, named by its digest.

A strategy pins its image by digest, so the same build context must give the same digest on
any host, on any day, whatever the files' times, owners or creation order; otherwise a
rebuild would look like a new image and roll the whole pool for nothing. The tarball is
therefore canonical:

- a plain, uncompressed POSIX tar (pax format). Not gzip: compressed bytes depend on the
  zlib build and level, and the digest must not. Pax extended headers appear only for names
  that do not fit a ustar header (long or non-ASCII) and never carry a timestamp;
- entries sorted by their relative path (a parent always comes before what it holds), no
  ``./`` prefix, the context directory itself not included;
- only directories, regular files and symbolic links; anything else is refused. Hard links
  are stored as separate files;
- every entry has mtime 0, uid and gid 0, empty user and group names; directories are 0755,
  files 0755 if any executable bit is set and 0644 otherwise, links 0777 with their target;
- a symbolic link must stay inside the context (relative, and resolving within it).

The digest is ``sha256:`` + the SHA-256 of the tar's bytes; the file is stored as
``IMAGES_DIR/<hex>.tar``. :func:`unpack_image` copies the file aside while hashing it,
refuses it unless the hash matches the digest (so an image changed on disk is never run, and
cannot change between check and use), and only then unpacks, refusing any entry that would
land or point outside the destination.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, BinaryIO

from gg.error_codes import ErrorCode
from gg.errors import GGError

DIGEST = re.compile(r"^sha256:([0-9a-f]{64})$")
_CHUNK = 1 << 20


class ImageError(GGError):
    """An image cannot be built, found, trusted or unpacked; the message says which and why."""

    code = ErrorCode.IMAGE_INVALID


@dataclass(frozen=True)
class Image:
    digest: str  # "sha256:<64 hex>"
    path: Path  # IMAGES_DIR/<hex>.tar


# --------------------------------------------------------------------------- building


def build_image(context_dir: Path, images_dir: Path) -> Image:
    """Write the canonical tarball of ``context_dir`` into ``images_dir`` and name it."""
    context_dir, images_dir = Path(context_dir), Path(images_dir)
    images_dir.mkdir(parents=True, exist_ok=True)
    if _within(images_dir.resolve(), context_dir.resolve()):
        raise ImageError(
            f"the images directory {images_dir} lies inside the build context {context_dir}; "
            "an image cannot hold itself"
        )
    fd, tmp_name = tempfile.mkstemp(prefix=".building-", suffix=".tar", dir=images_dir)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            sink = _HashingSink(out)
            _write_canonical(context_dir, sink)
        digest = "sha256:" + sink.hash.hexdigest()
        path = image_path(digest, images_dir)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return Image(digest, path)


def context_digest(context_dir: Path) -> str:
    """The digest :func:`build_image` would give ``context_dir``, without storing anything."""
    sink = _HashingSink(None)
    _write_canonical(Path(context_dir), sink)
    return "sha256:" + sink.hash.hexdigest()


def image_path(digest: str, images_dir: Path) -> Path:
    """Where the image with ``digest`` lives; refuses anything that is not a digest."""
    match = DIGEST.match(str(digest))
    if not match:
        raise ImageError(
            f"{digest!r} is not an image digest; one reads sha256: followed by 64 hex digits"
        )
    return Path(images_dir) / f"{match.group(1)}.tar"


class _HashingSink:
    """The file object tarfile writes to: hashes every byte, and stores it when given a file."""

    def __init__(self, out: BinaryIO | None):
        self.out = out
        self.hash = hashlib.sha256()
        self.offset = 0

    def write(self, data: bytes) -> int:
        self.hash.update(data)
        if self.out is not None:
            self.out.write(data)
        self.offset += len(data)
        return len(data)

    def tell(self) -> int:
        return self.offset


def _write_canonical(context_dir: Path, sink: _HashingSink) -> None:
    if not context_dir.is_dir():
        raise ImageError(f"the build context {context_dir} is not a directory")
    root = context_dir.resolve()
    entries = sorted(_walk(root, ""), key=lambda e: e[0])
    with tarfile.open(fileobj=sink, mode="w",  # type: ignore[call-overload]
                      format=tarfile.PAX_FORMAT, encoding="utf-8") as tar:
        for rel, path, st in entries:
            info = tarfile.TarInfo(rel)
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if stat.S_ISDIR(st.st_mode):
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            elif stat.S_ISLNK(st.st_mode):
                info.type, info.mode = tarfile.SYMTYPE, 0o777
                info.linkname = _link_target(root, path, rel)
                tar.addfile(info)
            else:
                info.type = tarfile.REGTYPE
                info.mode = 0o755 if st.st_mode & 0o111 else 0o644
                info.size = st.st_size
                try:
                    with open(path, "rb") as data:
                        tar.addfile(info, data)
                except OSError as exc:
                    raise ImageError(f"cannot read {path} for the image: {exc.strerror}") from None


def _walk(root: Path, prefix: str):
    """(relative posix path, path, lstat) for everything under ``root``, links not followed."""
    try:
        children = list(os.scandir(root / prefix if prefix else root))
    except OSError as exc:
        raise ImageError(f"cannot read {root / prefix} for the image: {exc.strerror}") from None
    for child in children:
        rel = f"{prefix}/{child.name}" if prefix else child.name
        st = child.stat(follow_symlinks=False)
        if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
            raise ImageError(
                f"{child.path} is neither a file, a directory nor a symbolic link; "
                "an image holds only those"
            )
        yield rel, Path(child.path), st
        if stat.S_ISDIR(st.st_mode):
            yield from _walk(root, rel)


def _link_target(root: Path, path: Path, rel: str) -> str:
    target = os.readlink(path)
    if not _stays_inside(rel, target) or not _within(Path(os.path.realpath(path)), root):
        raise ImageError(
            f"the symbolic link {rel} in the build context points outside it ({target}); "
            "an image must be self-contained"
        )
    return target


# --------------------------------------------------------------------------- unpacking


def unpack_image(digest: str, images_dir: Path, dest: Path) -> Path:
    """Verify the image named ``digest`` and unpack it into ``dest`` (new or empty).

    Nothing is left behind on failure: a tree that fails halfway is removed again.
    """
    path = image_path(digest, images_dir)
    if not path.is_file():
        raise ImageError(
            f"there is no image {digest} in {images_dir}; build it first (gg strategy build)"
        )
    dest = Path(dest)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise ImageError(f"will not unpack image {digest} into {dest}: it is not an empty directory")
    created = not dest.exists()
    with tempfile.TemporaryFile() as copy:
        actual = _copy_hashing(path, copy)
        if actual != digest:
            raise ImageError(
                f"the image file {path} does not match its digest {digest} (its bytes hash to "
                f"{actual}); it was changed after it was built, so it will not be used: "
                "rebuild it"
            )
        copy.seek(0)
        dest.mkdir(parents=True, exist_ok=True)
        try:
            _extract(copy, dest.resolve(), digest)
        except BaseException:
            _clear(dest, remove_self=created)
            raise
    return dest


def verified_copy(digest: str, images_dir: Path, copy: IO[bytes]) -> None:
    """The image named ``digest`` copied into ``copy``, refused unless its bytes hash to it:
    what a container engine imports is what was checked (``unpack_image``'s rule)."""
    path = image_path(digest, images_dir)
    if not path.is_file():
        raise ImageError(
            f"there is no image {digest} in {images_dir}; build it first (gg strategy build)"
        )
    actual = _copy_hashing(path, copy)
    if actual != digest:
        raise ImageError(
            f"the image file {path} does not match its digest {digest} (its bytes hash to "
            f"{actual}); it was changed after it was built, so it will not be used: rebuild it"
        )
    copy.flush()


def _copy_hashing(path: Path, copy: IO[bytes]) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as src:
        while chunk := src.read(_CHUNK):
            h.update(chunk)
            copy.write(chunk)
    return "sha256:" + h.hexdigest()


def _extract(fileobj: BinaryIO, dest: Path, digest: str) -> None:
    with _open_tar(fileobj, digest) as tar:
        members = tar.getmembers()
        names = _check_members(members, digest)
        links = []
        for member in members:
            rel = names[member.name]
            target = dest.joinpath(*rel.parts)
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
                os.chmod(target, 0o755)
            elif member.isfile():
                target.parent.mkdir(parents=True, exist_ok=True)
                _write_file(tar, member, target)
            else:
                links.append((member, target))
        for member, target in links:  # last, so no write can ever pass through a link
            target.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(member.linkname, target)
        for member, target in links:  # once all exist: a chain of links must not escape either
            if not _within(Path(os.path.realpath(target)), dest):
                raise ImageError(
                    f"image {digest} holds a link {member.name} that resolves outside the "
                    "destination; refused"
                )


def _open_tar(fileobj: BinaryIO, digest: str) -> tarfile.TarFile:
    """Open the verified copy and read every header now, so a broken archive fails here."""
    tar = None
    try:
        tar = tarfile.open(fileobj=fileobj, mode="r:")  # noqa: SIM115 -- the caller closes it
        tar.getmembers()
    except tarfile.TarError as exc:
        if tar is not None:
            tar.close()
        raise ImageError(f"image {digest} is not a readable tar archive: {exc}") from None
    return tar


def _check_members(members: list[tarfile.TarInfo], digest: str) -> dict[str, PurePosixPath]:
    """Refuse, before writing anything, every entry that could escape or confuse the tree."""
    names: dict[str, PurePosixPath] = {}
    seen: dict[PurePosixPath, tarfile.TarInfo] = {}
    for member in members:
        rel = PurePosixPath(member.name)
        if rel.is_absolute() or ".." in rel.parts or not rel.parts or str(rel) == ".":
            raise ImageError(
                f"image {digest} holds an entry named {member.name!r} that would land outside "
                "the destination; refused"
            )
        if not (member.isdir() or member.isfile() or member.issym()):
            raise ImageError(
                f"image {digest} holds {member.name!r}, which is neither a file, a directory "
                "nor a symbolic link; refused"
            )
        if member.issym() and not _stays_inside(str(rel), member.linkname):
            raise ImageError(
                f"image {digest} holds a link {member.name} pointing outside the destination "
                f"({member.linkname}); refused"
            )
        if rel in seen:
            raise ImageError(f"image {digest} holds {member.name!r} twice; refused")
        seen[rel] = member
        names[member.name] = rel
    for rel in seen:
        for parent in rel.parents:
            holder = seen.get(parent)
            if holder is not None and not holder.isdir():
                raise ImageError(
                    f"image {digest} puts {rel} inside {parent}, which is not a directory; refused"
                )
    return names


def _write_file(tar: tarfile.TarFile, member: tarfile.TarInfo, target: Path) -> None:
    mode = 0o755 if member.mode & 0o111 else 0o644
    source = tar.extractfile(member)
    assert source is not None
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    with os.fdopen(fd, "wb") as out, source:
        shutil.copyfileobj(source, out, _CHUNK)
    os.chmod(target, mode)  # the umask must not decide what runs


def _stays_inside(rel: str, target: str) -> bool:
    """Whether a link at ``rel`` pointing to ``target`` stays inside its root, on paper."""
    if not target or target.startswith("/"):
        return False
    joined = os.path.normpath(os.path.join(os.path.dirname(rel), target))
    return joined != ".." and not joined.startswith("../")


def _within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _clear(dest: Path, *, remove_self: bool) -> None:
    if remove_self:
        shutil.rmtree(dest, ignore_errors=True)
        return
    for child in dest.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)
