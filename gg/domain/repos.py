"""Repository names: one slug per repository, whatever URL spelled it.

A **slug** is how gg names a repository everywhere a name must match exactly: the runner's
credential store (``gg credential add --repo SLUG``), the control plane's "no credential is
registered for repository SLUG", and a fleet profile's ``destinations``.

    https://github.com/acme/widgets.git      -> github.com/acme/widgets
    http://127.0.0.1:8123/acme/widgets.git   -> 127.0.0.1:8123/acme/widgets
    ssh://git@github.com:22/acme/widgets     -> github.com/acme/widgets
    git@github.com:acme/widgets.git          -> github.com/acme/widgets
    github.com/acme/widgets                  -> github.com/acme/widgets   (already a slug)
    /srv/git/widgets.git, file:///srv/git/widgets.git  -> /srv/git/widgets

Normalisation, in order: the scheme and any user or password are dropped (a slug never holds a
credential); the host is lower-cased and a default port (http 80, https 443, ssh 22, git 9418)
dropped; query and fragment are dropped; repeated and trailing slashes and one trailing ``.git``
are removed. The path keeps its case: most hosts treat ``Acme`` and ``acme`` alike but not all,
and a false match would hand a credential to the wrong repository. A path with a ``.`` or
``..`` segment is refused rather than resolved, so no spelling can climb out of the repository
it names. Local repositories (an absolute path or a ``file://`` URL) become their absolute,
lexically normalised path, which starts with ``/`` and so can never equal a host slug.

Ambiguity resolved on purpose: ``host:1234/path`` (no scheme, no user) is read as a slug with a
port, not as git's scp-like ``host:path`` form; write ``user@host:1234/path`` or an ``ssh://``
URL for the scp-like reading.

Only the standard library: these are pure rules.
"""

from __future__ import annotations

import posixpath
import re
from urllib.parse import unquote, urlsplit

__all__ = ["repo_slug", "destination_allowed", "redact_url_credentials", "is_local_slug"]

_DEFAULT_PORTS = {"http": 80, "https": 443, "ssh": 22, "git+ssh": 22, "ssh+git": 22, "git": 9418}
_NETWORK_SCHEMES = frozenset(_DEFAULT_PORTS)
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_SCP_LIKE = re.compile(r"^(?:[^@/\s]+@)(?P<host>\[[^\]]+\]|[^:/\s]+):(?P<path>.+)$")
_SCP_LIKE_NO_USER = re.compile(r"^(?P<host>\[[^\]]+\]|[^:/@\s\[]+):(?P<path>(?!\d+(?:/|$)).+)$")
_SLUG_HOST = re.compile(r"^(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?)"
                        r"(?::(?P<port>\d{1,5}))?$")
_URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)[^/\s@]+@")


def repo_slug(url: str) -> str:
    """The slug for ``url`` (see the module docstring); ValueError with a sentence otherwise.

    The error never repeats the input, since a mistyped URL may carry a password.
    """
    text = (url or "").strip()
    if not text:
        raise ValueError("a repository is needed: give a URL, a slug like host/owner/name, "
                         "or an absolute path")
    if any(ch.isspace() or ord(ch) < 32 for ch in text):
        raise ValueError("a repository URL cannot contain spaces or control characters")

    scheme_match = _SCHEME.match(text)
    if scheme_match:
        scheme = scheme_match.group(1).lower()
        if scheme == "file":
            rest = text[len("file://"):].split("?", 1)[0].split("#", 1)[0]
            if rest.lower().startswith("localhost/"):
                rest = rest[len("localhost"):]
            return _local_slug(rest)
        if scheme not in _NETWORK_SCHEMES:
            raise ValueError(f"gg does not know the repository scheme {scheme}:// "
                             "(use https, http, ssh, git or file)")
        parts = urlsplit(text)
        try:
            port = parts.port
        except ValueError:
            raise ValueError("the repository URL has an invalid port") from None
        host = _host_from_netloc(parts.netloc)
        if port is not None and port != _DEFAULT_PORTS[scheme]:
            host = f"{host}:{port}"
        return _join(host, parts.path)

    if text.startswith("/"):
        return _local_slug(text)
    if text.startswith(("./", "../", "~")) or text in (".", ".."):
        raise ValueError("a local repository must be given as an absolute path")

    scp = _SCP_LIKE.match(text) or _SCP_LIKE_NO_USER.match(text)
    if scp:
        return _join(_host(scp.group("host")), scp.group("path"))

    host_part, _, path = text.partition("/")
    match = _SLUG_HOST.match(host_part)
    if not match or "." not in host_part and ":" not in host_part and host_part != "localhost":
        raise ValueError("a repository slug looks like host/owner/name "
                         "(for example github.com/acme/widgets)")
    host = _host(match.group("host"))
    if match.group("port"):
        host = f"{host}:{int(match.group('port'))}"
    return _join(host, path)


def is_local_slug(slug: str) -> bool:
    """True when ``slug`` names a repository on this machine's file system."""
    return slug.startswith("/")


def destination_allowed(dest: str, allowed: list[str]) -> bool:
    """May the runner push to ``dest``, given a profile's ``destinations``?

    Exact match after normalising both sides with ``repo_slug``: no wildcards, no prefixes,
    so ``github.com/acme/widgets`` allows neither ``github.com/acme/widgets-fork`` nor
    ``github.com/acme``. The scheme does not matter (https and ssh spellings of one repository
    are one destination). A destination or list entry that is not a repository at all never
    matches; an empty list allows nothing.
    """
    try:
        wanted = repo_slug(dest)
    except ValueError:
        return False
    for entry in allowed:
        try:
            if repo_slug(entry) == wanted:
                return True
        except ValueError:
            continue
    return False


def redact_url_credentials(text: str) -> str:
    """``text`` with the user and password of every ``scheme://user:pass@`` replaced by ***."""
    return _URL_USERINFO.sub(lambda m: m.group("scheme") + "***@", text)


def _host_from_netloc(netloc: str) -> str:
    hostport = netloc.rpartition("@")[2]
    if hostport.startswith("["):
        return _host(hostport[: hostport.find("]") + 1])
    return _host(hostport.split(":", 1)[0])


def _host(host: str) -> str:
    host = host.lower()
    if not host or not (_SLUG_HOST.match(host)):
        raise ValueError("the repository URL has no valid host")
    return host


def _join(host: str, path: str) -> str:
    segments = [s for s in path.split("?", 1)[0].split("#", 1)[0].split("/") if s]
    if any(unquote(s) in (".", "..") for s in segments):
        raise ValueError("a repository path cannot contain . or .. segments")
    if segments and segments[-1].endswith(".git"):
        segments[-1] = segments[-1][: -len(".git")]
        if not segments[-1]:
            segments.pop()
    if not segments:
        raise ValueError("the repository URL names a host but no repository path")
    return host + "/" + "/".join(segments)


def _local_slug(path: str) -> str:
    if not path.startswith("/"):
        raise ValueError("a local repository must be given as an absolute path")
    normal = posixpath.normpath(path)
    if normal.startswith("//"):
        normal = "/" + normal.lstrip("/")
    if normal.endswith(".git") and normal != "/.git":
        normal = normal[: -len(".git")]
    if normal in ("/", ""):
        raise ValueError("the root directory is not a repository")
    return normal
