"""The `actors` command line.

Start-up time is part of the interface (an agent may call `actors message` hundreds of
times), so this package imports only the standard library: `--version` and plain calls of
the hot verbs are parsed by hand (actors.cli._fast) and never load click; every other
command loads click and then only its own module, and those modules import trio,
pydantic, httpx or websockets only on the paths that need them
(tests/actors/test_import_budget.py). The verbs are listed once, in actors.cli.commands.
"""

from __future__ import annotations

import io
import os
import sys
from typing import Any

_OUT_OF_MEMORY = b"actors: out of memory; free memory (or raise the process's memory limit)\n"
"""The line for memory that ran out where nothing more could be built (made before it is
needed: the same words runtime.core.errors.resource_error gives a MemoryError)."""


def main(argv: list[str] | None = None) -> Any:
    """Console entry point: one readable line and exit status 2 for any input error, and
    for an environment that ran out of something (a full or read-only disk, no
    descriptors or memory left, stdout that cannot be written).

    Memory can run out anywhere, also before the command's own handler stands (importing
    the configuration, wrapping stdout) or inside it: whatever MemoryError escapes ends
    here with the prepared line, written with no allocation of its own (a hook keeps its
    own rule: exit 0, since its 2 would wake a Claude Code model with this line)."""
    hook = (sys.argv[1:2] if argv is None else argv[:1]) == ["hook"]
    try:
        return _main(argv)
    except MemoryError:
        try:
            os.write(2, _OUT_OF_MEMORY)
        finally:
            os._exit(0 if hook else 2)


def _main(argv: list[str] | None) -> Any:
    from runtime.core import config
    from runtime.core.errors import ActorsError, resource_error

    args = sys.argv[1:] if argv is None else argv
    streams = sys.stdout, sys.stderr
    _guard_output()
    _guard_terminals()
    if args[:1] == ["hook"]:  # hooks keep their own rule: never fail the harness
        _hook(args)
    try:
        try:
            outcome = _dispatch(args, config)
        except SystemExit:
            _flush_output()  # a command's own exit status stands only once its output is out
            raise
        _flush_output()
        return outcome
    except ActorsError as err:
        _say(f"actors: {err}")
        sys.exit(err.exit_code)
    except BrokenPipeError:  # the reader went away (`| head`): a quiet end, as documented
        _drop_output()
        sys.exit(0)
    except Exception as exc:
        found = resource_error(exc, where=_state_root(config))
        if found is not None:  # the environment ran out of something: not a bug
            _say(f"actors: {found}")
            sys.exit(found.exit_code)
        if config.flag(config.DEBUG):  # a bug: one line by default, the traceback on request
            raise
        _say(
            f"actors: internal error: {type(exc).__name__}: {exc} "
            "(rerun with ACTORS_DEBUG=1 for the traceback, and please report it)"
        )
        sys.exit(1)
    finally:
        _settle_output()
        sys.stdout, sys.stderr = streams


_REMOTE_VERBS = frozenset(
    {"status", "result", "tail", "wait", "inspect", "kill", "cancel", "message"}
)
"""runtime.hosts.remote.REMOTE_VERBS, repeated here so this check imports nothing (a
test holds the two equal)."""


def _remote(args: list[str]) -> bool:
    """Does this call go to a host? A `run:<host>/<id>` address (`spawn --host` is
    click's: actors.cli.runs.spawn_cmd)."""
    if not args or args[0] not in _REMOTE_VERBS:
        return False
    from runtime.hosts.address import is_remote, message_address

    if args[0] == "message":  # only its address: its type and body are text
        index = message_address(args[1:])
        return index is not None and is_remote(args[1 + index])
    return any(is_remote(a) for a in args[1:])


def _hook(args: list[str]) -> None:
    """`actors hook ...`: exit 0 whatever happens (2 only for file-changed's wake),
    actors.cli.hooks.run_hook."""
    try:
        from actors.cli.hooks import run_hook
    except BaseException:  # not even importable: still never fail the harness
        sys.exit(0)
    run_hook(args)


def _dispatch(args: list[str], config: Any) -> Any:
    _check_utf8(args)
    config.check()  # a bad ACTORS_* value stops the command before it writes
    if _remote(args):  # `run:<host>/<id>`: the host's own verb
        from actors.cli._remote_call import read_call
        from runtime.hosts.remote import forward
        from runtime.store.layout import StateRoot

        sys.exit(forward(StateRoot.from_env(), read_call(args)))
    from actors.cli._fast import run

    if run(args):
        return None
    from actors.cli._app import run_click

    return run_click(args)


def _state_root(config: Any) -> str | None:
    try:
        return str(config.state_root())
    except Exception:
        return None


class _Stdout(io.FileIO):
    """fd 1 under the CLI's text stdout: a failed write becomes OutputLost (one line,
    exit 2) instead of a bare OSError that could come from anywhere; a closed pipe stays
    BrokenPipeError (a reader that went away)."""

    def write(self, data: Any) -> int:
        try:
            return super().write(data)
        except BrokenPipeError:
            raise
        except OSError as exc:
            from runtime.core.errors import OutputLost

            raise OutputLost(
                f"cannot write the output (stdout): {exc.strerror}",
                hint="make room where stdout goes, or send it elsewhere",
            ) from exc


def _guard_output() -> None:
    """Put `_Stdout` under sys.stdout (same encoding and buffering), when it is fd 1."""
    stream = sys.stdout
    if not isinstance(stream, io.TextIOWrapper):
        return  # a test's capture, an embedding caller's stream: theirs to handle
    try:
        if stream.fileno() != 1:
            return
        stream.flush()
    except (OSError, ValueError):
        return
    raw = _Stdout(1, "w", closefd=False)
    sys.stdout = io.TextIOWrapper(
        io.BufferedWriter(raw),
        encoding=stream.encoding,
        errors=stream.errors,
        line_buffering=stream.line_buffering,
    )


def _flush_output() -> None:
    """Write out what the command printed; a failure is reported, never ignored at exit."""
    try:
        sys.stdout.flush()
    except BaseException:
        _drop_output()
        raise


def _settle_output() -> None:
    """On the way out, whatever happened: flush, or discard what cannot be written."""
    try:
        sys.stdout.flush()
    except Exception:
        _drop_output()


def _drop_output() -> None:
    """Point fd 1 at /dev/null, so the output left in the buffer is discarded quietly
    (the interpreter's own flush at exit would otherwise print a traceback)."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        return
    os.dup2(null, 1)
    os.close(null)
    try:
        sys.stdout.flush()
    except Exception:
        pass  # nothing left to tell: the line on stderr says what was lost


def _say(line: str) -> None:
    """The one line on stderr, whatever the message quotes (an internal error's text may
    hold a newline; runtime.core.terminal.cell escapes it); nothing more can be done when
    stderr itself fails."""
    if not (line.isascii() and line.isprintable()):
        from runtime.core.terminal import cell

        line = cell(line)
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


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
