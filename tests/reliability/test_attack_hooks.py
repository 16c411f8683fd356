"""Issue 26 #6: a hook never fails its harness.

Harnesses run `actors hook ...` in front of a prompt, a tool call, a stop, or (Claude
Code's FileChanged, with asyncRewake) in the background, where exit status 2 is the wake
signal: the idle model is woken and handed the hook's stderr. On main 4ee217d, 100k-deep
JSON on stdin (RecursionError), a state root that is a file or group-writable (refused
with exit 2) or CLAUDE_ENV_FILE in a missing directory (exit 1) made hooks exit 1 or 2;
for `file-changed` that woke the model with the error.

Every hook command, fed every hostile input (the real CLI, input on stdin exactly as a
harness pipes it) and run in every hostile environment, exits 0 with empty stdout or one
JSON object, and never a traceback. The one exception is `file-changed`'s designed 2,
which only a real unread follow-up causes (checked both ways). A failure is noted where
a user finds it: one stderr line, which a harness keeps for the user.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runtime.delivery.engine import DeliveryRunner
from runtime.delivery.sessions import SessionInbox
from runtime.store.layout import StateRoot, session_paths
from tests.conftest import make_fifo
from tests.reliability._attack import NOBODY

SESSION = "5e55a0e1-7a7a-4b4b-8c8c-0d0d0e0e0f0f"
HOOKS = [
    "session-start",
    "file-changed",
    "user-prompt-submit",
    "pre-tool-use",
    "gemini-after-agent",
    "cursor-stop",
]


def _event(hook: str) -> dict[str, Any]:
    """The input each harness documents for the hook (what the hook is wired to)."""
    base = {"session_id": SESSION, "transcript_path": "/tmp/t.jsonl", "cwd": "/"}
    return {
        "session-start": {**base, "hook_event_name": "SessionStart", "source": "startup"},
        "file-changed": {**base, "hook_event_name": "FileChanged", "file_path": "/x/wake"},
        "user-prompt-submit": {**base, "hook_event_name": "UserPromptSubmit", "prompt": "go"},
        "pre-tool-use": {
            **base,
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": "ls"},
        },
        "gemini-after-agent": {
            **base,
            "hook_event_name": "AfterAgent",
            "prompt": "go",
            "prompt_response": "done",
            "stop_hook_active": False,
        },
        "cursor-stop": {
            "conversation_id": SESSION,
            "hook_event_name": "stop",
            "status": "completed",
            "loop_count": 0,
        },
    }[hook]


def _run_hook(
    hook: str,
    stdin: bytes | None,
    env: dict[str, str] | None = None,
    *,
    redirect: str = "",
    args: tuple[str, ...] = (),
    timeout: float = 120,
) -> subprocess.CompletedProcess[bytes]:
    """`actors hook HOOK` as a harness runs it; `redirect` closes a descriptor first (a
    shell's `<&-`, `>&-`, `2>&-`)."""
    argv = [sys.executable, "-m", "actors", "hook", hook, *args]
    if redirect:
        argv = ["sh", "-c", f'exec "$@" {redirect}', "hook", *argv]
    return subprocess.run(
        argv,
        input=stdin,
        capture_output=True,
        env=dict(os.environ, **(env or {})),
        timeout=timeout,
        check=False,
    )


def _answered_or_silent(stdout: bytes) -> bool:
    """Empty, or exactly one JSON object (the hook's answer): never a partial line, a
    traceback or plain text (Claude Code adds plain stdout to the model's context)."""
    text = stdout.decode(errors="replace").strip()
    if not text:
        return True
    try:
        return isinstance(json.loads(text), dict) and len(text.splitlines()) == 1
    except ValueError:
        return False


def _verdict(hook: str, proc: subprocess.CompletedProcess[bytes], wake_allowed: bool) -> str:
    """'' when the hook behaved; else what it did wrong."""
    err = proc.stderr.decode(errors="replace")
    allowed = {0, 2} if (hook == "file-changed" and wake_allowed) else {0}
    problems = []
    if proc.returncode not in allowed:
        problems.append(f"exit {proc.returncode}")
    if "Traceback" in err:
        problems.append("a traceback")
    if not _answered_or_silent(proc.stdout):
        problems.append(f"stdout {proc.stdout[:200]!r}")
    if proc.returncode == 2 and not err.startswith("ACTORS: "):
        problems.append(f"woke the model with {err[:200]!r}")
    return ", ".join(problems)


def _register(root: Path) -> None:
    """The session as Claude Code's SessionStart registers it, with two unread follow-ups:
    one the doorbell rings for, one held for the next prompt."""
    start = _run_hook("session-start", json.dumps(_event("session-start")).encode(), _home(root))
    assert start.returncode == 0 and start.stdout, start.stderr
    runner = DeliveryRunner(StateRoot(root))
    for ident, mode in (("d-now", "immediate"), ("d-next", "next-message")):
        envelope = {"type": "run.done", "from": "run:r", "summary": f"Run r {ident}", "body": "x"}
        runner.submit(SESSION, envelope, delivery_id=ident, mode=mode, exact_mode=True)


def _home(root: Path) -> dict[str, str]:
    return {"ACTORS_HOME": str(root)}


def _unread(root: Path) -> list[str]:
    return [e["id"] for e in SessionInbox(session_paths(StateRoot(root), SESSION)).unread()]


# -- hostile input --------------------------------------------------------------------------

DEEP = 100_000
INPUTS: dict[str, bytes] = {
    "empty": b"",
    "not-json": b"not json at all",
    "array": b"[1, 2]",
    "null": b"null",
    "string": b'"session"',
    "bom-only": "\ufeff".encode(),
    "deep-array": b"[" * DEEP + b"]" * DEEP,
    "deep-object": b'{"a":' * DEEP + b"1" + b"}" * DEEP,
    "deep-after-the-session": (
        b'{"session_id": "' + SESSION.encode() + b'", "x": ' + b"[" * DEEP + b"]" * DEEP + b"}"
    ),
    "over-16-mib": b'{"session_id": "never-seen", "prompt": "' + b"x" * (16 << 20) + b'"}',
    "invalid-utf8": b'{"session_id": "\xff\xfe\x80", "prompt": "\xc3("}',
    "raw-nul": b'{"session_id": "a\x00b"}',
    "wrong-types": json.dumps(
        {
            "session_id": [SESSION],
            "conversation_id": {"id": SESSION},
            "loop_count": "many",
            "stop_hook_active": "yes",
            "status": 5,
            "prompt": {"a": 1},
            "cwd": 7,
        }
    ).encode(),
    "infinite-loop-count": b'{"conversation_id": "c1", "loop_count": 1e999999}',
    "huge-int": b'{"loop_count": 1' + b"0" * 5000 + b"}",
    "long-session-id": json.dumps({"session_id": "a" * 100_000}).encode(),
    "path-session-id": json.dumps({"session_id": "../../etc", "conversation_id": "/"}).encode(),
}  # fmt: skip


@pytest.mark.parametrize("name", list(INPUTS))
@pytest.mark.parametrize("hook", HOOKS)
def test_hostile_input_never_fails_the_hook(home: StateRoot, hook: str, name: str) -> None:
    _register(home.path)
    proc = _run_hook(hook, INPUTS[name])
    # none of these inputs names the session readably: there is nothing to wake for
    assert _verdict(hook, proc, wake_allowed=False) == "", (name, proc.stderr[-600:])
    assert proc.returncode == 0
    assert sorted(_unread(home.path)) == ["d-next", "d-now"], "a follow-up was lost"


def test_the_wake_still_comes_for_a_real_unread_follow_up(home: StateRoot) -> None:
    """The matrix above is not vacuous: the same session, fed the input Claude Code
    sends, rings (exit 2, the doorbell line on stderr), and a prompt takes the held one."""
    _register(home.path)
    rung = _run_hook("file-changed", json.dumps(_event("file-changed")).encode())
    assert rung.returncode == 2, rung.stderr
    assert rung.stderr.decode().startswith("ACTORS: 1 unread follow-up(s)")
    took = _run_hook("user-prompt-submit", json.dumps(_event("user-prompt-submit")).encode())
    assert took.returncode == 0 and b"delivery d-next" in took.stdout
    assert _unread(home.path) == ["d-now"]
    home_only = _run_hook("file-changed", json.dumps({"session_id": "never-seen"}).encode())
    assert (home_only.returncode, home_only.stderr) == (0, b"")  # no follow-up: no wake


# -- hostile environment --------------------------------------------------------------------
#
# Each setup returns the environment and what file-changed may do there: stay "quiet"
# (no follow-up can be read), "may-wake" (a follow-up is there, but the environment may
# stop the hook before it reads it), or "wake" (a working root with a real unread
# follow-up: the doorbell must still ring, whatever else is hostile).

Setup = Any


def _root_is_a_file(tmp: Path) -> tuple[dict[str, str], str]:
    target = tmp / "root-file"
    target.write_text("not a directory\n")
    return _home(target), "quiet"


def _root_writable_by(mode: int) -> Setup:
    def setup(tmp: Path) -> tuple[dict[str, str], str]:
        root = tmp / "root"
        _register(root)
        os.chmod(root, mode)
        return _home(root), "quiet"

    return setup


def _root_of_another_user(tmp: Path) -> tuple[dict[str, str], str]:
    if os.geteuid() != 0:
        pytest.skip("needs root to give the state root to another user")
    root = tmp / "root"
    _register(root)
    for dirpath, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            os.lchown(os.path.join(dirpath, name), NOBODY, NOBODY)
    os.chown(root, NOBODY, NOBODY)
    return _home(root), "quiet"


def _root_is_a_link(tmp: Path) -> tuple[dict[str, str], str]:
    real = tmp / "real-root"
    _register(real)
    link = tmp / "root-link"
    link.symlink_to(real)
    return _home(link), "quiet"


def _sessions_dir_world_writable(tmp: Path) -> tuple[dict[str, str], str]:
    root = tmp / "root"
    _register(root)
    os.chmod(root / "sessions", 0o777)
    return _home(root), "quiet"


def _sessions_is_a_file(tmp: Path) -> tuple[dict[str, str], str]:
    root = tmp / "root"
    root.mkdir(mode=0o700)
    (root / "sessions").write_text("x")
    return _home(root), "quiet"


def _session_dir_is_a_file(tmp: Path) -> tuple[dict[str, str], str]:
    root = tmp / "root"
    (root / "sessions").mkdir(parents=True, mode=0o700)
    os.chmod(root, 0o700)
    (root / "sessions" / SESSION).write_text("x")
    return _home(root), "quiet"


def _inbox_is_a_directory(tmp: Path) -> tuple[dict[str, str], str]:
    root = tmp / "root"
    _register(root)
    inbox = session_paths(StateRoot(root), SESSION).inbox
    inbox.unlink()
    inbox.mkdir(mode=0o700)
    return _home(root), "quiet"


def _inbox_with_garbage(tmp: Path) -> tuple[dict[str, str], str]:
    root = tmp / "root"
    _register(root)
    inbox = session_paths(StateRoot(root), SESSION).inbox
    with open(inbox, "ab") as handle:
        handle.write(b"[" * DEEP + b"\n\xff\xfe{not json\n" + b'{"id": 5}\n')
    return _home(root), "may-wake"


def _working_root_and(extra: Any, file_changed: str = "wake") -> Setup:
    """A working root with unread follow-ups, plus a hostile detail elsewhere."""

    def setup(tmp: Path) -> tuple[dict[str, str], str]:
        root = tmp / "root"
        _register(root)
        return {**_home(root), **extra(tmp)}, file_changed

    return setup


ENVIRONMENTS: dict[str, Setup] = {
    "root-is-a-file": _root_is_a_file,
    "root-group-writable": _root_writable_by(0o770),
    "root-world-writable": _root_writable_by(0o777),
    "root-of-another-user": _root_of_another_user,
    "root-is-a-symlink": _root_is_a_link,
    "sessions-dir-world-writable": _sessions_dir_world_writable,
    "sessions-is-a-file": _sessions_is_a_file,
    "session-dir-is-a-file": _session_dir_is_a_file,
    "inbox-is-a-directory": _inbox_is_a_directory,
    "inbox-with-garbage-lines": _inbox_with_garbage,
    "env-file-in-a-missing-directory": _working_root_and(
        lambda tmp: {"CLAUDE_ENV_FILE": str(tmp / "missing" / "dir" / "env.sh")}
    ),
    "env-file-is-a-directory": _working_root_and(lambda tmp: {"CLAUDE_ENV_FILE": str(tmp)}),
    "env-file-is-a-fifo-nobody-reads": _working_root_and(
        lambda tmp: {"CLAUDE_ENV_FILE": str(make_fifo(tmp / "env.fifo"))}
    ),
    "bad-settings": _working_root_and(
        lambda tmp: {"ACTORS_HOOK_LOCK_WAIT": "soon", "ACTORS_JOURNAL_CAP_BYTES": "-1"},
        "may-wake",
    ),
    "bad-session-variable": _working_root_and(lambda tmp: {"ACTORS_SESSION": "../../x"}),
    "home-unset": _working_root_and(lambda tmp: {"HOME": "", "XDG_CONFIG_HOME": ""}),
}


@pytest.mark.parametrize("name", list(ENVIRONMENTS))
@pytest.mark.parametrize("hook", HOOKS)
def test_a_hostile_environment_never_fails_the_hook(tmp_path: Path, hook: str, name: str) -> None:
    env, file_changed = ENVIRONMENTS[name](tmp_path)
    proc = _run_hook(hook, json.dumps(_event(hook)).encode(), env)
    assert _verdict(hook, proc, file_changed != "quiet") == "", (name, proc.stderr[-600:])
    if hook == "file-changed" and file_changed == "wake":  # the designed wake still works
        assert proc.returncode == 2, (name, proc.stderr[-600:])


@pytest.mark.parametrize("name", ["stdin", "stdout", "stderr"])
@pytest.mark.parametrize("hook", HOOKS)
def test_a_closed_descriptor_never_fails_the_hook(home: StateRoot, hook: str, name: str) -> None:
    """No stdin: no input, nothing done. No stdout: no answer, so nothing is marked read
    (file-changed still rings: its line is on stderr). No stderr: file-changed cannot say
    why it would wake, so it does not (exit 0); the others answer as usual."""
    _register(home.path)
    closing = {"stdin": "<&-", "stdout": ">&-", "stderr": "2>&-"}[name]
    proc = _run_hook(hook, json.dumps(_event(hook)).encode(), redirect=closing)
    rings = hook == "file-changed" and name == "stdout"
    assert proc.returncode == (2 if rings else 0), proc.stderr[-600:]
    assert b"Traceback" not in proc.stderr
    if name in ("stdin", "stdout"):
        assert sorted(_unread(home.path)) == ["d-next", "d-now"], "marked read, never seen"


@pytest.mark.parametrize("hook", HOOKS)
def test_a_broken_pipe_on_stdout_loses_nothing(home: StateRoot, hook: str) -> None:
    """The harness stopped reading: the answer cannot be written, the hook still exits
    0 and nothing it could not hand over is marked read."""
    _register(home.path)
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "actors", "hook", hook],
            input=json.dumps(_event(hook)).encode(),
            stdout=write_end,
            stderr=subprocess.PIPE,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write_end)
    allowed = {0, 2} if hook == "file-changed" else {0}
    assert proc.returncode in allowed and b"Traceback" not in proc.stderr, proc.stderr[-600:]
    assert sorted(_unread(home.path)) == ["d-next", "d-now"]


@pytest.mark.parametrize("hook", HOOKS)
def test_stdin_that_never_ends_does_not_hang_the_hook(home: StateRoot, hook: str) -> None:
    """A pipe held open with nothing written: the hook gives up after the hook wait
    (ACTORS_HOOK_LOCK_WAIT) instead of blocking the prompt, the tool or the stop."""
    _register(home.path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "actors", "hook", hook],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(os.environ, ACTORS_HOOK_LOCK_WAIT="0.5"),
    )
    try:
        out, err = proc.communicate(timeout=60)  # stdin stays open: communicate(None)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"`actors hook {hook}` hung on a stdin that never ends")
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
    assert (proc.returncode, out) == (0, b""), err[-600:]


@pytest.mark.parametrize(
    "args",
    [
        ("cursor-stop", "--loop-limit", "many"),
        ("gemini-after-agent", "--max-chain", "-"),
        ("session-start", "--wake", "bogus"),
        ("file-changed", "--no-such-option"),
        ("no-such-hook",),
    ],
    ids=["cursor-limit", "gemini-chain", "session-wake", "file-changed-option", "unknown"],
)
def test_a_misconfigured_hook_never_fails_the_harness(
    home: StateRoot, args: tuple[str, ...]
) -> None:
    """A bad option in the harness's hook entry (a typo in settings.json): exit 0, and the
    reason on stderr for the user (not 2: FileChanged would wake the model with it)."""
    _register(home.path)
    proc = _run_hook(args[0], json.dumps(_event("file-changed")).encode(), args=args[1:])
    assert proc.returncode == 0 and proc.stdout == b"", proc.stderr[-600:]
    assert proc.stderr and b"Traceback" not in proc.stderr


def test_a_failure_is_noted_where_the_user_finds_it(tmp_path: Path) -> None:
    """Exit 0 hides nothing: the reason is one stderr line, which a harness keeps for the
    user and never hands the model on exit 0; the rest of the hook's work is done."""
    env, _ = _working_root_and(lambda tmp: {"CLAUDE_ENV_FILE": str(tmp / "missing" / "env.sh")})(
        tmp_path
    )
    proc = _run_hook("session-start", json.dumps(_event("session-start")).encode(), env)
    assert proc.returncode == 0 and json.loads(proc.stdout)["hookSpecificOutput"]["watchPaths"]
    (line,) = proc.stderr.decode().splitlines()
    assert line.startswith("actors hook session-start: CLAUDE_ENV_FILE") and "missing" in line

    refused = _run_hook(
        "file-changed", json.dumps(_event("file-changed")).encode(), _root_is_a_file(tmp_path)[0]
    )
    assert refused.returncode == 0
    (line,) = refused.stderr.decode().splitlines()
    assert line.startswith("actors hook file-changed: ") and "not a directory" in line
