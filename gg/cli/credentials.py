"""``gg credential add|remove`` (on the runner's machine) and ``gg credentials`` (anyone).

``gg credential add`` keeps the secret in this machine's runner state directory
(``GG_STATE_DIR``), encrypted, and tells the control plane only its reference (kind, ref,
fingerprint), signed in as the runner itself, so the runner must be registered or enrolled
first. The secret is read from ``--from-file`` or standard input, never from an argument
(an argument is visible to every user of the machine in the process list).
"""

from __future__ import annotations

import getpass
import sys
import time
from pathlib import Path
from typing import Optional

import typer

from gg import config
from gg.cli.context import CliError, ago, client, console, emit_json, plain, table
from gg.cli.exits import Exit
from gg.client import RETRY_CALL

credential_app = typer.Typer(help="Secrets this runner keeps for flights (never sent anywhere).",
                             no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(credential_app, name="credential")
    app.command("credentials")(list_credentials)


def _runner_client():
    """The control plane, signed in as this machine's runner (not as a person)."""
    from gg.client import Client
    from gg.runner.state import StateDir

    state = StateDir(config.state_dir())
    reg = state.registration()
    if reg is None:
        raise CliError(f"no runner is registered or enrolled in {state.path} yet: start it once "
                       "(gg runner up, or gg runner up --enrol TOKEN), then add the credential; "
                       "set GG_STATE_DIR if the runner keeps its state elsewhere",
                       int(Exit.USAGE))
    return state, Client(reg.server, reg.credential)


def _read_secret(from_file: Optional[Path]) -> str:
    if from_file is not None:
        try:
            return from_file.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise CliError(f"cannot read {from_file}: {getattr(exc, 'strerror', None) or exc}",
                           int(Exit.USAGE)) from None
    if sys.stdin.isatty():
        return getpass.getpass("secret (not shown): ")
    return sys.stdin.read(64 * 1024)


@credential_app.command("add")
def add(repo: Optional[str] = typer.Option(None, "--repo", metavar="SLUG",
                                           help="A repository slug or URL."),
        name: Optional[str] = typer.Option(None, "--name", metavar="NAME",
                                           help="A named secret (not for git)."),
        from_file: Optional[Path] = typer.Option(None, "--from-file", metavar="F",
                                                 help="Read the secret from F (else stdin)."),
        json_: bool = typer.Option(False, "--json")) -> None:
    """Keep a secret on this runner's machine; the control plane learns only its name."""
    from gg.runner.credentials import CredentialError, CredentialStore

    if (repo is None) == (name is None):
        raise CliError("give exactly one of --repo SLUG or --name NAME", int(Exit.USAGE))
    state, api = _runner_client()
    secret = _read_secret(from_file)
    store = CredentialStore(state.path)
    try:
        ref = store.add(repo=repo, name=name, secret=secret)
        refs = [r.as_dict() for r in store.refs()]
    except CredentialError as exc:
        raise CliError(str(exc), int(Exit.USAGE)) from None
    del secret
    answer = api.set_credential_refs(refs, retry_for=RETRY_CALL)
    if json_:
        emit_json({"added": ref.as_dict(), "registered": plain(answer.refs)})
        return
    typer.echo(f"credential {ref.kind} {ref.ref} ({ref.fingerprint}) kept in {state.path} "
               "and registered with the control plane (its name only)")


@credential_app.command("remove")
def remove(repo: Optional[str] = typer.Option(None, "--repo", metavar="SLUG"),
           name: Optional[str] = typer.Option(None, "--name", metavar="NAME")) -> None:
    """Forget a secret on this machine, and its reference on the control plane."""
    from gg.runner.credentials import CredentialError, CredentialStore

    state, api = _runner_client()
    store = CredentialStore(state.path)
    try:
        removed = store.remove(repo=repo, name=name)
        refs = [r.as_dict() for r in store.refs()]
    except CredentialError as exc:
        raise CliError(str(exc), int(Exit.USAGE)) from None
    api.set_credential_refs(refs, retry_for=RETRY_CALL)
    what = f"--repo {repo}" if repo else f"--name {name}"
    if not removed:
        raise CliError(f"this runner holds no credential {what}", int(Exit.NOT_FOUND))
    typer.echo(f"credential {what} removed")


def list_credentials(json_: bool = typer.Option(False, "--json")) -> None:
    """Credential references every runner registered (never a secret)."""
    rows = client().credential_refs()
    if json_:
        emit_json(rows)
        return
    if not rows:
        typer.echo("no credentials registered: on a runner's machine, gg credential add")
        return
    t = table("RUNNER", "KIND", "REF", "FINGERPRINT", "ADDED")
    now = time.time()
    for r in rows:
        t.add_row(r.runner_name, r.kind, r.ref, r.fingerprint, _added(r.added_at, now))
    console().print(t)


def _added(text: str | None, now: float) -> str:
    from datetime import datetime

    if not text:
        return "-"
    try:
        return ago(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp(), now)
    except ValueError:
        return text
