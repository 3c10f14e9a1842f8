"""Socket activation: a service generation's port held before it starts (docs/services.md,
"Socket activation").

With ``--socket-activation`` the runner itself binds and listens on ``127.0.0.1:$PORT`` before
the generation starts and hands it the listening socket, the way systemd does
(``sd_listen_fds(3)``): the socket is fd 3, ``LISTEN_FDS=1``, ``LISTEN_FDNAMES=service``, and
``LISTEN_PID`` is the pid of the command itself. No other process can take the port at any
moment, whatever it learns or guesses of it.

The socket rides with the start to the runner's launcher (``SCM_RIGHTS``), which puts it right
after the descriptors the sandbox reads (fd 3 for a plain command, fd 4 after the environment
bwrap reads on 3); bubblewrap and setpriv leave an inherited descriptor open. The last step
before the command is a shell (:func:`wrap`) that moves it to fd 3 and sets ``LISTEN_PID`` to
its own pid, which the command keeps as it execs: so the variable is right inside a pid
namespace too, and it is set after the drop to the flight identity. A socket keeps the
network namespace it was made in: under ``egress: none`` the generation accepts on the
runner's loopback through it and still cannot dial out.
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Mapping

from gg.runner.flight_env import SHELL
from gg.runner.service_ports import generation_port

LISTEN_FDS_START = 3  # sd_listen_fds(3)
NAME = "service"  # LISTEN_FDNAMES
BACKLOG = 256
TRIES = 8  # ports drawn when one is taken between the draw and the bind


def environment() -> dict[str, str]:
    """The protocol's variables but ``LISTEN_PID`` (set by :func:`wrap`, once the pid is
    the command's)."""
    return {"LISTEN_FDS": "1", "LISTEN_FDNAMES": NAME}


def wrap(command: list[str], at: int) -> list[str]:
    """``command`` started by a shell that moves the socket from fd ``at`` to fd 3 and sets
    ``LISTEN_PID`` to its pid, which ``exec`` gives the command."""
    move = "" if at == LISTEN_FDS_START else f" {LISTEN_FDS_START}<&{at} {at}<&-"
    return [SHELL, "-c", f'LISTEN_PID=$$; export LISTEN_PID; exec "$@"{move}', "sh", *command]


def listen(environ: Mapping[str, str] | None = None) -> socket.socket:
    """A socket listening on ``127.0.0.1`` at a port drawn as any generation's ``$PORT``
    (gg.runner.service_ports.generation_port), inheritable by nobody but whom it is handed
    to. Never SO_REUSEPORT, so nothing can join it."""
    for _ in range(TRIES):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.bind(("127.0.0.1", generation_port(environ)))
            sock.listen(BACKLOG)
            return sock
        except OSError as exc:
            sock.close()
            if exc.errno != errno.EADDRINUSE:
                raise
    raise OSError(errno.EADDRINUSE, "no port could be listened on for the generation")
