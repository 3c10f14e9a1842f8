"""The ``gg`` command: every part of gg behind one entry point.

Commands assemble flags, call one thing, and print; they decide nothing. Every error
becomes one plain line on stderr and an exit code from :class:`gg.cli.exits.Exit`
(``--debug`` shows the traceback).
"""

from __future__ import annotations

import sys
from typing import Optional

import click
import typer

from gg.cli.context import STATE, CliError
from gg.cli.exits import Exit, for_status
from gg.errors import GGError

app = typer.Typer(
    name="gg", no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
    help="Run work on a fleet of machines your organisation controls.",
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback()
def _globals(
    server: Optional[str] = typer.Option(None, "--server", metavar="URL",
                                         help="Control plane URL (env GG_SERVER)."),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks."),
) -> None:
    STATE.server = server
    STATE.debug = debug


def _register() -> None:
    from gg.cli import demo, events, flights, gates, people, pools, runners, server, strategies

    for module in (server, people, runners, flights, gates, events, demo, pools, strategies):
        module.register(app)


_register()


def main(argv: list[str] | None = None) -> None:
    sys.exit(run(argv))


def run(argv: list[str] | None = None) -> int:
    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    try:
        result = app(args=argv, prog_name="gg", standalone_mode=False)
        return int(result or 0) if isinstance(result, int) else 0
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.exceptions.Abort:
        sys.stderr.write("aborted\n")
        return 130
    except click.ClickException as exc:
        sys.stderr.write(_usage_line(exc) + "\n")
        return Exit.USAGE
    except CliError as exc:
        if debug:
            raise
        sys.stderr.write(exc.message + "\n")
        return exc.exit_code
    except GGError as exc:
        if debug:
            raise
        sys.stderr.write(exc.message + "\n")
        return int(for_status(getattr(exc, "status", 400)))
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
    except Exception as exc:  # the last line of defence: never a traceback without --debug
        if debug:
            raise
        sys.stderr.write(f"gg failed unexpectedly: {type(exc).__name__}: {exc} "
                         "(run again with --debug for the traceback)\n")
        return Exit.FAILURE


def _usage_line(exc: click.ClickException) -> str:
    message = exc.format_message()
    ctx = getattr(exc, "ctx", None)
    where = f"{ctx.command_path}: " if ctx is not None else ""
    return f"{where}{message}".replace("\n", " ")
