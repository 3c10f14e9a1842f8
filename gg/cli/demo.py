"""``gg demo``: an embedded control plane, two local runners, a handful of flights."""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import typer

from gg.domain.flights import Stage

DEMO_FLIGHTS = [
    ["echo hello from $(hostname) on attempt $GG_ATTEMPT"],
    ["python3", "-c", "print(sum(range(10**6)))"],
    ["sleep 1; echo slept a second"],
    ["uname -sm"],
    ["sh -c 'echo this one fails >&2; exit 3'"],
    ["ls -la ."],
]


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)


def demo(
    exit_: bool = typer.Option(None, "--exit/--stay",
                               help="Stop when the flights have landed (default when not on a terminal)."),
) -> None:
    """See gg work: a control plane on SQLite in a temporary folder, two runners, six flights."""
    from rich.live import Live

    from gg.client import Client
    from gg.launch import LocalRunner, LocalServer, free_port, sign_in

    stay = sys.stdin.isatty() if exit_ is None else not exit_
    _stop_on_signals()  # a closed terminal or a kill stops the demo's processes too
    root = Path(tempfile.mkdtemp(prefix="gg-demo-"))
    config_dir = root / "config"
    server = LocalServer(root / "data", free_port(), log=root / "server.log")
    runners: list[LocalRunner] = []
    try:
        server.start()
        sign_in(config_dir, server.url, server.owner_token())
        for i in (1, 2):
            runners.append(LocalRunner(f"demo-{i}", server.url, root / f"runner-{i}", config_dir,
                                       labels="demo=yes", log=root / f"runner-{i}.log").start())
        api = Client(server.url, server.owner_token())
        ids = [api.open_flight({"command": cmd}).id for cmd in DEMO_FLIGHTS]
        with Live(_table(api, ids), refresh_per_second=8, transient=False) as live:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                rows = _rows(api, ids)
                live.update(_render(rows))
                if all(Stage(r["stage"]).final for r in rows):
                    break
                api.facts(ids[-1], wait=0.25)  # a short long-poll doubles as the refresh pause
        typer.echo(next_steps(server.url, config_dir, ids[0], root, stay))
        if stay:
            typer.echo("The control plane and runners keep running; Ctrl-C here stops them.")
            while True:
                time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        for runner in runners:
            runner.stop()
        server.stop()


def next_steps(url: str, config_dir: Path, flight: str, root: Path, stay: bool) -> str:
    """What to type next; when the demo stops by itself (not on a terminal, or --exit), it
    says so, since the commands need the control plane it stops."""
    lines = [
        "",
        "Six flights flew on two runners. What to type next (in another terminal):",
        "",
        f"  export GG_SERVER={url} GG_CONFIG_DIR={config_dir}",
        *(f"  {command:<30}# {what}" for command, what in (
            ("gg flights", "every flight, and why any waits"),
            (f"gg show {flight}", "one flight: output, facts, attempts"),
            ("gg fly --wait -- echo hi", "open one and follow it"),
            ("gg runners", "the fleet: state, liveness, health"),
            ("gg events", "the audit feed"))),
        "",
        f"Everything lives in {root} (server log, runner logs, the SQLite store).",
    ]
    if not stay:
        lines.append("The demo stops its control plane and runners now (not on a terminal, or "
                     "--exit): run gg demo --stay to keep them up for these commands.")
    return "\n".join(lines)


def _rows(api, ids: list[str]) -> list[dict]:
    by_id = {f.id: f.model_dump(mode="json") for f in api.flights(limit=50)}
    return [by_id[i] for i in ids if i in by_id]


def _table(api, ids):
    return _render(_rows(api, ids))


def _render(rows: list[dict]):
    from gg.cli.context import table

    t = table("FLIGHT", "STAGE", "RUNNER", "EXIT", "COMMAND")
    colour = {Stage.LANDED.value: "green", Stage.FAILED.value: "red",
              Stage.FLYING.value: "yellow", Stage.READY.value: "cyan"}
    for f in rows:
        stage = f["stage"]
        t.add_row(f["id"], f"[{colour.get(stage, 'white')}]{stage}[/]", f.get("runner_name") or "-",
                  "-" if f["exit_code"] is None else str(f["exit_code"]), " ".join(f["command"])[:60])
    return t


def _stop_on_signals() -> None:
    """SIGTERM and SIGHUP stop the demo as Ctrl-C does: the ``finally`` that stops the control
    plane and the runners runs (they live in their own sessions, so nothing else would)."""
    import signal

    def stop(signum, frame):
        raise KeyboardInterrupt

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stop)
