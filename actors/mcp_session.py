"""Which harness session an MCP tool call comes from, decided per call.

One `actors mcp` process can serve several harness sessions over its life, and the
harness does not restart it when the session changes, so the session is never fixed at
start. Each call is resolved from what the harness itself says about the caller:

- Codex sends the thread id in every call's `_meta.threadId`: the session registered
  for that thread (`-o thread=`), else one registered here as `codex-<thread>` with the
  app-server socket read from our ancestor `codex app-server --listen unix://PATH`
  (a plain `codex` TUI has no socket: then a `file` session, read with `inbox_read`).
- OpenCode starts one server per instance and sends only the tool's arguments; the
  plugin `actors install opencode` writes adds `_actors_caller = {opencode_session, url,
  ts, nonce, mac}` to each call of ours. Tool arguments are written by the model, so the
  claim counts only when its `mac` is the HMAC of the rest under the per-user key
  `$ACTORS_HOME/harness-processes/caller.key` (0600, made by `actors mcp` at start,
  read by the plugin inside the OpenCode process): the model, which only writes
  arguments, cannot make one, and neither can another local user, who cannot read it. A claim is also fresh
  (CLAIM_WINDOW_S) and used once (its nonce), so one copied from a transcript does not
  act again. Anything else under that name (a model's own claim, one through Claude Code
  or Codex) is dropped and the call acts as if it named no session. The session
  registered for that OpenCode session is used, else one registered here (id = the
  OpenCode session id), with the server password (OPENCODE_SERVER_PASSWORD, which
  OpenCode passes to its MCP servers) only when the URL is proven to be the OpenCode
  that started us: its listening socket is held by one of our ancestors
  (runtime.core.listeners); any other URL gets a `file` session and nothing is sent to
  it.
- Claude Code keeps the MCP server across `/clear`, which gives the session a new id:
  the SessionStart hook records "this Claude process -> its current session"
  (`record_harness_process`), and the nearest ancestor with a record names the session.
- Otherwise the fallback given at start (`--session`, $ACTORS_SESSION, the session id
  the harness that started us gave us (`harness_session`), the local user).
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any, NamedTuple

from runtime.core.ids import is_valid_id
from runtime.delivery.harness_processes import ancestors, session_of_ancestors
from runtime.store.layout import StateRoot

CALLER_ARG = "_actors_caller"
"""The argument the OpenCode plugin adds to our tool calls (never part of a schema)."""
CLAIM_VERSION = "actors-caller-1"
"""The first line of what a claim's MAC covers (the plugin writes the same)."""
CLAIM_WINDOW_S = 900.0
"""How far a claim's `ts` may be from now: OpenCode signs before it asks the user's
permission for the call, which may take minutes; the nonce forbids any second use."""
REGISTERED_BY = "actors mcp"
CALLER_KEY = "caller.key"
"""The claim key's file in `harness-processes/`, beside the records that say which
session a Claude process serves: both prove who calls (the plugin reads it there too)."""


def caller_key(root: StateRoot, *, create: bool = False) -> bytes | None:
    """The per-user claim key (`harness-processes/caller.key`, 0600); with `create`,
    made when missing (by hard link, so two servers starting at once agree on one)."""
    from runtime.core.errors import ActorsError
    from runtime.store.reads import read_json

    for attempt in (1, 2):
        try:
            record = read_json(root.harness_processes / CALLER_KEY)
        except (OSError, ActorsError):
            return None
        if isinstance(record, dict) and isinstance(record.get("key"), str):
            try:
                key = bytes.fromhex(record["key"])
            except ValueError:
                return None
            return key if len(key) >= 32 else None
        if record is not None or not create or attempt == 2:
            return None
        from runtime.store.writes import ensure_dir, publish_json_once

        try:
            ensure_dir(root.harness_processes)
            publish_json_once(root.harness_processes / CALLER_KEY, {"key": os.urandom(32).hex()})
        except (OSError, ActorsError):
            return None
    return None


def claim_mac(key: bytes, session: str, url: str, ts: int, nonce: str) -> str:
    """What the plugin computes: HMAC-SHA256 over the claim's fields, one per line."""
    import hashlib
    import hmac

    message = "\n".join([CLAIM_VERSION, session, url, str(ts), nonce]).encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()


class Claim(NamedTuple):
    """A caller claim the OpenCode plugin signed: the calling session and its server."""

    session: str
    url: str


class ClaimCheck:
    """Verifies claims for one server process, remembering the nonces it has accepted
    for as long as their claims are fresh (a replayed claim is refused)."""

    def __init__(self, root: StateRoot) -> None:
        self.root = root
        self._seen: dict[str, float] = {}
        self._lock = threading.Lock()

    def verify(self, caller: Any) -> Claim | None:
        if not isinstance(caller, dict):
            return None
        session, url = caller.get("opencode_session"), caller.get("url")
        ts, nonce, mac = caller.get("ts"), caller.get("nonce"), caller.get("mac")
        if not (
            isinstance(session, str)
            and session.startswith("ses")
            and is_valid_id(session)
            and isinstance(url, str)
            and "\n" not in url
            and len(url) <= 2048
            and isinstance(ts, int)
            and not isinstance(ts, bool)
            and isinstance(nonce, str)
            and 16 <= len(nonce) <= 128
            and nonce.isalnum()
            and isinstance(mac, str)
        ):
            return None
        now = time.time()
        if abs(now - ts / 1000.0) > CLAIM_WINDOW_S:
            return None
        key = caller_key(self.root)
        if key is None:
            return None
        import hmac

        if not hmac.compare_digest(claim_mac(key, session, url, ts, nonce), mac):
            return None
        with self._lock:
            for old, seen_at in list(self._seen.items()):
                if now - seen_at > 2 * CLAIM_WINDOW_S:
                    del self._seen[old]
            if nonce in self._seen:
                return None
            self._seen[nonce] = now
        return Claim(session, url)


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
    harness that is calling us right now. A registration of the user's own under that id
    is kept as it is; one made here is made again when the harness moved (a restarted
    OpenCode on another port, a Codex thread under another app-server)."""
    from runtime.delivery.sessions import load_session, register_session

    def kept(record: dict[str, Any]) -> bool:
        if record.get("registered") and record.get("registered_by") != REGISTERED_BY:
            return True
        return bool(
            record.get("registered")
            and record.get("harness") == harness
            and record.get("options") == options
        )

    if not kept(load_session(root, ident)):  # decided again under the record's lock
        register_session(
            root, ident, harness, options, reach=False, keep=kept, registered_by=REGISTERED_BY
        )
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


def own_server(url: str) -> str | None:
    """`url` (without a trailing slash) when it is the server of the OpenCode that
    started us: a loopback URL whose listening socket one of our ancestors holds, so
    neither a URL the model chose nor a port another local user took qualifies. None
    otherwise, and always where /proc cannot tell (not Linux)."""
    from urllib.parse import urlsplit

    from runtime.core.listeners import proven_listener

    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    if not proven_listener(parts.hostname, port, ancestors(os.getpid())):
        return None
    return url.rstrip("/")


def opencode_session(root: StateRoot, claim: Claim) -> str:
    found = _registered(root, "opencode", "session", claim.session)
    if found and found != claim.session:
        return found  # registered by the user under a name of their own
    url = own_server(claim.url)
    if url is None:
        return _register(root, claim.session, "file", {})  # nothing is sent to that URL
    options = {"url": url, "session": claim.session}
    if os.environ.get("OPENCODE_SERVER_PASSWORD"):
        options["password"] = os.environ["OPENCODE_SERVER_PASSWORD"]
        if os.environ.get("OPENCODE_SERVER_USERNAME"):
            options["username"] = os.environ["OPENCODE_SERVER_USERNAME"]
    return _register(root, claim.session, "opencode", options)


class SessionResolver:
    """The session of each tool call (see the module docstring), with `fallback` when the
    call names none."""

    def __init__(self, root: StateRoot, fallback: str, *, explicit: bool = False) -> None:
        self.root, self.fallback, self.explicit = root, fallback, explicit
        self.claims = ClaimCheck(root)

    def resolve(self, meta: dict[str, Any] | None, caller: Any) -> str:
        thread = (meta or {}).get("threadId")
        if isinstance(thread, str) and thread:
            found = codex_session(self.root, thread)
            if found:
                return found
        claim = self.claims.verify(caller)
        if claim is not None:
            return opencode_session(self.root, claim)
        if not self.explicit:
            found = session_of_ancestors(self.root)
            if found:
                return found
        return self.fallback


HARNESS_SESSION_VARIABLES = (
    "CLAUDE_CODE_SESSION_ID",
    "QWEN_CODE_SESSION_ID",
    "COPILOT_AGENT_SESSION_ID",
)
"""The session id a harness gives the processes it starts (its MCP servers too), the id
its hooks get: Claude Code's (seen with the real 2.1.197; its SessionStart hook registers
that id), Qwen Code's (0.24.4: the Stop hook's `session_id`) and Copilot CLI's (1.0.102:
the agentStop hook's `sessionId`). The harness sets it, never the model."""


def harness_session() -> str | None:
    """The session id the harness that started us set (HARNESS_SESSION_VARIABLES), so
    runs spawned through our tools belong to that very session and its turn-end hook
    hands their follow-ups over. A harness started inside another (`qwen -p` in Claude
    Code's shell) inherits the outer one's variable too: the one whose value the nearest
    ancestor set wins (the first ancestor whose own start environment lacks it is the
    harness that set it; a wrapper shell in between inherited it). Where no ancestor's
    environment can be read (not Linux), the first valid one in that order."""
    from runtime.core.process import read_proc

    found = {
        name: value
        for name in HARNESS_SESSION_VARIABLES
        if is_valid_id(value := os.environ.get(name, ""))
    }
    if len(found) <= 1:
        return next(iter(found.values()), None)
    for pid in ancestors(os.getpid()):
        data = read_proc(pid, "environ")
        if data is None:
            break
        held = set(data.split(b"\0"))
        for name, value in found.items():
            if f"{name}={value}".encode() not in held:
                return value  # set by this ancestor, the nearest harness
    return next(iter(found.values()))
