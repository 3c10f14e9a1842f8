"""What a parked claim leaves for the garbage collector to walk, on the path ``gg server``
serves (uvicorn, the connection gate, :func:`gg.server.ahead.front`, the dispatcher): with
10,000 runners parked, a full collection walks every one of these objects while the loop
stands still (docs/performance.md, "Fewer objects a parked claim").

The server runs in this process, so that its objects can be counted; the claims come from a
separate process, so that the clients' own objects are not."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import threading
from collections import Counter

import httpx

from gg.launch import free_port
from gg.server.ahead import front
from gg.server.app import create_app
from gg.server.connections import BoundedServer, Gate, server_config
from gg.settings import Settings
from gg.store import open_store

from support import http_runner, wait_until

CLAIMS = 40
# per parked claim, its connection included: 47 or so now; 62 while FastAPI's and
# Starlette's entry frames, the request body's model and a timer of its own were held too
AT_MOST = 52
PARK = r"""
import json, socket, sys
port, credentials = int(sys.argv[1]), json.loads(sys.argv[2])
body = json.dumps({"wait": 30, "free_slots": 1, "readings": {"cpu_percent": 1.0}}).encode()
held = []
for credential in credentials:
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /v1/runner/claim HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
              b"authorization: Bearer " + credential.encode() + b"\r\ncontent-length: "
              + str(len(body)).encode() + b"\r\n\r\n" + body)
    held.append(s)
print("sent", flush=True)
sys.stdin.read()  # parked until the test closes our stdin
"""


def _tracked() -> Counter:
    gc.collect()
    return Counter(getattr(type(o), "__qualname__", "?") if type(o).__name__ != "coroutine"
                   else "coroutine " + o.__qualname__ for o in gc.get_objects())


def test_a_parked_claim_holds_few_objects_and_no_framework_frame_body_or_timer_of_its_own(
        tmp_path):
    settings = Settings(dev=True, claim_wait=30, claim_wait_spread=0)  # one end for all
    app = create_app(settings, open_store(tmp_path), data_dir=tmp_path)
    port = free_port()
    gate = Gate(1000, settings.header_timeout, per_source=1000,
                body_timeout=settings.body_timeout)
    server = BoundedServer(server_config(front(app), "127.0.0.1", port, settings, gate), gate,
                           lambda: app.state.dispatcher.release_all())
    serving = threading.Thread(target=server.run, daemon=True)
    serving.start()
    parking = None
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
            wait_until(lambda: server.started, timeout=30, what="the server to start")
            owner = (tmp_path / "owner-token").read_text().strip()
            credentials = [http_runner(http, f"r{i}", owner) for i in range(CLAIMS)]
        dispatcher = app.state.dispatcher
        before = _tracked()
        parking = subprocess.Popen([sys.executable, "-c", PARK, str(port),
                                    json.dumps(credentials)],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        wait_until(lambda: dispatcher.parked_count == CLAIMS, timeout=60,
                   what="every claim parked")
        held = _tracked() - before
        per_claim = sum(held.values()) / CLAIMS
        assert per_claim <= AT_MOST, (per_claim, held.most_common(30))
        # nothing of the framework's entry, the request body's model, or a timer a claim
        assert held["coroutine FastAPI.__call__"] == 0 and held["coroutine Starlette.__call__"] == 0
        assert held["Claim"] == 0, held.most_common(30)
        assert held["TimerHandle"] < CLAIMS / 4, held.most_common(30)  # one a tick
    finally:
        if parking is not None:
            parking.stdin.close()
            parking.wait(timeout=30)
        server.should_exit = True
        serving.join(timeout=30)
