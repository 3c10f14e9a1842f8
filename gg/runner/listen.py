"""The HTTP API a pull-mode runner serves (docs/runner-modes.md); it opens no connection.

``GET /v1/pull/key`` (anyone): the runner's public key, its answer signed over the asker's
nonce, so the asker learns that this process holds the private half. Every other path needs
a request signed by the control plane's key for this runner's key fingerprint
(gg.domain.pull: a request signed for another runner is not this one's): ``POST /v1/pull/attach`` pins
that key (the first attach pins the key it carries; after that only the pinned key may
attach again), ``POST /v1/pull/poll`` and ``POST /v1/pull/deliver`` are one poll. A request
that is unsigned, signed by another key, stale or replayed is answered 401 and changes
nothing. Every answer, a refusal included, is signed with the runner's key over its status,
the request's nonce, a timestamp and its body. Every answer is written to the sent log: in
pull mode, what the runner sends is what it answers.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pydantic import ValidationError

from gg import __version__, keys
from gg.api.pull import AttachRunner, Delivery, PollAsk
from gg.domain import pull as rules
from gg.error_codes import ErrorCode
from gg.runner.pull import PullRunner

MAX_BODY = 16 * 1024 * 1024


class Refused(Exception):
    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


class Listener:
    """Serves a :class:`PullRunner` on ``host:port`` until :meth:`close`."""

    def __init__(self, runner: PullRunner, host: str, port: int):
        self.runner = runner
        self.nonces = rules.Nonces(runner.settings.pull_signature_skew)
        # Nonces live in memory: none from before are known. Stamps are signed to the
        # millisecond (rounded), so the start is too (floored): a request signed in this
        # runner's first millisecond is not mistaken for one from before it started.
        self.started_at = math.floor(time.time() * 1000) / 1000
        self.nonce_lock = threading.Lock()
        listener = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            server_version = f"gg-runner/{__version__}"

            def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
                listener.handle(self, "GET")

            def do_POST(self) -> None:  # noqa: N802
                listener.handle(self, "POST")

            def log_message(self, format: str, *args) -> None:  # quiet: the runner says
                pass

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, name="listen",
                                       daemon=True)

    def start(self) -> None:
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # -- one request ----------------------------------------------------------------------

    def handle(self, request: BaseHTTPRequestHandler, method: str) -> None:
        path = request.path.split("?", 1)[0]
        nonce = request.headers.get(rules.NONCE_HEADER, "")
        try:
            length = int(request.headers.get("content-length") or 0)
            if length < 0 or length > MAX_BODY:
                raise Refused(413, ErrorCode.TOO_LARGE, "the request body is too large")
            body = request.rfile.read(length) if length else b""
            status, answer = self.route(method, path, request.headers, body)
        except Refused as exc:
            status, answer = exc.status, {"error": {"code": exc.code, "message": exc.message}}
        except Exception as exc:  # one bad request must not take the runner down
            status, answer = 500, {"error": {"code": ErrorCode.ERROR,
                                             "message": f"{type(exc).__name__}"}}
        self.answer(request, status, answer, nonce, path)

    def answer(self, request: BaseHTTPRequestHandler, status: int, answer: dict, nonce: str,
               path: str) -> None:
        payload = json.dumps(answer, default=str).encode()
        stamp = f"{time.time():.3f}"
        signature = keys.sign(self.runner.key, rules.answer_message(status, nonce, stamp, payload))
        self.runner.sent.record("ANSWER", path, {"status": status}, answer)
        request.send_response(status)
        request.send_header("content-type", "application/json")
        request.send_header("content-length", str(len(payload)))
        request.send_header(rules.TIMESTAMP_HEADER, stamp)
        request.send_header(rules.SIGNATURE_HEADER, signature)
        request.end_headers()
        request.wfile.write(payload)

    def route(self, method: str, path: str, headers, body: bytes) -> tuple[int, dict]:
        runner = self.runner
        if method == "GET" and path == rules.KEY_PATH:
            return 200, {"public_key": runner.public_key, "fingerprint": runner.fingerprint,
                         "version": __version__}
        if method != "POST" or path not in (rules.ATTACH_PATH, rules.POLL_PATH,
                                            rules.DELIVER_PATH):
            raise Refused(404, ErrorCode.NOT_FOUND, "no such path")
        if path == rules.ATTACH_PATH:
            ask = _parse(AttachRunner, body)
            # The first attach pins the key it carries (and must be signed by it); after
            # that only the pinned key may attach again.
            self.verify(method, path, headers, body, runner.pinned() or ask.control_key)
            return 200, {"control_key_fingerprint": runner.pin(ask.control_key)}
        pinned = runner.pinned()
        if pinned is None:
            raise Refused(401, ErrorCode.UNAUTHORIZED, "this runner is not attached yet")
        self.verify(method, path, headers, body, pinned)
        if runner.said_goodbye.is_set():  # it said goodbye: not checked in again on its way out
            raise Refused(409, "runner_stopping", "this runner is stopping")
        if path == rules.POLL_PATH:
            return 200, runner.poll(_parse(PollAsk, body))
        return 200, runner.deliver(_parse(Delivery, body))

    def verify(self, method: str, path: str, headers, body: bytes, key: str) -> None:
        """Signed by ``key`` over this request, for this runner, fresh, and never seen
        before; else 401."""
        stamp = headers.get(rules.TIMESTAMP_HEADER, "")
        nonce = headers.get(rules.NONCE_HEADER, "")
        signature = headers.get(rules.SIGNATURE_HEADER, "")
        now = time.time()
        if not (stamp and nonce and signature):
            raise Refused(401, ErrorCode.UNAUTHORIZED, "the request is not signed")
        if not keys.verify(key, rules.request_message(self.runner.fingerprint, method, path,
                                                      stamp, nonce, body), signature):
            raise Refused(401, ErrorCode.UNAUTHORIZED, "the request is not signed by the control "
                                               "plane's key this runner pinned, for this "
                                               "runner")
        if not rules.fresh(stamp, now, self.runner.settings.pull_signature_skew):
            raise Refused(401, ErrorCode.UNAUTHORIZED, "the request's timestamp is stale")
        if float(stamp) < self.started_at:  # its nonce could not be remembered: a replay?
            raise Refused(401, ErrorCode.UNAUTHORIZED, "the request was signed before this runner "
                                               "started")
        with self.nonce_lock:
            if not self.nonces.accept(nonce, now):
                raise Refused(401, ErrorCode.UNAUTHORIZED, "the request was replayed")


def _parse(model, body: bytes):
    try:
        return model.model_validate_json(body or b"{}")
    except ValidationError as exc:
        first: Mapping[str, Any] = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise Refused(400, ErrorCode.INVALID_REQUEST,
                      f"{where}: {first.get('msg', 'is not valid')}") from None


class ListeningRunner:
    """``gg runner up --listen``: serve until stopped, then finish or hand back its flights."""

    def __init__(self, runner: PullRunner):
        self.runner = runner

    def request_stop(self, reason: str | None = None) -> None:
        self.runner.request_stop(reason)

    def run(self) -> int:
        runner, options = self.runner, self.runner.options
        listener = Listener(runner, options.host, options.port)
        listener.start()
        pinned = runner.pinned()
        runner.say(f"runner {options.name} listens on http://{options.host}:{listener.port} "
                   f"and never dials out: {options.workers} worker(s); its key fingerprint is "
                   f"{runner.fingerprint}")
        if pinned is None:
            runner.say(f"not attached yet: an admin runs gg runner attach "
                       f"http://HOST:{listener.port} --name {options.name} "
                       f"--fingerprint {runner.fingerprint}")
        try:
            while not runner.stop.wait(0.5):
                if runner.retired and not runner.runs and not runner.relay.pending():
                    runner.say("this runner was retired by an admin; it exits and will not "
                               "come back")
                    return 1
            runner.shut_down()
            # What it handed back, and its goodbye, leave with the next polls: keep answering
            # while the grace lasts (a control plane that does not come lets its leases run out).
            if runner.pinned() is not None:
                runner.said_goodbye.wait(max(runner.options.grace, 1.0))
        finally:
            listener.close()
        runner.say("goodbye")
        return 0
