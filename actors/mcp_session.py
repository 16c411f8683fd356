"""Which harness session an MCP tool call comes from, decided per call.

One `actors mcp` process can serve several harness sessions over its life, and the
harness does not restart it when the session changes, so the session is never fixed at
start. Each call is resolved from what the harness itself says about the caller:

- Codex sends the thread id in every call's `_meta.threadId`: the session registered
  for that thread (`-o thread=`), else one registered here as `codex-<thread>` with the
  app-server socket read from our ancestor `codex app-server --listen unix://PATH`
  (a plain `codex` TUI has no socket: then a `file` session, read with `inbox_read`).
- OpenCode starts one server per instance and sends only the tool's arguments; the
  plugin `actors install opencode` writes adds `_actors_caller = {opencode_session,
  url}` to each call of ours. The session registered for that OpenCode session, else
  one registered here (id = the OpenCode session id; the server password is the
  OPENCODE_SERVER_PASSWORD OpenCode passes to its MCP servers, sent only to a loopback
  URL).
- Claude Code keeps the MCP server across `/clear`, which gives the session a new id:
  the SessionStart hook records "this Claude process -> its current session"
  (`record_harness_process`), and the nearest ancestor with a record names the session.
- Otherwise the fallback given at start (`--session`, $ACTORS_SESSION,
  $CLAUDE_CODE_SESSION_ID, the local user).
"""

from __future__ import annotations

import os
from typing import Any

from runtime.core.ids import is_valid_id
from runtime.delivery.harness_processes import ancestors, session_of_ancestors
from runtime.store.layout import StateRoot

CALLER_ARG = "_actors_caller"
"""The argument the OpenCode plugin adds to our tool calls (never part of a schema)."""


def _registered(root: StateRoot, harness: str, option: str, value: str) -> str | None:
    from runtime.delivery.sessions import list_sessions

    for record in list_sessions(root):
        if (
            record.get("harness") == harness
            and record.get("registered", True)
            and (record.get("options") or {}).get(option) == value
        ):
            return str(record["id"])
    return None


def _register(root: StateRoot, ident: str, harness: str, options: dict[str, str]) -> str:
    """Register the calling thread or session as `actors session register` would (the
    same checks, the same record), except that the target is not probed: it is the
    harness that is calling us right now."""
    from runtime.delivery.sessions import load_session, register_session

    record = load_session(root, ident)
    if record.get("registered") and record.get("harness") == harness:
        return ident
    register_session(root, ident, harness, options, reach=False, registered_by="actors mcp")
    return ident


def _codex_socket() -> str | None:
    """The `--listen unix://PATH` of our ancestor `codex app-server`, if any."""
    from runtime.core.process import read_proc

    for pid in ancestors(os.getpid()):
        data = read_proc(pid, "cmdline") or b""
        argv = [a.decode(errors="replace") for a in data.split(b"\0") if a]
        if "app-server" not in argv:
            continue
        for index, arg in enumerate(argv):
            value = argv[index + 1] if arg == "--listen" and index + 1 < len(argv) else None
            if arg.startswith("--listen="):
                value = arg.split("=", 1)[1]
            if value and value.startswith("unix://") and len(value) > len("unix://"):
                return value[len("unix://") :]
    return None


def codex_session(root: StateRoot, thread: str) -> str | None:
    found = _registered(root, "codex", "thread", thread)
    if found:
        return found
    ident = f"codex-{thread}"
    if not is_valid_id(ident):
        return None
    socket = _codex_socket()
    if socket is None:
        return _register(root, ident, "file", {})
    return _register(root, ident, "codex", {"socket": socket, "thread": thread})


def _loopback(url: str) -> bool:
    """The URL names this machine: only then is a session registered for it, and with the
    server's password (the argument comes through the model's tool call, which a prompt
    could steer: follow-ups and the password never go to a URL it chose elsewhere)."""
    from urllib.parse import urlsplit

    return urlsplit(url).hostname in ("127.0.0.1", "localhost", "::1")


def opencode_session(root: StateRoot, caller: dict[str, Any]) -> str | None:
    session, url = caller.get("opencode_session"), caller.get("url")
    if not (isinstance(session, str) and session.startswith("ses") and is_valid_id(session)):
        return None
    found = _registered(root, "opencode", "session", session)
    if found:
        return found
    if not (isinstance(url, str) and url.startswith(("http://", "https://")) and _loopback(url)):
        return _register(root, session, "file", {})  # never a follow-up to a remote URL
    options = {"url": url.rstrip("/"), "session": session}
    if os.environ.get("OPENCODE_SERVER_PASSWORD"):
        options["password"] = os.environ["OPENCODE_SERVER_PASSWORD"]
        if os.environ.get("OPENCODE_SERVER_USERNAME"):
            options["username"] = os.environ["OPENCODE_SERVER_USERNAME"]
    return _register(root, session, "opencode", options)


class SessionResolver:
    """The session of each tool call (see the module docstring), with `fallback` when the
    call names none."""

    def __init__(self, root: StateRoot, fallback: str, *, explicit: bool = False) -> None:
        self.root, self.fallback, self.explicit = root, fallback, explicit

    def resolve(self, meta: dict[str, Any] | None, caller: Any) -> str:
        thread = (meta or {}).get("threadId")
        if isinstance(thread, str) and thread:
            found = codex_session(self.root, thread)
            if found:
                return found
        if isinstance(caller, dict):
            found = opencode_session(self.root, caller)
            if found:
                return found
        if not self.explicit:
            found = session_of_ancestors(self.root)
            if found:
                return found
        return self.fallback
