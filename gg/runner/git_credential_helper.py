"""A git credential helper that answers from the runner's credential store.

Git runs it as ``python -m gg.runner.git_credential_helper get`` (see ``gg.runner.git``), so
the secret travels from the encrypted store to git over this process's stdout pipe: never in an
argv, never in an environment variable, never through the control plane.

Protocol (gitcredentials(7)): git writes ``key=value`` lines ending with a blank line;
``protocol``, ``host`` and ``path`` (git sends ``path`` because gg sets
``credential.useHttpPath=true``) name the repository, and ``url=`` may stand for all three.
For ``get`` the helper answers ``username=`` and ``password=`` when the store holds a secret
for exactly that repository's slug, and nothing at all otherwise, so git fails without
prompting (gg also sets ``GIT_TERMINAL_PROMPT=0``). ``store`` and ``erase`` do nothing: the
store changes only through ``gg credential``.

Refusals on purpose: a secret is answered over ``https``, and over plain ``http`` only to a
loopback host (a password sent over plain http to another machine can be read on the way);
never for a request without a path (the repository would be unknown).

The state directory comes from ``GG_STATE_DIR``, which gg sets only in the git subprocess's
environment. Whatever goes wrong, the helper says one sentence on stderr (git shows it) and
exits 0 without an answer: a helper failure must never look like a different credential.
"""

from __future__ import annotations

import ipaddress
import os
import sys
from pathlib import Path
from typing import Mapping, TextIO
from urllib.parse import urlsplit

from gg.domain.repos import repo_slug
from gg.runner.credentials import CredentialError, CredentialStore

STATE_DIR_ENV = "GG_STATE_DIR"
_MAX_INPUT = 64 * 1024


def parse_request(text: str) -> dict[str, str]:
    """The attributes git sent; ``url=`` is split into protocol, host and path."""
    attrs: dict[str, str] = {}
    for line in text.splitlines():
        if not line:
            break
        key, sep, value = line.partition("=")
        if sep and not key.endswith("[]"):
            attrs[key] = value
    if "url" in attrs:
        parts = urlsplit(attrs.pop("url"))
        attrs.setdefault("protocol", parts.scheme)
        attrs.setdefault("host", parts.netloc.rpartition("@")[2])
        attrs.setdefault("path", parts.path.lstrip("/"))
    return attrs


def answer(attrs: Mapping[str, str], state_dir: Path) -> str:
    """The lines to print for a ``get`` request: a username and password, or nothing."""
    protocol = attrs.get("protocol", "").lower()
    host = attrs.get("host", "")
    path = attrs.get("path", "")
    if not host or not path or not _may_send(protocol, host):
        return ""
    try:
        slug = repo_slug(f"{protocol}://{host}/{path}")
    except ValueError:
        return ""
    secret = CredentialStore(state_dir).get_for_repo(slug)
    if secret is None:
        return ""
    username, password = secret.git_username_password()
    return f"username={username}\npassword={password}\n"


def main(argv: list[str] | None = None, *, stdin: TextIO | None = None,
         stdout: TextIO | None = None, environ: Mapping[str, str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    environ = os.environ if environ is None else environ
    operation = argv[-1] if argv else ""
    request = stdin.read(_MAX_INPUT)
    if operation != "get":
        return 0  # store, erase and anything newer: gg's store changes only via gg credential
    state_dir = environ.get(STATE_DIR_ENV, "")
    if not state_dir:
        print(f"gg credential helper: {STATE_DIR_ENV} is not set, so no credential is offered",
              file=sys.stderr)
        return 0
    try:
        stdout.write(answer(parse_request(request), Path(state_dir)))
        stdout.flush()
    except CredentialError as exc:
        print(f"gg credential helper: {exc}", file=sys.stderr)
    except Exception as exc:  # never let a traceback (with locals) reach git's stderr
        print(f"gg credential helper: the credential store could not be read "
              f"({type(exc).__name__})", file=sys.stderr)
    return 0


def _may_send(protocol: str, host: str) -> bool:
    if protocol == "https":
        return True
    if protocol != "http":
        return False
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    name = name.strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


if __name__ == "__main__":
    sys.exit(main())
