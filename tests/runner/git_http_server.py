"""A real git smart-HTTP server on a loopback port, for tests: ``git http-backend`` as CGI
behind HTTP basic auth with one fixed user and password.

    with GitHttpServer(root, user="robot", password="s3cret") as server:
        server.create_repo("acme/widgets.git", with_commit=True)
        url = server.url("acme/widgets.git")   # http://127.0.0.1:PORT/acme/widgets.git

Every request without the right ``Authorization: Basic`` gets 401 with ``WWW-Authenticate``.
Clone (upload-pack) and push (receive-pack: ``http.receivepack true`` in each repository) both
work. Bounded: each request's socket and CGI process time out, and ``close()`` stops the
serving thread. ``server.seen_users`` records the user name of every authorised request.
"""

from __future__ import annotations

import base64
import hmac
import os
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REQUEST_TIMEOUT = 20.0
IDENTITY = {"GIT_AUTHOR_NAME": "Test Seeder", "GIT_AUTHOR_EMAIL": "seeder@example.test",
            "GIT_COMMITTER_NAME": "Test Seeder", "GIT_COMMITTER_EMAIL": "seeder@example.test"}
MAX_BODY = 64 * 1024 * 1024


class GitHttpServer:
    def __init__(self, project_root: Path, *, user: str, password: str) -> None:
        self.project_root = Path(project_root)
        self.project_root.mkdir(parents=True, exist_ok=True)
        self.user = user
        self.password = password
        self.seen_users: list[str] = []
        self.refused = 0
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}/{path.lstrip('/')}"

    def create_repo(self, path: str, *, with_commit: bool = False) -> Path:
        """A bare repository under the project root, pushable over HTTP."""
        repo = self.project_root / path
        _git("init", "--quiet", "--bare", "--initial-branch=main", str(repo))
        _git("--git-dir", str(repo), "config", "http.receivepack", "true")
        if with_commit:
            seed = repo.with_name(repo.name + ".seed")
            _git("init", "--quiet", "--initial-branch=main", str(seed))
            (seed / "README.md").write_text("widgets\n")
            _git("-C", str(seed), "add", "README.md")
            _git("-C", str(seed), "commit", "--quiet", "-m", "first commit")
            _git("-C", str(seed), "push", "--quiet", str(repo), "main")
        return repo

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> "GitHttpServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- request handling ------------------------------------------------------------------

    def _authorised(self, header: str | None) -> str | None:
        if not header or not header.startswith("Basic "):
            return None
        try:
            user, _, password = base64.b64decode(header[6:]).decode("utf-8").partition(":")
        except ValueError:
            return None
        ok = hmac.compare_digest(user.encode(), self.user.encode()) and \
            hmac.compare_digest(password.encode(), self.password.encode())
        return user if ok else None


def _handler_for(server: GitHttpServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        timeout = REQUEST_TIMEOUT

        def do_GET(self) -> None:
            self._serve()

        def do_POST(self) -> None:
            self._serve()

        def log_message(self, format: str, *args: object) -> None:
            pass  # keep test output quiet

        def _serve(self) -> None:
            user = server._authorised(self.headers.get("Authorization"))
            if user is None:
                with server._lock:
                    server.refused += 1
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="gg test git"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            with server._lock:
                server.seen_users.append(user)
            body = self._body()
            path, _, query = self.path.partition("?")
            env = {
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "GIT_PROJECT_ROOT": str(server.project_root),
                "GIT_HTTP_EXPORT_ALL": "1",
                "GATEWAY_INTERFACE": "CGI/1.1",
                "REQUEST_METHOD": self.command,
                "PATH_INFO": path,
                "QUERY_STRING": query,
                "REMOTE_USER": user,
                "REMOTE_ADDR": self.client_address[0],
                "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                "CONTENT_LENGTH": str(len(body)),
            }
            if self.headers.get("Content-Encoding"):
                env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
            if self.headers.get("Git-Protocol"):
                env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
            try:
                result = subprocess.run(["git", "http-backend"], input=body, env=env,
                                        capture_output=True, timeout=REQUEST_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.send_error(504, "git http-backend timed out")
                return
            self._reply(result.stdout)

        def _body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                chunks = []
                total = 0
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                    if size == 0:
                        while self.rfile.readline().strip():
                            pass
                        return b"".join(chunks)
                    total += size
                    if total > MAX_BODY:
                        raise ValueError("request body too large")
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(min(length, MAX_BODY)) if length else b""

        def _reply(self, cgi_output: bytes) -> None:
            head, _, payload = cgi_output.partition(b"\r\n\r\n")
            if not _:
                head, _, payload = cgi_output.partition(b"\n\n")
            status = 200
            headers: list[tuple[str, str]] = []
            for line in head.decode("latin-1").splitlines():
                name, _, value = line.partition(":")
                if name.lower() == "status":
                    status = int(value.strip().split()[0])
                elif name:
                    headers.append((name.strip(), value.strip()))
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return Handler


def _git(*args: str) -> None:
    subprocess.run(["git", *args], check=True, capture_output=True, timeout=30,
                   env={**os.environ, **IDENTITY, "GIT_TERMINAL_PROMPT": "0"})
