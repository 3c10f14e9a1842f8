"""What a runner or maintainer says about reaching the control plane.

The client (``gg.client``) decides every retry; this log only tells the operator: the first
failure of an episode at once, with the delay before the next try; a different failure when
the reason changes (the server went from refusing connections to answering 503); and, once an
answer comes again, that it did and after how many failed attempts. The same failure retried
again and again is said once, so a long outage is a few lines, not thousands. Every way of
not reaching the same control plane is one reason: a server that stops drops the connection
it was answering on (a protocol error), then refuses new ones; that is one outage, said once.
"""

from __future__ import annotations

import threading
from typing import Callable


class ConnectionLog:
    def __init__(self, server: str, say: Callable[[str], None]):
        self.server = server
        self.say = say
        self._lock = threading.Lock()
        self._said: str | None = None  # the failure last said, None while answers come
        self._failures = 0

    def retry(self, failure: Exception, pause: float) -> None:
        sentence = getattr(failure, "message", None) or str(failure)
        where = getattr(failure, "where", None)
        reason = sentence if where is None else f"unreachable at {where}"
        with self._lock:
            self._failures += 1
            if reason == self._said:
                return
            self._said = reason
            count = self._failures
        self.say(f"{sentence}; retrying in {pause:.1f}s"
                 + (f" ({count} failed attempts so far)" if count > 1 else "")
                 + "; said again only if the failure changes")

    def reached(self) -> None:
        if self._said is None:  # the common case: no lock, nothing to say
            return
        with self._lock:
            if self._said is None:
                return
            failures, self._said, self._failures = self._failures, None, 0
        self.say(f"reached the control plane at {self.server} again after {failures} failed "
                 f"attempt{'s' if failures != 1 else ''}")
