"""``gg install runner|maintainer|server`` and ``gg uninstall``: gg as a systemd service.

The unit runs gg as it was started here (this interpreter and this gg, or this ``.pyz``),
restarts it on failure, and gives it its own state and config directories (systemd's
``StateDirectory=`` and ``ConfigurationDirectory=``, exported as ``GG_STATE_DIR`` /
``GG_CONFIG_DIR``, or the server's ``--data-dir``). ``--print`` shows the unit and writes
nothing; ``--root DIR`` writes it under DIR (an image being built, a test) and starts
nothing; otherwise the unit is written where systemd reads it and, only when systemd is
running on this host, enabled and started. (``gg service …`` is about service flights.)
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

import typer

from gg.cli.context import CliError
from gg.cli.exits import Exit

ROLES = ("runner", "maintainer", "server")
SYSTEM_UNITS = Path("/etc/systemd/system")
USER_UNITS = Path(".config/systemd/user")  # under the home directory
RESTART_SEC = 5  # seconds between a failure and the restart
STOP_TIMEOUT = 90  # seconds a stopping runner has for its flights (its --grace is 30)


def register(app: typer.Typer) -> None:
    app.command("install")(install)
    app.command("uninstall")(uninstall)


@dataclass(frozen=True)
class Unit:
    role: str
    name: str | None
    user_mode: bool
    run_as: str | None
    pool: str | None
    extra: tuple[str, ...]
    gg: tuple[str, ...]  # how to run this gg

    @property
    def slug(self) -> str:
        return f"{self.role}-{self.name}" if self.name else self.role

    @property
    def file_name(self) -> str:
        return f"gg-{self.slug}.service"

    def path(self, root: Path | None, home: Path) -> Path:
        base = ((home / USER_UNITS) if self.user_mode else SYSTEM_UNITS) / self.file_name
        return (root / base.relative_to("/")) if root is not None else base

    def directory(self, kind: str, home: Path) -> Path:
        """Where systemd puts the unit's ``state`` (``%S``) or ``config`` (``%E``) directory,
        as a path a person can type: /var/lib and /etc for a system unit, the XDG
        directories for a --user one."""
        import os

        if not self.user_mode:
            base = Path("/var/lib") if kind == "state" else Path("/etc")
        else:
            variable, default = (("XDG_STATE_HOME", ".local/state") if kind == "state"
                                 else ("XDG_CONFIG_HOME", ".config"))
            base = Path(os.environ.get(variable) or home / default)
        return base / "gg" / self.slug

    def command(self) -> list[str]:
        """The unit's ExecStart: gg's global options (``--server URL``, ``--debug``) before
        the subcommand, where ``gg`` reads them, whatever side of ``--`` they were given on."""
        globals_, rest = split_globals(self.extra)
        if self.role == "server":
            args = ["server", "--data-dir", "${STATE_DIRECTORY}"]
        elif self.role == "maintainer":
            args = ["runner", "maintain", self.pool or "", "--state-dir", "${STATE_DIRECTORY}"]
        else:
            args = ["runner", "up"]
        if self.name and self.role != "server":
            args += ["--name", self.name]
        return [*self.gg, *globals_, *args, *rest]

    def missing(self) -> list[str]:
        """What a runner or maintainer unit lacks to start on a fresh host, as sentences."""
        if self.role == "server":
            return []
        globals_, rest = split_globals(self.extra)
        enrols = any(a.startswith("--enrol") for a in rest)
        conf = self.directory("config", Path.home())
        found: list[str] = []
        if not any(a.startswith("--server") for a in globals_):
            found.append("no control plane is named: add -- --server URL (or sign in with "
                         f"GG_CONFIG_DIR={conf} gg login --server URL …)")
        if not enrols:
            found.append("no enrolment is named: add -- --enrol-file FILE (a token from gg "
                         f"fleet enroll), or sign in with GG_CONFIG_DIR={conf} "
                         "gg login")
        return found


    def text(self) -> str:
        what = {"runner": "runner", "maintainer": f"pool maintainer for {self.pool}",
                "server": "control plane"}[self.role]
        exec_start = " ".join(_quote(part) for part in self.command())
        lines = [
            "[Unit]",
            f"Description=gg {what}" + (f" ({self.name})" if self.name else ""),
            "Wants=network-online.target",
            "After=network-online.target",
            "",
            "[Service]",
            "Type=simple",
            f"ExecStart={exec_start}",
            "Restart=on-failure",
            f"RestartSec={RESTART_SEC}",
            f"StateDirectory=gg/{self.slug}",
            "StateDirectoryMode=0700",
            f"ConfigurationDirectory=gg/{self.slug}",
            "ConfigurationDirectoryMode=0700",
            "Environment=GG_STATE_DIR=%S/gg/" + self.slug,
            "Environment=GG_CONFIG_DIR=%E/gg/" + self.slug,
            "Environment=PYTHONUNBUFFERED=1",
            "UMask=0077",
            "KillMode=mixed",
            f"TimeoutStopSec={STOP_TIMEOUT}",
        ]
        if any(part.endswith(".pyz") for part in self.gg):  # it unpacks itself once, here
            lines.insert(lines.index("Environment=PYTHONUNBUFFERED=1"),
                         "Environment=SHIV_ROOT=%S/gg/" + self.slug + "/shiv")
        if self.run_as and not self.user_mode:
            lines.append(f"User={self.run_as}")
        lines += ["", "[Install]",
                  f"WantedBy={'default.target' if self.user_mode else 'multi-user.target'}", ""]
        return "\n".join(lines)


def _quote(part: str) -> str:
    """A word of ExecStart: systemd's own ${VAR} stays as it is; others are quoted as needed
    (and % doubled, systemd's specifier character)."""
    if part.startswith("${") and part.endswith("}"):
        return part
    return shlex.quote(part).replace("%", "%%")


# gg's global options (gg.cli.app._globals): they go before the subcommand in a unit.
GLOBAL_VALUES = ("--server",)
GLOBAL_FLAGS = ("--debug",)


def split_globals(extra: tuple[str, ...] | list[str]) -> tuple[list[str], list[str]]:
    """(gg's global options, the subcommand's own) from the arguments given after ``--``."""
    globals_: list[str] = []
    rest: list[str] = []
    words = list(extra)
    i = 0
    while i < len(words):
        word = words[i]
        if word in GLOBAL_FLAGS or any(word.startswith(f"{g}=") for g in GLOBAL_VALUES):
            globals_.append(word)
        elif word in GLOBAL_VALUES:
            if i + 1 >= len(words):
                raise CliError(f"{word} needs a value: -- {word} URL", Exit.USAGE)
            globals_ += [word, words[i + 1]]
            i += 1
        else:
            rest.append(word)
        i += 1
    return globals_, rest


def this_gg() -> tuple[str, ...]:
    """How the unit starts this very gg: a .pyz by its path, else this interpreter's module."""
    script = Path(sys.argv[0]).resolve() if sys.argv and sys.argv[0] else None
    if script is not None and script.suffix == ".pyz" and script.is_file():
        return (sys.executable, str(script))
    return (sys.executable, "-m", "gg")


def systemd_running() -> bool:
    return Path("/run/systemd/system").is_dir()


def _unit(role: str, name: Optional[str], user: bool, run_as: Optional[str],
          pool: Optional[str], extra: list[str]) -> Unit:
    if role not in ROLES:
        raise CliError(f"gg install takes {', '.join(ROLES)} (got {role!r})", Exit.USAGE)
    if name is not None and (not name or not all(c.isalnum() or c in "-_." for c in name)):
        raise CliError(f"--name takes letters, digits, '-', '_' and '.' (got {name!r})",
                       Exit.USAGE)
    if role == "maintainer" and not pool:
        raise CliError("a maintainer maintains one pool: gg install maintainer --pool POOL",
                       Exit.USAGE)
    if user and run_as:
        raise CliError("--run-as is for system units; a --user unit runs as you", Exit.USAGE)
    return Unit(role, name, user, run_as, pool, tuple(extra), this_gg())


ROLE = typer.Argument(..., metavar="runner|maintainer|server")
NAME = typer.Option(None, "--name", metavar="N", help="Runner name, and the unit's suffix.")
USER = typer.Option(False, "--user", help="A unit of this user's systemd (no root needed).")
ROOT = typer.Option(None, "--root", metavar="DIR",
                    help="Write under DIR instead of /; enable and start nothing.")


def install(
    role: str = ROLE,
    extra: Optional[List[str]] = typer.Argument(None, metavar="[-- ARGS...]",
                                                help="More arguments for the gg command."),
    name: Optional[str] = NAME,
    user: bool = USER,
    run_as: Optional[str] = typer.Option(None, "--run-as", metavar="USER",
                                         help="The account a system unit runs as."),
    create_user: bool = typer.Option(False, "--create-user",
                                     help="Create the --run-as account (a system account "
                                          "without a login shell) when it does not exist."),
    pool: Optional[str] = typer.Option(None, "--pool", metavar="POOL",
                                       help="The pool a maintainer maintains."),
    root: Optional[Path] = ROOT,
    print_: bool = typer.Option(False, "--print", help="Show the unit; write nothing."),
) -> None:
    """Install gg as a systemd service: a runner, a pool maintainer or the control plane."""
    unit = _unit(role, name, user, run_as, pool, extra or [])
    if create_user and not run_as:
        raise CliError("--create-user needs --run-as USER", Exit.USAGE)
    blocked = _blocked(run_as, unit.gg) if run_as and not user and root is None else None
    if print_:
        typer.echo(unit.text(), nl=False)
        if blocked:
            typer.echo(f"note: {blocked}", err=True)
        for sentence in unit.missing():
            typer.echo(f"note: {sentence}", err=True)
        return
    if blocked:
        raise CliError(blocked, Exit.FAILURE)
    path = unit.path(root, Path.home())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(unit.text())
    path.chmod(0o644)
    typer.echo(f"wrote {path}")
    scope = ["--user"] if user else []
    if create_user and run_as:  # refused above without it
        _create_account(run_as, root)
    start = ["systemctl", *scope, "enable", "--now", unit.file_name]
    reload = ["systemctl", *scope, "daemon-reload"]
    if root is None and systemd_running():
        for argv in (reload, start):
            _run(argv)
        typer.echo(f"{unit.file_name} is enabled and started: systemctl {' '.join(scope)} "
                   f"status {unit.file_name}".replace("  ", " "))
    else:
        where = "on the target host" if root is not None else "once systemd runs here"
        typer.echo(f"systemd is not started here: {where}, run "
                   f"{' '.join(reload)} && {' '.join(start)}")
    _first_steps(unit)


def _first_steps(unit: Unit) -> None:
    conf = unit.directory("config", Path.home())
    if unit.role == "runner" and not any(a.startswith("--enrol") for a in unit.extra):
        typer.echo(f"it signs in with the config in its ConfigurationDirectory ({conf}): "
                   "sign in there with GG_CONFIG_DIR=DIR gg login, or install with "
                   "-- --enrol-file FILE")


def unreachable(path: Path, uid: int | None, gids: set[int]) -> Path | None:
    """The first directory on ``path``'s way (or the file itself) that the account ``uid``
    (None: an account not made yet, in no group but its own) cannot pass or run, else None.
    Root passes everything."""
    import stat

    if uid == 0:
        return None
    path = path.resolve()
    for step in [*reversed(path.parents), path]:
        try:
            mode = step.stat()
        except OSError:
            return step
        if uid is not None and mode.st_uid == uid:
            allowed = mode.st_mode & stat.S_IXUSR
        elif uid is not None and mode.st_gid in gids:
            allowed = mode.st_mode & stat.S_IXGRP
        else:
            allowed = mode.st_mode & stat.S_IXOTH
        if not allowed:
            return step
    return None


def _blocked(account: str, gg: tuple[str, ...]) -> str | None:
    """Why a unit whose User= is ``account`` could not run this gg (a Python under /root,
    mode 0700, would only crash-loop), or None."""
    import grp
    import pwd

    try:
        entry = pwd.getpwnam(account)
        uid: int | None = entry.pw_uid
        gids = {entry.pw_gid} | {g.gr_gid for g in grp.getgrall() if account in g.gr_mem}
    except KeyError:
        uid, gids = None, set()
    for part in gg[:1] + tuple(p for p in gg[1:] if p.endswith(".pyz")):
        blocked = unreachable(Path(part), uid, gids)
        if blocked is not None:
            return (f"the unit would run {part} as {account}, who cannot reach {blocked}: "
                    "install gg where that account can run it (a venv under /opt), or leave "
                    "out --run-as")
    return None


def _create_account(account: str, root: Optional[Path]) -> None:
    argv = ["useradd", "--system", "--user-group", "--no-create-home",
            "--shell", "/usr/sbin/nologin", account]
    if root is not None:
        typer.echo(f"with --root no account is created on this host: on the target, run "
                   f"{' '.join(argv)}")
        return
    import pwd

    try:
        pwd.getpwnam(account)
        typer.echo(f"account {account} exists already")
        return
    except KeyError:
        pass
    _run(argv)
    typer.echo(f"created the system account {account}")


def _run(argv: list[str]) -> None:
    if shutil.which(argv[0]) is None:
        raise CliError(f"{argv[0]} is not installed here: run {' '.join(argv)} where it is",
                       Exit.FAILURE)
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise CliError(f"{' '.join(argv)} failed: {(done.stderr or done.stdout).strip()}",
                       Exit.FAILURE)


def uninstall(
    role: str = ROLE,
    name: Optional[str] = NAME,
    user: bool = USER,
    pool: Optional[str] = typer.Option(None, "--pool", metavar="POOL", hidden=True),
    root: Optional[Path] = ROOT,
) -> None:
    """Stop, disable and remove a unit gg install wrote (its state directory is kept)."""
    unit = _unit(role, name, user, None, pool or "-", [])
    path = unit.path(root, Path.home())
    if not path.is_file():
        raise CliError(f"there is no {path}: nothing to uninstall", Exit.NOT_FOUND)
    scope = ["--user"] if user else []
    if root is None and systemd_running():
        _run(["systemctl", *scope, "disable", "--now", unit.file_name])
    path.unlink()
    if root is None and systemd_running():
        _run(["systemctl", *scope, "daemon-reload"])
    typer.echo(f"removed {path}; its state stays in {unit.directory('state', Path.home())} "
               "(remove it by hand when no longer needed)")

