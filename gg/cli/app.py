"""The ``gg`` command: every part of gg behind one entry point.

Commands assemble flags, call one thing, and print; they decide nothing. Every error
becomes one plain line on stderr and an exit code from :class:`gg.cli.exits.Exit`
(``--debug`` shows the traceback).
"""

from __future__ import annotations

import os
import sys
from typing import Optional

# Plain help: Typer's Rich help formatting costs ~150 ms of imports on every `gg --help`.
# Tables and live views still use Rich (imported only by the commands that draw them).
os.environ.setdefault("TYPER_USE_RICH", "0")

import typer  # noqa: E402
from typer.core import TyperGroup  # noqa: E402

from gg.cli.context import STATE, CliError, show_version
from gg.cli.exits import Exit, for_status
from gg.cli.values import plain_values
from gg.errors import GGError, Unauthorized

# Every command, in the order `gg --help` lists them: name -> (the modules whose ``register``
# adds it, its one-line help). `gg --help` reads this table and imports no command module;
# running a command imports only the modules on its line. Adding a command module is one
# entry here (a module that adds a subcommand to another group joins that group's line).
# tests/cli/test_startup.py checks that every entry's help is the command's own.
COMMANDS: dict[str, tuple[tuple[str, ...], str]] = {
    "login": (("people",), "Sign in on this machine (the token is checked, then kept mode 0600)."),
    "logout": (("people",), "Forget this machine's sign-in (the token stays valid on the server "
                            "until it expires; to end it everywhere, rotate it with gg person "
                            "token NAME --rotate)."),
    "whoami": (("people",), "Who this machine is signed in as."),
    "runners": (("runners",), "Runners, oldest first: admin state, liveness and health side by side."),
    "fly": (("flights",), "Open a flight."),
    "flights": (("flights",), "Flights, newest first, with why each waiting one waits."),
    "show": (("flights",), "One flight: stage, lease holder, attempts, facts and output, and why "
                           "it waits."),
    "cancel": (("flights",), "Cancel a flight; a flying one is stopped by its runner within one "
                             "renewal."),
    "rerun": (("flights",), "Open a new flight from FLIGHT's spec (with changes), linked to it "
                            "both ways."),
    "artifacts": (("artifacts",), "The files FLIGHT left under $GG_ARTIFACTS: name, size, "
                                  "SHA-256."),
    "artifact": (("artifacts",), "One artifact of a flight: gg artifact get F NAME."),
    "gates": (("gates",), "Open gates: what each guards, why, and who may clear it."),
    "environments": (("environments",), "Every environment: meaning, gate, and the runners that "
                                        "advertise it."),
    "plan": (("plan",), "Everything that must hold before FLIGHT can start, who can make it "
                        "true, and how."),
    "events": (("events",), "Events, oldest first, with actor and time."),
    "demo": (("demo",), "See gg work: a control plane on SQLite in a temporary folder, two "
                        "runners, six flights."),
    "credentials": (("credentials",), "Credential references every runner registered (never a "
                                      "secret)."),
    "secrets": (("secrets",), "Every secret: its name, scope, who set it and when (never a "
                              "value)."),
    "pools": (("pools",), "Every pool: its members, its last attestation, and the flights "
                          "waiting on it."),
    "strategies": (("strategies",), "Every strategy: its pool, environment, bounds, image, and "
                                    "whether it is in force."),
    "hooks": (("hooks",), "The hooks (admin): where they POST and what they hear."),
    "server": (("server",), "The control plane: start it, or look after its store."),
    "id-token": (("id_tokens",), "Print a signed identity token (a JWT) for this flight, "
                                 "through its runner; inside a flight only."),
    "person": (("people",), "People of the organisation."),
    "runner": (("runners", "admin", "sent", "ownership", "pools", "groups", "pull"),
               "Run this machine as a runner, and look at runners."),
    "gate": (("gates",), "Gates: open questions that need a yes."),
    "environment": (("environments",), "Environments: charted names with a meaning."),
    "airspace": (("airspace",), "Airspace files: the root envelope, fleet profiles, pool "
                                "strategies."),
    "fleet": (("fleet", "groups"), "Fleet profiles and enrolment of machines."),
    "credential": (("credentials",), "Secrets this runner keeps for flights (never sent "
                                     "anywhere)."),
    "secret": (("secrets",), "Secrets flights receive as variables (values never shown)."),
    "pool": (("pools",), "Pools: managed sets of identical machines on one or more hosts."),
    "strategy": (("strategies",), "Pool strategies: how a pool is furnished and bounded."),
    "hook": (("hooks",), "Hooks: signed POSTs to a URL when flights end (admin)."),
    "approve": (("approvals",), "Approve a flight waiting for approval (an admin or its named "
                                "approver; never its opener, nor whoever changed it)."),
    "reject": (("approvals",), "Refuse a flight's approval: it ends cancelled, with the reason."),
    "force": (("approvals",), "Clear every gate a person may clear on a flight at once (admin; "
                              "recorded)."),
    "console": (("console",), "An interactive terminal on a runner, relayed through the control "
                              "plane (its owner's; an admin's for organisation and open ones)."),
    "services": (("services",), "Every service: runner, generation, restarts, uptime, readiness."),
    "service": (("services",), "Services: flights their runner keeps running."),
    "groups": (("groups",), "Runner groups: attributes, bindings, exclusive, draining, how many "
                            "runners."),
    "group": (("groups",), "Runner groups: where machines are, whose zone they serve."),
    "attributes": (("groups",), "Registered attribute keys and the values each takes."),
    "attribute": (("groups",), "The attribute keys groups and --where may use."),
    "estimate": (("estimates",), "Start estimates: how they compared with the starts."),
    "install": (("install",), "Install gg as a systemd service: a runner, a pool maintainer or "
                              "the control plane."),
    "uninstall": (("install",), "Stop, disable and remove a unit gg install wrote (its state "
                                "directory is kept)."),
}


class LazyGroup(TyperGroup):
    """The top-level group: lists :data:`COMMANDS` from the table, and builds a command
    (importing its modules) only when it is run or its own help is asked for."""

    def list_commands(self, ctx) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx, name: str):
        if name not in COMMANDS:
            return None
        return _with_help(load(name), ctx)

    def parse_args(self, ctx, args: list[str]) -> list[str]:
        _with_help(self, ctx)  # the global options (--server, --debug) are checked plainly too
        return super().parse_args(ctx, args)

    def resolve_command(self, ctx, args: list[str]):
        """Typer suggests from the commands it has built; this group builds them lazily, so
        the suggestion reads the table instead (``gg fligths`` -> did you mean 'flights')."""
        try:
            return self._click_resolve_command(ctx, args)
        except Exception as exc:
            if _is_usage_error(exc) and args and hasattr(exc, "message"):
                from difflib import get_close_matches

                matches = get_close_matches(args[0], list(COMMANDS))
                if matches:
                    names = ", ".join(f"{m!r}" for m in matches)
                    exc.message = f"{exc.message.rstrip('.')}. Did you mean {names}?"
            raise

    def format_commands(self, ctx, formatter) -> None:
        limit = formatter.width - 6 - max(len(name) for name in COMMANDS)
        rows = [(name, _short(help_, limit)) for name, (_, help_) in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _with_help(command, ctx):
    """``command`` with its options, its --help among them (click makes that one on first
    use, and keeps it), given plain checks (gg.cli.values)."""
    if command is not None:
        command.get_help_option(ctx)
        plain_values(command)
    return command


def _short(text: str, limit: int) -> str:
    """Click's own shortening of a help line (so the listing reads as before)."""
    from typer._click.utils import make_default_short_help

    return make_default_short_help(text, max(limit, 45))


_commands = typer.Typer(add_completion=False)  # every loaded module registers here, once
_loaded: set[str] = set()


@_commands.callback()
def _group() -> None:  # a callback keeps a single command a group (typer would collapse it)
    pass


def load(name: str):
    """The click command ``name``, built from its modules (each registered once)."""
    import importlib

    for module in COMMANDS[name][0]:
        if module not in _loaded:
            importlib.import_module(f"gg.cli.{module}").register(_commands)
            _loaded.add(module)
    group = typer.main.get_command(_commands)
    assert isinstance(group, typer.core.TyperGroup)  # a Typer of several commands
    return group.commands.get(name)


app = typer.Typer(
    name="gg", cls=LazyGroup, no_args_is_help=True, add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain click help: importing rich's help renderer costs ~100 ms
    help="Run work on a fleet of machines your organisation controls.",
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback()
def _globals(
    server: Optional[str] = typer.Option(None, "--server", metavar="URL",
                                         help="Control plane URL, or several replicas' URLs separated "
                                              "by commas (env GG_SERVER)."),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks."),
    version: bool = typer.Option(False, "--version", is_eager=True, callback=show_version,
                                 help="Print gg's version and exit."),
) -> None:
    STATE.server = server
    STATE.debug = debug


def main(argv: list[str] | None = None) -> None:
    sys.exit(run(argv))


# The shells `--show-completion SHELL` and `--install-completion SHELL` take.
SHELLS = ("bash", "zsh", "fish", "powershell", "pwsh")


def _completion(args: list[str]) -> int | None:
    """``gg --show-completion [SHELL]`` and ``--install-completion [SHELL]``: Typer's own
    options are flags that detect the shell and ignore a named one (``zsh`` printed bash's
    script); here a named shell is the one used, and a shell gg does not know is refused."""
    if not args or args[0] not in ("--show-completion", "--install-completion"):
        return None
    from typer._completion_shared import _get_shell_name, get_completion_script, install

    if len(args) > 2:
        raise CliError(f"{args[0]} takes one shell at most ({', '.join(SHELLS)})", Exit.USAGE)
    shell = args[1] if len(args) == 2 else (_get_shell_name() or "bash")
    if shell not in SHELLS:
        raise CliError(f"{args[0]} takes one of {', '.join(SHELLS)} (got {shell!r})",
                       Exit.USAGE)
    if args[0] == "--show-completion":
        sys.stdout.write(get_completion_script(prog_name="gg", complete_var="_GG_COMPLETE",
                                               shell=shell) + "\n")
    else:
        _, path = install(shell=shell, prog_name="gg", complete_var="_GG_COMPLETE")
        sys.stdout.write(f"{shell} completion installed in {path}; it takes effect in a new "
                         "terminal\n")
    return 0


def run(argv: list[str] | None = None) -> int:
    args = list(argv if argv is not None else sys.argv[1:])
    debug = "--debug" in args
    try:
        done = _completion(args)
        if done is not None:
            return done
        result = app(args=argv, prog_name="gg", standalone_mode=False)
        return int(result) if isinstance(result, int) else 0
    except typer.Exit as exc:
        return int(getattr(exc, "exit_code", 0) or 0)
    except typer.Abort:
        sys.stderr.write("aborted\n")
        return 130
    except CliError as exc:
        if debug:
            raise
        sys.stderr.write(exc.message + "\n")
        return exc.exit_code
    except GGError as exc:
        if debug:
            raise
        sys.stderr.write(_sentence(exc) + "\n")
        return int(for_status(getattr(exc, "status", 400)))
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
    except Exception as exc:  # the last line of defence: never a traceback without --debug
        if _is_usage_error(exc):
            sys.stderr.write(_usage_line(exc) + "\n")
            return int(getattr(exc, "exit_code", Exit.USAGE) or Exit.USAGE)
        if type(exc).__name__ == "Exit":  # click's own Exit, from a vendored click
            return int(getattr(exc, "exit_code", 0) or 0)
        if debug:
            raise
        sys.stderr.write(f"gg failed unexpectedly: {type(exc).__name__}: {exc} "
                         "(run again with --debug for the traceback)\n")
        return Exit.FAILURE


def _sentence(exc: GGError) -> str:
    """The server's refusal of a signed-in person's token is opaque on purpose; say here what
    the usual causes are and what to do."""
    if getattr(exc, "status", None) == 401 and exc.message == Unauthorized().message:
        from gg import config

        if os.environ.get(config.ENV_TOKEN):  # gg login would not help: the variable wins
            return (f"the token in {config.ENV_TOKEN} was not accepted (it may have expired "
                    "or been rotated, or its person removed): set "
                    f"{config.ENV_TOKEN} to a live token, or unset it to use the sign-in "
                    "gg login keeps")
        return ("the token was not accepted (it may have expired or been rotated, or its person "
                "removed): sign in again with gg login --server URL --token-file FILE")
    return exc.message


def _is_usage_error(exc: Exception) -> bool:
    """Click's usage errors (Typer vendors its own click, so match by shape, not class)."""
    return hasattr(exc, "format_message") and hasattr(exc, "exit_code")


def _usage_line(exc) -> str:
    message = exc.format_message()
    ctx = getattr(exc, "ctx", None)
    where = f"{ctx.command_path}: " if ctx is not None else ""
    return f"{where}{message}".replace("\n", " ")
