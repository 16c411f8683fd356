"""`actors hook ...`: commands harnesses run as hooks (JSON on stdin).

Claude Code: `session-start` (register, arm the wake file), `file-changed` (the doorbell
for idle sessions), and the boundary hooks `user-prompt-submit` / `pre-tool-use`, which
hand over follow-ups held in mode `next-message` / `next-tool-call` as
`additionalContext`. Harnesses with no idle wake get turn-boundary hooks:
`gemini-after-agent` (Gemini CLI AfterAgent: deny + reason = the next prompt) and
`cursor-stop` (Cursor stop: `followup_message`).

Which hook surfaces which unread follow-up (each one by exactly one channel):
- a follow-up held at a boundary (mode `next-message` / `next-tool-call`, not yet
  flushed) is never rung by the doorbell; `user-prompt-submit` hands over both kinds (a
  new prompt comes before any tool call of its turn), `pre-tool-use` only
  `next-tool-call`;
- everything else (immediate / on-idle, or flushed) belongs to the doorbell and
  `actors inbox read`: the Claude Code boundary hooks leave it alone, so a FileChanged
  wake (whose message itself fires UserPromptSubmit) is never doubled by a body;
- the Gemini / Cursor turn-boundary hooks are the only channel those harnesses have, so
  they hand over every unread follow-up except `manual` ones not yet flushed.
A boundary hook prints its answer first, then (under the session's delivery lock and
inbox lock, so two racing hooks or an `actors inbox read` never take the same entry)
marks what it printed read and journals a `delivered` receipt observed `injected`. Any
error makes it exit 0 with no output: a hook never blocks a prompt, a tool or a stop.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Callable
from typing import Any

import click

from runtime.core import config

CONTEXT = (
    "Background runs started with actors (`actors spawn` or the actors MCP tools) report "
    "back to this session by themselves: when one finishes or needs a decision you will be "
    "woken with a one-line notice. Then read everything pending with `actors inbox read` "
    "(session {session}). Do not poll runs; inspect one only when a follow-up asks for it."
)
WATCHER_CONTEXT = (
    "Background runs started with actors (`actors spawn` or the actors MCP tools) report "
    "back to this session by themselves. Keep one background shell task running "
    "`actors inbox wait --session {session}`: when it exits it prints one line; then read "
    "everything pending with `actors inbox read --session {session}` and start the waiter "
    "again. Do not poll runs; inspect one only when a follow-up asks for it."
)


BOUNDARY_MODES = ("next-message", "next-tool-call")
CONTEXT_BUDGET = 9000
"""Characters of follow-ups one boundary hands over (Claude Code caps injected hook text
at 10,000); the rest wait for the next boundary."""
CURSOR_LOOP_LIMIT = 5
"""Cursor's default `loop_limit`; `actors hook cursor-stop --loop-limit` must match the
`loop_limit` of its hooks.json entry."""
GEMINI_MAX_CHAIN = 3
"""Consecutive AfterAgent continuations (`stop_hook_active`) before the hook lets the
agent stop; what is still unread waits for the next turn."""


def _hook_input() -> dict[str, Any]:
    try:
        data = json.loads(sys.stdin.read().lstrip("\ufeff"))  # Cursor may send a BOM
    except (ValueError, OSError):
        return {}
    return data if isinstance(data, dict) else {}


@click.group("hook")
def hook_group() -> None:
    """Harness hook commands (run by Claude Code, not by hand)."""


@hook_group.command("session-start")
@click.option(
    "--wake",
    type=click.Choice(["hook", "watcher"]),
    default="hook",
    help="watcher: no watchPaths; tell the agent to keep `actors inbox wait` running.",
)
def session_start(wake: str) -> None:
    """SessionStart: register the session, export ACTORS_SESSION, arm the wake file."""
    from runtime.core.ids import is_valid_id, now_iso
    from runtime.delivery.sessions import load_session, save_session, session_paths
    from runtime.store.layout import StateRoot
    from runtime.store.writes import ensure_dir

    data = _hook_input()
    session_id = str(data.get("session_id") or "")
    if not is_valid_id(session_id):
        sys.exit(0)  # never block a session start; there is nothing to register
    root = StateRoot.from_env()
    record = load_session(root, session_id)
    record.update(
        id=session_id,
        harness="claude_code",
        registered=True,
        last_seen=now_iso(),
        cwd=data.get("cwd"),
        transcript_path=data.get("transcript_path"),
    )
    options = record.setdefault("options", {})
    socket = os.environ.get("CLAUDE_CODE_MESSAGING_SOCKET")  # Claude Code >= 2.1.224
    if socket:
        options["messaging_socket"] = socket
        if os.environ.get("CLAUDE_CODE_MESSAGING_TOKEN"):
            options["messaging_token"] = os.environ["CLAUDE_CODE_MESSAGING_TOKEN"]
    record.setdefault("created_at", now_iso())
    save_session(root, record)
    paths = session_paths(root, session_id)
    ensure_dir(paths.dir)
    if not paths.wake.exists():
        paths.wake.touch(mode=0o600)
    env_file = os.environ.get("CLAUDE_ENV_FILE")
    if env_file:
        with open(env_file, "a") as handle:
            handle.write(f"export {config.SESSION.name}={session_id}\n")
    click.echo(
        json.dumps(
            {
                "hookSpecificOutput": {
                    "hookEventName": "SessionStart",
                    "additionalContext": (WATCHER_CONTEXT if wake == "watcher" else CONTEXT).format(
                        session=session_id
                    ),
                    **({} if wake == "watcher" else {"watchPaths": [str(paths.wake)]}),
                }
            }
        )
    )


@hook_group.command("file-changed")
def file_changed() -> None:
    """FileChanged (asyncRewake): exit 2 with a doorbell line when follow-ups are unread."""
    from runtime.core.ids import is_valid_id
    from runtime.delivery.sessions import session_paths
    from runtime.store.layout import StateRoot

    data = _hook_input()
    session_id = str(data.get("session_id") or config.text(config.SESSION))
    if not is_valid_id(session_id):
        sys.exit(0)
    unread = doorbell_unread(StateRoot.from_env(), session_id)
    if not unread:
        sys.exit(0)  # coalesced or spurious event, or only boundary-held: nothing to wake for
    click.echo(doorbell_line(session_id, unread), err=True)
    _record_wake(session_paths(StateRoot.from_env(), session_id), unread)
    sys.exit(2)


def _record_wake(paths: Any, unread: list[dict[str, Any]]) -> None:
    """Note that the doorbell rang for these entries (`actors doctor delivery` judges D4
    from it); never fails the hook."""
    from runtime.core.ids import now_iso
    from runtime.store.appends import append_jsonl
    from runtime.store.journals import LOG

    with contextlib.suppress(OSError):
        append_jsonl(
            paths.wakes,
            {"ts": now_iso(), "ids": [e["id"] for e in unread]},
            compactor=LOG,
        )


# -- boundary hand-over ------------------------------------------------------------------


_FINAL = ("delivered", "accepted", "failed-final")
"""runtime.delivery.engine.FINAL (kept here so the hooks' common path, where nothing is
pending, does not import the delivery stack; a test keeps the two equal)."""


def _held_at_boundary(entry: dict[str, Any], state: dict[str, Any]) -> bool:
    """Held for a boundary hook (not flushed, not otherwise ended)."""
    return entry.get("mode") in BOUNDARY_MODES and state.get("state") not in _FINAL


def doorbell_line(session_id: str, unread: list[dict[str, Any]]) -> str:
    """The one line that tells an agent follow-ups wait (the hook's stderr, the watcher's
    stdout): how many, the first one's summary, and the command that reads them all."""
    first = unread[0]["envelope"].get("summary") or unread[0]["envelope"].get("type")
    return (
        f"ACTORS: {len(unread)} unread follow-up(s); first: {first}. "
        f"Read them all with: actors inbox read --session {session_id}"
    )


def doorbell_unread(root: Any, session_id: str) -> list[dict[str, Any]]:
    """Unread follow-ups the doorbell rings for: all but those held at a boundary (those
    come with the next prompt or tool call, not as a wake)."""
    from runtime.delivery.sessions import SessionInbox, session_paths

    unread = SessionInbox(session_paths(root, session_id)).unread()
    if not unread or not any(e.get("mode") in BOUNDARY_MODES for e in unread):
        return unread
    from runtime.delivery.engine import DeliveryRunner

    states = DeliveryRunner(root).states(session_id)
    return [e for e in unread if not _held_at_boundary(e, states.get(e["id"], {}))]


Pick = Callable[[dict[str, Any], dict[str, Any]], bool]


def _pick_next_message(entry: dict[str, Any], state: dict[str, Any]) -> bool:
    return _held_at_boundary(entry, state)


def _pick_next_tool_call(entry: dict[str, Any], state: dict[str, Any]) -> bool:
    return entry.get("mode") == "next-tool-call" and _held_at_boundary(entry, state)


def _pick_turn_end(entry: dict[str, Any], state: dict[str, Any]) -> bool:
    return not (entry.get("mode") == "manual" and state.get("state") not in _FINAL)


def _render(
    paths: Any, session_id: str, entries: list[dict[str, Any]], boundary: str
) -> tuple[str, list[dict[str, Any]]]:
    """The text handed over (within CONTEXT_BUDGET) and the entries it holds, in order."""
    from runtime.delivery.contract import DeliveryContext
    from runtime.delivery.engine import _write_body
    from runtime.delivery.render import injected_text

    blocks: list[str] = []
    taken: list[dict[str, Any]] = []
    used = 0
    for entry in entries:
        context = DeliveryContext(
            delivery_id=entry["id"],
            mode=entry.get("mode", "immediate"),
            session={"id": session_id},
            body_file=str(_write_body(paths, entry["id"], entry["envelope"])),
        )
        block = injected_text(entry["envelope"], context)
        if taken and used + len(block) > CONTEXT_BUDGET:
            break
        blocks.append(block)
        taken.append(entry)
        used += len(block) + 2
    head = (
        f"[actors] {len(taken)} follow-up(s) for session {session_id}, handed over at"
        f" {boundary}. They report on background work started earlier; they are not"
        " instructions from the user."
    )
    left = len(entries) - len(taken)
    tail = (
        [
            f"[actors] {left} more follow-up(s) wait for the next boundary;"
            f" `actors inbox read --session {session_id}` prints them now."
        ]
        if left
        else []
    )
    return "\n\n".join([head, *blocks, *tail]), taken


def hand_over(
    root: Any,
    session_id: str,
    *,
    boundary: str,
    harness: str,
    pick: Pick,
    answer: Callable[[str], dict[str, Any]],
    before_output: Callable[[], bool] | None = None,
) -> list[str]:
    """Write the hook's answer holding the follow-ups `pick` selects, then mark them read
    and journal them delivered; the delivery ids handed over ([] when nothing was).

    `before_output`, run under the locks once there is something to hand over, may
    veto the hand-over (a loop guard) by returning False."""
    from runtime.delivery.sessions import SessionInbox, session_paths

    paths = session_paths(root, session_id)
    inbox = SessionInbox(paths)
    if not paths.inbox.exists() or not any(
        pick(e, {"state": "queued"}) or pick(e, {"state": "delivered"}) for e in inbox.unread()
    ):
        return []  # the common case: decided from the inbox alone, without a lock

    from runtime.delivery.engine import DeliveryRunner
    from runtime.store.appends import locked

    runner = DeliveryRunner(root)

    def chosen() -> list[dict[str, Any]]:
        states = runner.states(session_id)
        return [e for e in inbox.unread() if pick(e, states.get(e["id"], {}))]

    if not chosen():
        return []
    # The runner's lock first, then the inbox lock (the order the runner itself uses):
    # a racing hook, `actors flush` or `actors inbox read` waits, then finds them read.
    wait = config.seconds(config.HOOK_LOCK_WAIT)
    with (
        locked(paths.deliver_lock, timeout_s=wait),
        locked(paths.inbox_lock, timeout_s=wait),
    ):
        entries = chosen()
        if not entries or (before_output is not None and not before_output()):
            return []
        text, taken = _render(paths, session_id, entries, boundary)
        sys.stdout.write(json.dumps(answer(text), ensure_ascii=False) + "\n")
        sys.stdout.flush()  # answered: from here on they count as handed over
        ids = [e["id"] for e in taken]
        inbox.mark_read(ids)
        runner.record_surfaced(
            session_id, ids, harness=harness, boundary=boundary, pending_only=False
        )
        return ids


def _session_of(data: dict[str, Any], key: str, *, env_first: bool) -> str:
    """The session a hook works for: the harness's id in the hook input, or
    $ACTORS_SESSION (first for harnesses whose sessions are registered under a name of
    the user's choosing); empty when neither is a valid id."""
    from runtime.core.ids import is_valid_id

    given, env = str(data.get(key) or ""), config.text(config.SESSION)
    for candidate in (env, given) if env_first else (given, env):
        if is_valid_id(candidate):
            return candidate
    return ""


def _quietly(body: Callable[[], None]) -> None:
    """Run a boundary hook: whatever goes wrong, exit 0 without blocking the harness."""
    try:
        body()
    except SystemExit:
        raise
    except BaseException:  # a hook must never block a prompt, a tool or a stop
        sys.exit(0)
    sys.exit(0)


def _claude_boundary(event: str, pick: Pick) -> None:
    from runtime.store.layout import StateRoot

    data = _hook_input()
    session_id = _session_of(data, "session_id", env_first=False)
    if not session_id:
        return
    hand_over(
        StateRoot.from_env(),
        session_id,
        boundary=event,
        harness="claude_code",
        pick=pick,
        answer=lambda text: {
            "hookSpecificOutput": {"hookEventName": event, "additionalContext": text}
        },
    )


@hook_group.command("user-prompt-submit")
def user_prompt_submit() -> None:
    """UserPromptSubmit: follow-ups held for the next message (or tool call) ride along
    with the user's prompt as additionalContext."""
    _quietly(lambda: _claude_boundary("UserPromptSubmit", _pick_next_message))


@hook_group.command("pre-tool-use")
def pre_tool_use() -> None:
    """PreToolUse: follow-ups held for the next tool call, as additionalContext (no
    permission decision: the tool call goes on exactly as it would have)."""
    _quietly(lambda: _claude_boundary("PreToolUse", _pick_next_tool_call))


@hook_group.command("gemini-after-agent")
@click.option(
    "--max-chain",
    type=int,
    default=GEMINI_MAX_CHAIN,
    show_default=True,
    help="Consecutive continuations before the agent may stop anyway.",
)
def gemini_after_agent(max_chain: int) -> None:
    """Gemini CLI AfterAgent: unread follow-ups become the next prompt
    (`{"decision": "deny", "reason": ...}`); silent when nothing is pending."""

    def body() -> None:
        from runtime.delivery.sessions import session_paths
        from runtime.store.layout import StateRoot
        from runtime.store.reads import read_json
        from runtime.store.writes import write_json_atomic

        data = _hook_input()
        session_id = _session_of(data, "session_id", env_first=True)
        if not session_id:
            return
        root = StateRoot.from_env()
        chain_file = session_paths(root, session_id).gemini_chain

        def guard() -> bool:
            chain = 0
            if data.get("stop_hook_active") is True:
                with contextlib.suppress(Exception):
                    chain = int((read_json(chain_file) or {}).get("count", 0))
            if chain >= max_chain:
                return False
            write_json_atomic(chain_file, {"count": chain + 1})
            return True

        hand_over(
            root,
            session_id,
            boundary="AfterAgent",
            harness="gemini_cli",
            pick=_pick_turn_end,
            answer=lambda text: {"decision": "deny", "reason": text},
            before_output=guard,
        )

    _quietly(body)


@hook_group.command("cursor-stop")
@click.option(
    "--loop-limit",
    type=int,
    default=CURSOR_LOOP_LIMIT,
    show_default=True,
    help="The `loop_limit` of this hook's hooks.json entry (Cursor's default is 5).",
)
def cursor_stop(loop_limit: int) -> None:
    """Cursor stop: unread follow-ups become the next user message
    (`{"followup_message": ...}`), never past the loop limit; silent otherwise."""

    def body() -> None:
        from runtime.store.layout import StateRoot

        data = _hook_input()
        if data.get("status") == "aborted":
            return  # the user stopped the agent: do not start it again
        try:
            loops = int(data.get("loop_count") or 0)
        except (TypeError, ValueError):
            loops = 0
        if loops >= loop_limit:
            return  # Cursor would drop the follow-up: leave it unread for the next stop
        session_id = _session_of(data, "conversation_id", env_first=True)
        if not session_id:
            return
        hand_over(
            StateRoot.from_env(),
            session_id,
            boundary="stop",
            harness="cursor",
            pick=_pick_turn_end,
            answer=lambda text: {"followup_message": text},
        )

    _quietly(body)
