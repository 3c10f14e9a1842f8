"""gg: run work on a fleet of machines an organisation controls."""

from functools import cache

__version__ = "0.1.0"

BUILD_COMMIT_ENV = "GG_BUILD_COMMIT"


@cache
def build_commit() -> str:
    """The commit this gg was built from, or ``unknown`` (docs/fleet-operations.md).

    In order: ``GG_BUILD_COMMIT`` (set by whoever builds an image or package from a tree
    without git metadata); the ``BUILD_COMMIT`` file a release build writes into the package
    (scripts/build-pyz); ``git rev-parse HEAD`` of the source tree when gg runs from a
    checkout (also an editable install); the commit pip recorded for an install from a git
    URL (``direct_url.json``). A dirty checkout still reads as its HEAD commit."""
    import os

    given = os.environ.get(BUILD_COMMIT_ENV, "").strip()
    if given:
        return given[:64]
    return _packaged_commit() or _checkout_commit() or _installed_commit() or "unknown"


BUILD_COMMIT_FILE = "BUILD_COMMIT"


def _packaged_commit() -> str | None:
    from pathlib import Path

    try:
        commit = (Path(__file__).resolve().parent / BUILD_COMMIT_FILE).read_text().strip()
    except OSError:
        return None
    return commit if _hex(commit) else None


def _checkout_commit() -> str | None:
    import subprocess
    from pathlib import Path

    tree = Path(__file__).resolve().parent.parent
    if not (tree / ".git").exists():  # only gg's own checkout, never an enclosing repository
        return None
    try:
        done = subprocess.run(["git", "-C", str(tree), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    commit = done.stdout.strip()
    return commit if done.returncode == 0 and _hex(commit) else None


def _installed_commit() -> str | None:
    import json
    from importlib import metadata

    try:
        text = metadata.distribution("gg").read_text("direct_url.json")
        commit = json.loads(text or "{}").get("vcs_info", {}).get("commit_id", "")
    except (metadata.PackageNotFoundError, ValueError, AttributeError):
        return None
    return commit if _hex(commit) else None


def _hex(text: str) -> bool:
    return 7 <= len(text) <= 64 and all(c in "0123456789abcdef" for c in text.lower())
