"""The `actors` command line.

Start-up time is part of the interface (an agent may call `actors message` hundreds of
times), so this package imports only the standard library: `--version` and plain calls of
the hot verbs are parsed by hand (actors.cli._fast) and never load click; every other
command loads click and then only its own module, and those modules import trio,
pydantic, httpx or websockets only on the paths that need them
(tests/actors/test_import_budget.py). The verbs are listed once, in actors.cli.commands.
"""

from __future__ import annotations

import sys
from typing import Any


def main(argv: list[str] | None = None) -> Any:
    """Console entry point: one readable line and exit status 2 for any input error."""
    from runtime.core import config
    from runtime.core.errors import ActorsError

    args = sys.argv[1:] if argv is None else argv
    streams = sys.stdout, sys.stderr
    _guard_terminals()
    if args[:1] == ["hook"]:  # hooks keep their own rule: never fail the harness
        _hook(args)
    try:
        _check_utf8(args)
        config.check()  # a bad ACTORS_* value stops the command before it writes
        from actors.cli._fast import run

        if run(args):
            return None
        from actors.cli._app import run_click

        return run_click(args)
    except ActorsError as err:
        sys.stderr.write(f"actors: {err}\n")
        sys.exit(err.exit_code)
    except BrokenPipeError:
        sys.exit(0)
    except Exception as exc:  # a bug: one line by default, the traceback on request
        if config.flag(config.DEBUG):
            raise
        sys.stderr.write(
            f"actors: internal error: {type(exc).__name__}: {exc} "
            "(rerun with ACTORS_DEBUG=1 for the traceback, and please report it)\n"
        )
        sys.exit(1)
    finally:
        sys.stdout, sys.stderr = streams


def _hook(args: list[str]) -> None:
    """`actors hook ...`: exit 0 whatever happens (2 only for file-changed's wake),
    actors.cli.hooks.run_hook."""
    try:
        from actors.cli.hooks import run_hook
    except BaseException:  # not even importable: still never fail the harness
        sys.exit(0)
    run_hook(args)


def _guard_terminals() -> None:
    """On a terminal, every character written is made inert (runtime.core.terminal):
    summaries, output lines and event fields are run-written and must not drive it."""
    for name, keep in (("stdout", "\n\t"), ("stderr", "\n\t\r")):
        stream = getattr(sys, name)
        isatty = getattr(stream, "isatty", None)
        if isatty is None or not isatty():
            continue  # piped output stays as stored, and the sanitiser is not even loaded
        from runtime.core.terminal import TerminalStream

        if not isinstance(stream, TerminalStream):
            setattr(sys, name, TerminalStream(stream, keep))


def __getattr__(name: str) -> Any:
    if name == "cli":  # the click group, built on first use
        from actors.cli._app import cli

        return cli
    if name == "COMMANDS":  # verb -> "module:attr" of its click command
        from actors.cli.commands import COMMANDS

        return COMMANDS
    raise AttributeError(f"module 'actors.cli' has no attribute {name!r}")


def _check_utf8(args: list[str]) -> None:
    """Refuse arguments that are not UTF-8 (Python hands their bytes over as lone
    surrogates): every value ends up in a UTF-8 JSON state file or envelope."""
    from runtime.core.errors import BadInput

    for position, arg in enumerate(args, 1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError as exc:
            byte = arg[exc.start].encode("utf-8", "surrogateescape")
            raise BadInput(
                f"argument {position} is not valid UTF-8 text (byte 0x{byte.hex()})",
                hint="actors stores arguments in UTF-8 JSON files; pass UTF-8 text",
            ) from None
