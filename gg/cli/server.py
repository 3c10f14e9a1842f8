"""``gg server``: the control plane."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Optional

import typer

from gg.cli.context import CliError
from gg.cli.exits import Exit

server_app = typer.Typer(help="The control plane: start it, or look after its store.")


def register(app: typer.Typer) -> None:
    server_app.callback(invoke_without_command=True)(server)
    server_app.command("vacuum")(vacuum)
    server_app.command("backup")(backup)
    server_app.command("migrate")(migrate)
    from gg.cli.id_tokens import register_server

    register_server(server_app)  # rotate-signing-key
    server_app.command("rotate-key")(rotate_key)
    app.add_typer(server_app, name="server")


def _window(option: str, text: Optional[str]) -> Optional[float]:
    from gg.settings import parse_duration

    if text is None:
        return None
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise CliError(f"{option}: {exc}", Exit.USAGE) from None


def parse_listen(listen: str) -> tuple[str, int]:
    host, sep, port = listen.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise CliError(f"--listen takes HOST:PORT (got {listen!r})", Exit.USAGE)
    return host.strip("[]"), int(port)


def server(
    ctx: typer.Context,
    data_dir: Optional[Path] = typer.Option(None, "--data-dir", metavar="DIR",
                                            help="Where the store lives (default: platformdirs data dir)."),
    listen: str = typer.Option("127.0.0.1:8421", "--listen", metavar="HOST:PORT"),
    dev: bool = typer.Option(False, "--dev", help="Development mode: allows isolation none."),
    retain_flights: Optional[str] = typer.Option(
        None, "--retain-flights", metavar="DUR",
        help="Prune ended flights (with their facts and events) this long after they ended "
             "(default 90d, env GG_RETAIN_FLIGHTS; 0 keeps them for ever)."),
    retain_events: Optional[str] = typer.Option(
        None, "--retain-events", metavar="DUR",
        help="Prune events this much older (default 90d, env GG_RETAIN_EVENTS; 0: for ever)."),
    artifact_quota: Optional[str] = typer.Option(
        None, "--artifact-quota", metavar="SIZE",
        help="Bytes all flights' artifacts may take on this server, each content once (50G; "
             "env GG_ARTIFACT_QUOTA; default 0: no quota)."),
    tls_cert: Optional[Path] = typer.Option(None, "--tls-cert", metavar="FILE",
                                            help="Serve HTTPS with this certificate chain (PEM)."),
    tls_key: Optional[Path] = typer.Option(None, "--tls-key", metavar="FILE",
                                           help="The private key of --tls-cert (PEM)."),
    database: Optional[str] = typer.Option(
        None, "--database", metavar="URL",
        help="Keep the control plane in this PostgreSQL database (postgresql://...), shared "
             "by every replica given the same URL (env GG_DATABASE_URL; default: SQLite in "
             "the data dir)."),
) -> None:
    """Start the control plane (FastAPI on uvicorn; SQLite in WAL mode, or PostgreSQL)."""
    if ctx.invoked_subcommand is not None:
        return
    from gg import config
    from gg.server.ahead import front
    from gg.server.app import build, stopping
    from gg.server.connections import serve
    from gg.settings import Settings

    host, port = parse_listen(listen)
    tls = _tls(tls_cert, tls_key)
    directory = config.absolute(data_dir) if data_dir else config.data_dir()
    windows: dict[str, Any] = {name: value for name, value in (
        ("retain_flights", _window("--retain-flights", retain_flights)),
        ("retain_events", _window("--retain-events", retain_events))) if value is not None}
    if database is not None:
        windows["database_url"] = database
    if artifact_quota is not None:  # docs/work-graphs.md
        from gg.settings import parse_size

        try:
            windows["artifact_quota"] = parse_size(artifact_quota)
        except ValueError as exc:
            raise CliError(f"--artifact-quota: {exc}", Exit.USAGE) from None
    try:
        settings = Settings.from_env(dev=dev, **windows)
    except ValueError as exc:
        raise CliError(str(exc), Exit.USAGE) from None
    _check_database_url(settings.database_url)
    from gg.domain.pull import polls_too_slow

    too_slow = polls_too_slow(settings)  # pull-mode runners would stop flights it renews
    if too_slow is not None:
        raise CliError(too_slow, Exit.USAGE)
    os.umask(0o077)  # everything the server writes (store, WAL, tokens) is the owner's alone
    from gg.server.start_up import StartRefused, bound_malloc_arenas, check_port, hold_data_dir

    bound_malloc_arenas(settings.malloc_arenas)  # before the first thread (docs/server.md)

    try:  # nothing is created until the port and the data dir are this server's
        check_port(host, port)
        if not settings.database_url:
            hold_data_dir(directory)
    except StartRefused as exc:
        raise CliError(str(exc), Exit.CONFLICT) from None
    app, owner_token = _build(build, directory, settings)
    from gg import trees

    trees.record(directory)  # its store and the owner's token are hidden from every flight
    if app.state.secrets_unopened:
        print(f"gg: {app.state.secrets_unopened}", file=sys.stderr)
    if owner_token is not None:
        print(f"gg: first start: organisation created; the owner's token is in {owner_token} "
              "(mode 0600)", file=sys.stderr)
    scheme = "https" if tls else "http"
    where = (f"data in {_safe_url(settings.database_url)}" if settings.database_url
             else f"data in {directory}")
    print(f"gg: control plane on {scheme}://{host}:{port} ({where})", file=sys.stderr)
    serve(front(app), host, port, settings, on_stopping=lambda: stopping(app),
          say=lambda line: print(f"gg: {line}", file=sys.stderr), tls=tls)


def _check_database_url(url: str) -> None:
    if url and not url.startswith(("postgresql://", "postgres://")):
        raise CliError("--database takes a postgresql:// URL (without one the store is SQLite "
                       "in --data-dir)", Exit.USAGE)


def _safe_url(url: str) -> str:
    """The URL without its password, for messages."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    user = (parts.username or "") + ":***"
    return urlunsplit(parts._replace(netloc=user + "@" + netloc[-1]))


def _build(build, directory: Path, settings):
    """The app, or one sentence when its database cannot be reached."""
    if not settings.database_url:
        return build(directory, settings)
    import psycopg

    try:
        return build(directory, settings)
    except psycopg.OperationalError as exc:
        first = (str(exc).strip().splitlines() or ["no answer"])[0]
        raise CliError(f"cannot reach the database {_safe_url(settings.database_url)}: {first}",
                       Exit.UNREACHABLE) from None


def _tls(cert: Optional[Path], key: Optional[Path]) -> Optional[tuple[str, str]]:
    if cert is None and key is None:
        return None
    if cert is None or key is None:
        raise CliError("HTTPS needs both --tls-cert FILE and --tls-key FILE", Exit.USAGE)
    for flag, path in (("--tls-cert", cert), ("--tls-key", key)):
        if not path.is_file():
            raise CliError(f"{flag}: {path} is not a readable file", Exit.USAGE)
    import ssl

    try:  # a wrong pair is one sentence here, not a traceback from the event loop
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert, key)
    except (ssl.SSLError, OSError) as exc:
        raise CliError(f"--tls-cert and --tls-key do not load as a certificate and its key: "
                       f"{exc}", Exit.USAGE) from None
    return str(cert), str(key)


def backup(
    to: Path = typer.Option(..., "--to", metavar="FILE", help="The backup file to write."),
    data_dir: Optional[Path] = typer.Option(None, "--data-dir", metavar="DIR",
                                            help="The server's data dir (default: platformdirs "
                                                 "data dir)."),
) -> None:
    """Copy the store to FILE while the server runs (SQLite's online backup): a consistent
    snapshot, readable by gg server --data-dir once named gg.sqlite3 in a directory."""
    from gg import config
    from gg.server.vacuum import backup as copy

    directory = data_dir or config.data_dir()
    if to.exists():
        raise CliError(f"{to} exists already; give a new file", Exit.CONFLICT)
    if not to.parent.is_dir():
        raise CliError(f"there is no directory {to.parent} to write the backup in; make it "
                       "first", Exit.NOT_FOUND)
    try:
        size = copy(directory, to)
    except FileNotFoundError:
        raise CliError(f"there is no gg store in {directory}", Exit.NOT_FOUND) from None
    typer.echo(f"backed up {directory} to {to} ({size} bytes)")


def vacuum(
    data_dir: Optional[Path] = typer.Option(None, "--data-dir", metavar="DIR",
                                            help="The stopped server's data dir (default: "
                                                 "platformdirs data dir)."),
) -> None:
    """Compact the store's file (after pruning) while no server runs on it."""
    from gg import config
    from gg.server.vacuum import ServerRunning
    from gg.server.vacuum import vacuum as compact

    directory = data_dir or config.data_dir()
    try:
        before, after = compact(directory)
    except FileNotFoundError:
        raise CliError(f"there is no gg store in {directory}", Exit.NOT_FOUND) from None
    except ServerRunning:
        raise CliError(f"a gg server is running on {directory}; stop it, then vacuum",
                       Exit.CONFLICT) from None
    typer.echo(f"compacted {directory}: {before} bytes before, {after} bytes now")


def migrate(
    from_data_dir: Path = typer.Option(..., "--from-data-dir", metavar="DIR",
                                       help="The stopped server's data dir (its gg.sqlite3)."),
    to: str = typer.Option(..., "--to", metavar="URL",
                           help="An empty PostgreSQL database (postgresql://...)."),
) -> None:
    """Move a control plane from SQLite into an empty PostgreSQL database: every flight,
    event, person and runner (their tokens and credentials keep working). Then start each
    replica with --database URL. The SQLite file is left as it was. Text holding a NUL
    character (U+0000), which PostgreSQL cannot store, is copied as U+FFFD and said; a copy
    that fails leaves the database empty."""
    import psycopg

    from gg.server.vacuum import ServerRunning, TargetNotEmpty, move

    if not to.startswith(("postgresql://", "postgres://")):
        raise CliError("--to takes a postgresql:// URL", Exit.USAGE)
    try:
        copied = move(from_data_dir, to)
    except FileNotFoundError:
        raise CliError(f"there is no gg store in {from_data_dir}", Exit.NOT_FOUND) from None
    except ServerRunning:
        raise CliError(f"a gg server is running on {from_data_dir}; stop it first, so that "
                       "nothing is written after the copy", Exit.CONFLICT) from None
    except TargetNotEmpty:
        raise CliError(f"the database {_safe_url(to)} is not empty; give an empty one (gg "
                       "never writes over another store)", Exit.CONFLICT) from None
    except psycopg.OperationalError as exc:
        first = (str(exc).strip().splitlines() or ["no answer"])[0]
        raise CliError(f"cannot reach the database {_safe_url(to)}: {first}",
                       Exit.UNREACHABLE) from None
    except psycopg.Error as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise CliError(f"the copy into {_safe_url(to)} failed: {first}; nothing was kept there "
                       "(it is empty again) and the SQLite store is as it was",
                       Exit.FAILURE) from None
    if copied.nul_replaced:
        where = ", ".join(f"{column} ({n})" for column, n in sorted(copied.nul_replaced.items()))
        n = sum(copied.nul_replaced.values())
        typer.echo(f"{n} text value{'s' if n != 1 else ''} held a NUL character (U+0000), "
                   "which PostgreSQL's text cannot hold: each was copied with U+FFFD in its "
                   f"place: {where}")
    total = sum(copied.rows.values())
    typer.echo(f"copied {total} rows in {len(copied.rows)} tables from {from_data_dir} to "
               f"{_safe_url(to)}; start the server with --database URL")


def rotate_key(
    data_dir: Optional[Path] = typer.Option(None, "--data-dir", metavar="DIR",
                                            help="The server's data dir (default: platformdirs "
                                                 "data dir)."),
    database: Optional[str] = typer.Option(
        None, "--database", metavar="URL",
        help="The replicas' PostgreSQL database (env GG_DATABASE_URL; default: SQLite in the "
             "data dir)."),
) -> None:
    """Make a new secrets key and re-seal every secret under it in one transaction, while
    servers run (docs/jobs.md). The key file is GG_SECRETS_KEY_FILE, else secrets.key in the
    data dir; the previous key is kept beside it as secrets.key.old."""
    from gg import config
    from gg.server.rotate_key import SealingError, rotate
    from gg.settings import Settings

    directory = config.absolute(data_dir) if data_dir else config.data_dir()
    try:
        overrides: dict[str, Any] = {"database_url": database} if database else {}
        settings = Settings.from_env(**overrides)
    except ValueError as exc:
        raise CliError(str(exc), Exit.USAGE) from None
    _check_database_url(settings.database_url)
    os.umask(0o077)
    try:
        path, key_id, count = rotate(directory, settings.database_url,
                                     settings.secrets_key_file)
    except FileNotFoundError:
        raise CliError(f"there is no gg store in {directory}", Exit.NOT_FOUND) from None
    except SealingError as exc:
        raise CliError(f"{exc}; nothing was changed", Exit.FAILURE) from None
    typer.echo(f"new secrets key {key_id} in {path}: {count} secret{'s' if count != 1 else ''} "
               f"re-sealed under it in one transaction; the previous key is kept in {path}.old "
               "(a backup taken before now opens with it)")
