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

from gg.cli.context import STATE, CliError, show_version
from gg.cli.exits import Exit, for_status
from gg.errors import GGError, Unauthorized

app = typer.Typer(
    name="gg", no_args_is_help=True, add_completion=True, pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain click help: importing rich's help renderer costs ~100 ms
    help="Run work on a fleet of machines your organisation controls.",
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback()
def _globals(
    server: Optional[str] = typer.Option(None, "--server", metavar="URL",
                                         help="Control plane URL (env GG_SERVER)."),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks."),
    version: bool = typer.Option(False, "--version", is_eager=True, callback=show_version,
                                 help="Print gg's version and exit."),
) -> None:
    STATE.server = server
    STATE.debug = debug


def _register() -> None:
    from gg.cli import admin, demo, events, flights, gates, people, placement, runners, sent, server
    from gg.cli import airspace, credentials, fleet  # enrolment
    from gg.cli import pools, strategies  # pools
    from gg.cli import hooks  # notifications
    from gg.cli import install  # services on the host

    for module in (server, people, runners, admin, sent, flights, gates, placement, events, demo,
                   airspace, fleet, credentials, pools, strategies, hooks, install):
        module.register(app)


_register()


def main(argv: list[str] | None = None) -> None:
    sys.exit(run(argv))


def run(argv: list[str] | None = None) -> int:
    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    try:
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
