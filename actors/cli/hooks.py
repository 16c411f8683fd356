"""`actors hook ...`: commands harnesses run as hooks (JSON on stdin), wired to the hook
logic of each harness's adapter package.

Claude Code (adapters/claude_code/hooks.py): `session-start`, `file-changed`, the
boundary hooks `user-prompt-submit` / `pre-tool-use`, and `stop`
(adapters/claude_code/stop.py: a headless `claude -p` waits for its runs). The actors pi
extension (adapters/pi/extension.py): `pi-session-start`, `pi-wake` and `pi-serve` (the
wake, kept running for one pi process). Harnesses with no idle wake get turn-boundary
hooks: `gemini-after-agent` (adapters/gemini.py), `qwen-stop` (adapters/qwen.py),
`copilot-agent-stop` (adapters/copilot.py) and `cursor-stop`
(adapters/cursor.py). What each hook surfaces, and under which locks, is
runtime/delivery/boundary.py. Hooks run on every harness event, so nothing here imports
more than the command being run needs.

A hook never fails its harness. actors.cli.main sends every `actors hook ...` command
through `run_hook`, the one boundary: whatever the input (not JSON, nested past the
decoder's depth, over HOOK_INPUT_CAP, no stdin, a pipe that never ends), the
environment (a state root that is a file, group-writable or someone else's, a
CLAUDE_ENV_FILE in a missing directory, unwritable files, a closed stdout), a bad
option or a bug, the hook exits 0, with no output or with the answer it completed; the
failure is one stderr line for the user (runtime.delivery.boundary.note_failure). The one
designed non-zero exit is `file-changed`'s 2, Claude Code's asyncRewake wake, raised
(`Wake`) only once the doorbell line for a real unread follow-up was written.

Claude Code's five hooks run on every session start, prompt, tool call and turn end,
and the UserPromptSubmit one sits on the messaging-socket wake (Claude runs it before the model
request): called as installed, with no option, they run here without click (PLAIN), whose
import is a large share of their start-up; anything else goes through the click commands
(actors.cli.hook_commands), which call the same functions.
"""

from __future__ import annotations

import os
import select
import sys
from collections.abc import Callable
from typing import Any, NoReturn

HOOK_INPUT_CAP = 8 * 1024 * 1024
"""Bytes of hook input read at most; a larger input is not parsed (the hook does
nothing, and what waits is handed over at the next boundary)."""
WAKE_EXIT = 2
"""Claude Code's asyncRewake: exit 2 wakes the model with the hook's stderr."""


class Wake(Exception):
    """`file-changed` wrote the doorbell line for a real unread follow-up: exit 2."""


def run_hook(args: list[str]) -> NoReturn:
    """Run `actors hook ...` (args start with "hook"); exit 0 whatever happens, or 2 for
    a `Wake`."""
    code = 0
    try:
        plain = PLAIN.get(tuple(args))
        if plain is not None:
            plain()
        else:
            from actors.cli._app import run_click

            run_click(args)
    except Wake:
        code = WAKE_EXIT
    except SystemExit as ended:  # click's usage errors, --help, an exit of ours
        if ended.code not in (None, 0):
            _note(args, f"exit status {ended.code} (usage, or a bug)")
    except BaseException as exc:  # anything at all: a hook never blocks its harness
        _note(args, exc)
    _finish(code)


def _note(args: list[str], why: str | BaseException) -> None:
    """The failure, one line on stderr (runtime.delivery.boundary.note_failure): ours as
    we word them, anything else with its type. Never raises."""
    try:
        from runtime.core.errors import ActorsError
        from runtime.delivery.boundary import note_failure

        if isinstance(why, BaseException):
            why = str(why) if isinstance(why, ActorsError) else f"{type(why).__name__}: {why}"
        note_failure(args[1] if len(args) > 1 else "hook", why)
    except BaseException:  # even the note failed: the exit status is what matters
        pass


EXIT_AT_ONCE = True
"""A hook's process ends without the interpreter's teardown (module finalisation, a last
collection: about 7 ms of every hook, and Claude waits for the exit before it goes on,
on every socket wake): by then its output is flushed and every file it wrote is closed.
Off only where a test inspects the process after the hook (tests/conftest.py)."""


def _finish(code: int) -> NoReturn:
    """Exit with `code`, even when stdout or stderr cannot be flushed (a closed pipe
    would otherwise make the interpreter exit 120 at shutdown); at once (EXIT_AT_ONCE)."""
    for stream, fd in ((sys.stdout, 1), (sys.stderr, 2)):
        try:
            stream.flush()
        except BaseException:  # closed, a reader gone, or no stream at all (None)
            try:
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, fd)  # what is still buffered goes nowhere, and succeeds
                os.close(null)
            except OSError:
                pass
    if EXIT_AT_ONCE:
        os._exit(code)
    sys.exit(code)


def hook_input() -> dict[str, Any]:
    """The hook's input: a JSON object on stdin, else {} (not JSON, not an object, too
    deep for the decoder, over HOOK_INPUT_CAP, or nothing arrived within the hook wait)."""
    from runtime.core import config
    from runtime.core.bounded_json import INPUT_DEPTH, decode

    try:
        wait = config.seconds(config.HOOK_LOCK_WAIT)
    except Exception:  # a bad value: the default (the hook never refuses to run)
        wait = float(config.HOOK_LOCK_WAIT.default)
    try:
        raw = read_stdin(HOOK_INPUT_CAP, wait)
        if raw is None:
            return {}
        raw = raw.removeprefix(b"\xef\xbb\xbf")  # Cursor may send a BOM
        # bounded (runtime.core.bounded_json): deep nesting, NaN or undecodable text
        # count as no input, never as a crash
        data = decode(raw, max_bytes=HOOK_INPUT_CAP, max_depth=INPUT_DEPTH)
    except Exception:  # Undecodable, MemoryError, OSError: no input
        return {}
    return data if isinstance(data, dict) else {}


def read_stdin(cap: int, idle_s: float) -> bytes | None:
    """All of stdin up to `cap` bytes, None when it is larger or goes `idle_s` seconds
    without a byte or its end (a harness writes its input at once and closes it): a hook's
    input, and a status line's (`status --line --stdin`)."""
    chunks: list[bytes] = []
    total = 0
    while True:
        ready, _, _ = select.select([0], [], [], idle_s)
        if not ready:
            return None
        chunk = os.read(0, 65536)
        if not chunk:
            return b"".join(chunks)
        total += len(chunk)
        if total > cap:
            return None
        chunks.append(chunk)


def session_start(wake: str = "hook") -> None:
    """SessionStart: register the session, export ACTORS_SESSION, arm the wake file, hand
    over follow-ups unread so far."""
    from adapters.claude_code import hooks

    hooks.session_start(hook_input(), wake)  # writes its answer (none: nothing to register)


def file_changed() -> None:
    """FileChanged (asyncRewake): exit 2 with a doorbell line when follow-ups are unread."""
    from adapters.claude_code import hooks

    if hooks.file_changed(hook_input()):
        raise Wake


def user_prompt_submit() -> None:
    """UserPromptSubmit: follow-ups held for the next message (or tool call) ride along
    with the user's prompt as additionalContext."""
    from adapters.claude_code import hooks

    hooks.user_prompt_submit(hook_input())


def pre_tool_use() -> None:
    """PreToolUse: follow-ups held for the next tool call, as additionalContext (no
    permission decision: the tool call goes on exactly as it would have)."""
    from adapters.claude_code import hooks

    hooks.pre_tool_use(hook_input())


def stop() -> None:
    """Stop: a headless `claude -p` holds its finished turn open while its runs are live
    and continues it with their follow-ups (adapters/claude_code/stop.py); any other
    session leaves at once."""
    from adapters.claude_code.headless import headless

    if headless():  # checked before the input is read: an interactive turn end costs nothing more
        from adapters.claude_code.stop import stop as hold

        hold(hook_input())


def pi_session_start() -> None:
    """The actors pi extension's session start: register the pi session, answer with its
    id and wake file (adapters/pi/extension.py)."""
    from adapters.pi import extension

    extension.session_start(hook_input())


def pi_wake() -> None:
    """The actors pi extension's wake: hand the unread follow-ups over as one text."""
    from adapters.pi import extension

    extension.wake(hook_input())


def pi_serve() -> None:
    """The actors pi extension's wake, kept running: one answer line per request line."""
    from adapters.pi import extension

    extension.serve()


PLAIN: dict[tuple[str, ...], Callable[[], None]] = {
    ("hook", "session-start"): session_start,
    ("hook", "file-changed"): file_changed,
    ("hook", "user-prompt-submit"): user_prompt_submit,
    ("hook", "pre-tool-use"): pre_tool_use,
    ("hook", "stop"): stop,
    ("hook", "pi-session-start"): pi_session_start,
    ("hook", "pi-wake"): pi_wake,
    ("hook", "pi-serve"): pi_serve,
}
"""Claude Code's hooks as `actors install claude-code` writes them, and those of the actors
pi extension (`actors install pi`): run without click."""
