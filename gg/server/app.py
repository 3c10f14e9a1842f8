"""The control plane's ASGI app: ``create_app(settings, store, clock) -> FastAPI``."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Callable

from fastapi import FastAPI

from gg import __version__, web
from gg.control import leases as lease_ops
from gg.control import machine_console
from gg.control import secrets as secret_ops
from gg.control.core import Core
from gg.control.people import bootstrap
from gg.control.sealing import KEY_FILE
from gg.control.wiring import wired
from gg.server import ahead, claims, errors, lease_calls, liveness, metrics, open_call
from gg.server.dispatch import Dispatcher, Watch
from gg.server.duties import Duties
from gg.server.hooks import Outbox
from gg.server.html_guard import HtmlGuard
from gg.server.json_body import JsonRoute
from gg.server.limits import BodyLimit
from gg.server.pull import Poller
from gg.server.relay import LocalRelay
from gg.server.replicas import Replicas
from gg.server.routes import (
    admin,
    approvals,
    artifacts,
    consoles,
    fleet,
    flights,
    gates,
    graphs,
    groups,
    hooks,
    id_tokens,
    people,
    placement,
    pools,
    pull,
    runners,
    secrets,
    services,
)
from gg.server.source_rate import SourceRate
from gg.settings import Settings
from gg.store import Store, hold_data_dir, open_store


def create_app(settings: Settings, store: Store, *, clock: Callable[[], float] = time.time,
               data_dir: Path | None = None) -> FastAPI:
    errors.quiet_framework_warnings()
    if data_dir is not None and not settings.secrets_key_file:  # secrets.key in the data dir
        settings = replace(settings, secrets_key_file=str(Path(data_dir) / KEY_FILE))
    # every feature's gate hooks and providers, registered here (gg.control.wiring)
    core = Core(store=store, settings=settings, clock=clock, wiring=wired())
    core.started_at = core.now()
    if any(env.meaning for env in store.environments()):
        core.verdicts.warm()  # a meaning worker, started off the loop before the first check-in
    owner_token_path = bootstrap(core, data_dir) if data_dir is not None else None
    lease_ops.honour_after_restart(core)
    if not Replicas.wanted(core):  # replicas: the others may still relay the open ones
        machine_console.close_left_open(core)  # their relay ended with the last process
    app = FastAPI(title="gg control plane", version=__version__,
                  description="Runs work on a fleet of machines an organisation controls.",
                  lifespan=liveness.lifespan,
                  # no Swagger UI or ReDoc page: both load a CDN's script into the console's
                  # origin; the schema is /openapi.json (docs/server.md)
                  docs_url=None, redoc_url=None)
    app.router.route_class = JsonRoute  # any route added on the app reads bodies strictly too
    app.state.core = core
    app.state.owner_token_path = owner_token_path  # where bootstrap wrote the owner's token
    # uploads spooled on this replica's own disk (docs/work-graphs.md, "Artifacts")
    app.state.artifact_spool = Path(data_dir) / "spool" if data_dir is not None else None
    # stored secrets this replica's key file does not open: said once at start (gg server)
    app.state.secrets_unopened = (secret_ops.unopened(store, Path(settings.secrets_key_file))
                                  if settings.secrets_key_file else None)
    app.state.dispatcher = Dispatcher(core)
    app.state.watch = Watch(core)
    app.state.outbox = Outbox(core)
    app.state.poller = Poller(core)  # pull-mode runners (docs/runner-modes.md)
    app.state.relay = LocalRelay()  # consoles' two sides meet here (docs/console.md)
    app.state.nonce_rate = SourceRate(settings.key_nonce_rate)  # anonymous asks, per address
    app.state.duties = app.state.outbox.duties = app.state.poller.duties = Duties(core)
    if Replicas.wanted(core):  # a store shared by replicas: wake-ups cross them
        app.state.replicas = Replicas(core, app.state.dispatcher)
        app.state.relay = app.state.replicas.relay  # and so do consoles' two sides
    errors.install(app)
    errors.document(app)
    # Answered ahead of the whole stack (below), and documented by routes running the same
    # bodies: a claim (a parked one holds no framework frames), the lease calls every flight
    # makes and a person's open of a flight (the framework cost more than their use cases).
    calls = (claims.CLAIM, *lease_calls.CALLS, open_call.OPEN)
    ahead.document(app.router, calls, responses=errors.REFUSALS)
    for module in (people, runners, flights, gates, fleet, admin, placement, pools, hooks,
                   approvals, services, groups, pull, consoles, id_tokens, graphs, secrets,
                   artifacts):
        app.include_router(module.router, responses=errors.REFUSALS)
    placement.install(app)
    web.install(app)  # the console's pages at / and /ui/ (docs/web-console.md)
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(HtmlGuard)  # every HTML answer: the console's CSP and frame headers
    metrics.install(app)  # outermost: counts every answer, 413s included
    # built now, so nothing adds a middleware after this
    app.middleware_stack = ahead.Ahead(app, app.build_middleware_stack(), calls)
    return app


def stopping(app: FastAPI) -> None:
    """The server is stopping: answer parked claims ("nothing for you") and long polls now,
    so that no connection holds the shutdown up."""
    app.state.dispatcher.release_all()
    app.state.watch.release_all()
    app.state.relay.close_all()


def build(data_dir: Path, settings: Settings) -> tuple[FastAPI, Path | None]:
    store = open_store(data_dir, settings.database_url, pool_size=settings.database_pool,
                       hold_timeout=settings.database_hold_timeout)
    app = create_app(settings, store, data_dir=data_dir)
    # Held while the process lives: `gg server vacuum` refuses while any server holds it.
    app.state.data_dir_lock = hold_data_dir(data_dir)
    return app, app.state.owner_token_path
