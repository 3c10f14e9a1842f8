"""``gg fleet apply|profiles|enroll|tokens|revoke``: fleet profiles and enrolment tokens."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Optional

import typer

from gg.api.enrolment import ProfileApplied, ProfileView
from gg.cli.airspace import AirspaceOption, airspace_dir
from gg.cli.context import CliError, ago, client, console, emit_json, table
from gg.cli.exits import Exit

ENV_ENROL_TOKEN = "GG_ENROL_TOKEN"
_REQUEST = "<request>: "

fleet_app = typer.Typer(help="Fleet profiles and enrolment of machines.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(fleet_app, name="fleet")


# -- profiles ---------------------------------------------------------------------------------


@fleet_app.command("apply")
def apply(name: str = typer.Argument(..., metavar="NAME", help="Profile: airspace/fleet/NAME.yaml."),
          airspace: Optional[Path] = AirspaceOption,
          json_: bool = typer.Option(False, "--json"),
          dry_run: bool = typer.Option(False, "--dry-run",
                                       help="Say what would apply at once and what would wait "
                                            "for a gate; change nothing.")) -> None:
    """Apply a fleet profile: what lets machines do less applies now, more waits for a gate."""
    from gg.airspace.errors import AirspaceError
    from gg.airspace.profiles import read_profile
    from gg.airspace.yamlfile import read_yaml
    from gg.refusals import InvalidAirspace

    path = airspace_dir(airspace) / "fleet" / f"{name}.yaml"
    if not path.is_file():
        raise CliError(f"{path} does not exist (is --airspace right?)", int(Exit.USAGE))
    try:
        doc = read_yaml(path)
    except AirspaceError as exc:
        raise CliError(str(exc), int(Exit.USAGE)) from None
    checked = read_profile(doc, name)
    if checked.errors:
        for error in checked.errors[:-1]:
            typer.echo(str(error), err=True)
        raise CliError(str(checked.errors[-1]), int(Exit.USAGE))
    try:
        answer = client().apply_profile(name, wire_profile(checked.unwrap().to_dict()),
                                        dry_run=dry_run)
    except InvalidAirspace as exc:
        if exc.message.startswith(_REQUEST):
            raise CliError(_located(exc.message, str(path), doc.value_lines),
                           int(Exit.USAGE)) from None
        raise
    if json_:
        emit_json(answer)
        return
    typer.echo("\n".join(apply_lines(answer)))


def dry_lines(answer: ProfileApplied) -> list[str]:
    """What an apply would do: the gate it would open is named by who may clear it (it was
    not opened, so it has no id to clear)."""
    name, version = answer.profile, answer.version
    if answer.unchanged:
        return [f"dry run: profile {name} is unchanged (version {version}); nothing would change"]
    lines = [f"dry run: profile {name} would become version {version}; nothing was changed"]
    if answer.applied_now:
        lines.append("  would apply at once:")
        lines += [f"    {d}" for d in answer.applied_now]
    if answer.waiting:
        who = answer.gate.who_may_clear if answer.gate else "an admin"
        lines.append(f"  would open a gate ({who} clears it) for:")
        lines += [f"    {d}" for d in answer.waiting]
    if not answer.applied_now and not answer.waiting:
        lines.append("  nothing differs from the profile in force")
    return lines


def wire_profile(stored: dict[str, Any]) -> dict[str, Any]:
    """A profile's stored form back in the shape its YAML file has (what the server reads)."""
    mapping = {k.replace("_", "-"): v for k, v in stored.items() if k != "name"}
    return mapping


def apply_lines(answer: ProfileApplied) -> list[str]:
    if answer.dry_run:
        return dry_lines(answer)
    name, version = answer.profile, answer.version
    gate = answer.gate
    if answer.unchanged:
        lines = [f"profile {name} is unchanged (version {version})"]
        if gate:
            lines.append(f"  still waiting behind gate {gate.id} "
                         f"({gate.who_may_clear} clears it: gg gate clear {gate.id})")
        return lines
    lines = [f"profile {name}: version {version} applied"]
    if answer.applied_now:
        lines.append("  applies now:")
        lines += [f"    {d}" for d in answer.applied_now]
    if answer.waiting:
        lines.append(f"  waits behind gate {gate.id} ({gate.who_may_clear} clears it: "
                     f"gg gate clear {gate.id}):" if gate else "  waits for a gate:")
        lines += [f"    {d}" for d in answer.waiting]
    if not answer.applied_now and not answer.waiting:
        lines.append("  nothing differs from the profile in force")
    return lines


def _located(message: str, path: str, lines: Any) -> str:
    """The server's ``<request>: key: problem`` pointed back at the file and line."""
    rest = message[len(_REQUEST):]
    key, sep, problem = rest.partition(": ")
    line = lines.get(key) if sep else None
    where = f"{path}:{line}" if line else path
    return f"{where}: {rest}"


@fleet_app.command("profiles")
def profiles(json_: bool = typer.Option(False, "--json")) -> None:
    """Each profile: version applied, version in force, pending gates, enrolled machines."""
    rows = client().profiles()
    if json_:
        emit_json(rows)
        return
    if not rows:
        typer.echo("no fleet profiles applied yet: gg fleet apply NAME")
        return
    t = table("PROFILE", "APPLIED", "IN FORCE", "ENVIRONMENT", "PENDING GATES", "ENROLLED")
    for p in rows:
        in_force = in_force_text(p)
        env = (p.in_force or {}).get("environment") or "-"
        gates = " ".join(g.id for g in p.pending_gates) or "-"
        online = sum(1 for r in p.enrolled if r.online)
        enrolled = f"{len(p.enrolled)} ({online} online)" if p.enrolled else "0"
        t.add_row(p.name, f"v{p.applied_version}", in_force, env, gates, enrolled)
    console().print(t)


def in_force_text(p: ProfileView) -> str:
    if p.in_force is None:
        return "none (gate open)" if p.pending_gates else "none"
    if p.in_force_version is None:
        text = "narrowed"
    else:
        text = f"v{p.in_force_version}"
    if p.narrowed_by:
        text += f" + narrowings of v{p.narrowed_by}"
    return text


# -- enrolment tokens -------------------------------------------------------------------------


@fleet_app.command("enroll")
def enroll(name: str = typer.Argument(..., metavar="PROFILE"),
           uses: int = typer.Option(1, "--uses", min=0, max=10_000,
                                    help="Machines it may enrol; 0: no limit until it expires."),
           ephemeral: bool = typer.Option(False, "--ephemeral",
                                          help="Each machine takes one flight, then is retired."),
           ttl: Optional[str] = typer.Option(None, "--ttl", metavar="DUR",
                                             help="Lifetime, e.g. 30m, 12h (default ENROL_TOKEN_TTL)."),
           owner: Optional[str] = typer.Option(None, "--owner", metavar="PERSON",
                                               help="The enrolled machines belong to PERSON."),
           ownership: Optional[str] = typer.Option(None, "--ownership", metavar="S",
                                                   help="organisation | open | claimed."),
           group: str = typer.Option("default", "--group", metavar="G",
                                     help="The runner group its machines join (made if absent)."),
           json_: bool = typer.Option(False, "--json")) -> None:
    """Mint an enrolment token for PROFILE (shown once)."""
    from gg.settings import parse_duration

    body: dict = {"profile": name, "uses": uses, "owner": owner, "ownership": ownership,
                  "ephemeral": ephemeral, "group": group}
    if ttl is not None:
        try:
            body["ttl"] = parse_duration(ttl)
        except ValueError as exc:
            raise CliError(f"--ttl: {exc}", int(Exit.USAGE)) from None
    if ownership is not None and ownership not in ("organisation", "open", "claimed"):
        raise CliError(f"--ownership must be organisation, open or claimed (got {ownership!r})",
                       int(Exit.USAGE))
    answer = client().mint_enrol_token(body)
    if json_:
        emit_json(answer)
        return
    uses_text = (f"{answer.uses} use{'s' if answer.uses != 1 else ''}" if answer.uses
                 else "any number of uses")
    if answer.ephemeral:
        uses_text += ", ephemeral (each machine takes one flight, then is retired)"
    typer.echo(f"enrolment token {answer.fingerprint} for profile {answer.profile}: "
               f"{uses_text}, expires {ago(answer.expires_at)}. Shown this once:")
    typer.echo(answer.token)
    typer.echo("On the machine: gg runner up --enrol-file FILE (or GG_ENROL_TOKEN=... gg runner up)",
               err=True)


@fleet_app.command("tokens")
def tokens(json_: bool = typer.Option(False, "--json")) -> None:
    """Enrolment tokens by fingerprint: active, expired, revoked or exhausted."""
    rows = client().enrol_tokens()
    if json_:
        emit_json(rows)
        return
    if not rows:
        typer.echo("no enrolment tokens: gg fleet enroll PROFILE")
        return
    t = table("FINGERPRINT", "PROFILE", "STATUS", "USES LEFT", "EXPIRES", "OWNERSHIP", "BY")
    now = time.time()
    for r in rows:
        owner = r.ownership or "(profile's)"
        if r.owner_name:
            owner += f" by {r.owner_name}"
        left = f"{r.uses_left}/{r.uses}" if r.uses_left is not None else "no limit"
        t.add_row(r.fingerprint, r.profile, r.status,
                  left + (" (ephemeral)" if r.ephemeral else ""),
                  ago(r.expires_at, now), owner, r.created_by or "-")
    console().print(t)


@fleet_app.command("revoke")
def revoke(fingerprint: str = typer.Argument(..., metavar="FINGERPRINT"),
           json_: bool = typer.Option(False, "--json")) -> None:
    """Revoke an enrolment token: no further machine can spend it."""
    row = client().revoke_enrol_token(fingerprint)
    if json_:
        emit_json(row)
        return
    typer.echo(f"enrolment token {row.fingerprint} is {row.status}")


def enrol_token(flag: Optional[str], file: Optional[Path]) -> Optional[str]:
    """The enrolment token for ``gg runner up``: --enrol, --enrol-file, then GG_ENROL_TOKEN."""
    if flag and file:
        raise CliError("give one of --enrol or --enrol-file", int(Exit.USAGE))
    token = flag
    if file is not None:
        try:
            token = file.read_text().strip()
        except OSError as exc:
            raise CliError(f"cannot read {file}: {exc.strerror}", int(Exit.USAGE)) from None
    token = token or os.environ.get(ENV_ENROL_TOKEN) or None
    if token is not None:
        token = token.strip()
        if not token.startswith("gge_"):
            raise CliError("that is not an enrolment token (they start with gge_)",
                           int(Exit.USAGE))
    return token


@fleet_app.command("delete")
def delete(name: str = typer.Argument(..., metavar="PROFILE"),
           json_: bool = typer.Option(False, "--json")) -> None:
    """Delete a fleet profile (admin); refused, naming them, while runners enrolled under it
    or redeemable enrolment tokens for it remain."""
    from gg.cli.context import removed

    removed(client().delete_profile(name), json_)
