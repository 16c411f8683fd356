"""Issue 26 #1: which session a tool call acts for was model-controlled.

`_actors_caller` is an ordinary tool-call argument: any harness's model (or a prompt
injection) can write it. With `{"opencode_session": "ses_victim"}` a plain `message
control.kill` killed another session's run without `--force`, `inbox_read` marked that
session's follow-ups read, and with a `url` beside it `spawn` registered a session that
sent `Authorization: Basic opencode:<OPENCODE_SERVER_PASSWORD>` to a loopback port
anyone could be listening on. And a session registered for a port that another local
user took later (our OpenCode gone) got the password too.

Every attack goes through the real `actors mcp` over stdio (driven by the mcp SDK's
client, a child of this test process as it is of a harness), the real CLI, real runs
and real listening sockets, one of them owned by another uid (this suite runs as root:
`subprocess.Popen(user=nobody)`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import select
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

import actors
from actors.mcp_session import HARNESS_SESSION_VARIABLES
from runtime.store.layout import StateRoot
from tests.conftest import cli, finished
from tests.reliability._attack import NOBODY

VICTIM = "ses_victim"
PASSWORD = "TOKEN-OPENCODE-PASSWORD-26"


@asynccontextmanager
async def mcp_server(**env: str) -> AsyncIterator[ClientSession]:
    """`actors mcp`, a child of this test process (as of a harness), no session given."""
    dropped = ("ACTORS_SESSION", *HARNESS_SESSION_VARIABLES)
    environ = {k: v for k, v in os.environ.items() if k not in dropped}
    environ.update(env)
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "actors", "mcp"], env=environ
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def plugin_claim(home: StateRoot, session: str, url: str, ts: int | None = None) -> dict[str, Any]:
    """What the OpenCode plugin adds to a call of `session` (it alone reads the key; on a
    tree that makes no key, a random one stands in and the fields are the same)."""
    path = home.path / "harness-processes" / "caller.key"
    key = bytes.fromhex(json.loads(path.read_text())["key"]) if path.exists() else os.urandom(32)
    ts = int(time.time() * 1000) if ts is None else ts
    nonce = secrets.token_hex(16)
    signed = "\n".join(["actors-caller-1", session, url, str(ts), nonce]).encode()
    mac = hmac.new(key, signed, hashlib.sha256).hexdigest()
    return {"opencode_session": session, "url": url, "ts": ts, "nonce": nonce, "mac": mac}


def forged_claims(home: StateRoot, url: str) -> list[dict[str, Any]]:
    """Claims for the victim that a model (or another user) can write: none signed with
    the key, or signed long ago."""
    now = int(time.time() * 1000)
    wrong_key = hmac.new(os.urandom(32), b"x", hashlib.sha256).hexdigest()
    stale = plugin_claim(home, VICTIM, url, ts=now - 3 * 3600 * 1000)  # from an old transcript
    return [
        {"opencode_session": VICTIM},
        {"opencode_session": VICTIM, "url": url},
        {"opencode_session": VICTIM, "url": url, "ts": now, "nonce": "a" * 32, "mac": "0" * 64},
        {"opencode_session": VICTIM, "url": url, "ts": now, "nonce": "b" * 32, "mac": wrong_key},
        {**plugin_claim(home, "ses_attacker", url), "opencode_session": VICTIM},
        stale,
    ]


async def call(mcp: ClientSession, tool: str, args: dict[str, Any]) -> tuple[bool, str]:
    result = await mcp.call_tool(tool, args)
    return bool(result.is_error), str(result.content[0].text)


async def test_a_forged_caller_cannot_stop_or_message_another_sessions_run(
    home: StateRoot,
) -> None:
    async with mcp_server() as mcp:
        victim = actors.spawn(template="sleep 300", as_="run:victim-run", session=VICTIM)
        for forged in forged_claims(home, "http://127.0.0.1:9"):
            for kind in ("control.kill", "control.stop"):
                args = {"to": "run:victim-run", "type": kind, "_actors_caller": forged}
                error, text = await call(mcp, "message", args)
                assert error and f"belongs to {VICTIM}" in text, (forged, text)
        # a claim the plugin really made acts once; copied into a second call it does not
        genuine = plugin_claim(home, VICTIM, "http://127.0.0.1:9")
        error, text = await call(mcp, "inbox_read", {"_actors_caller": genuine})
        assert not error, text
        replay = {"to": "run:victim-run", "type": "control.kill", "_actors_caller": genuine}
        error, text = await call(mcp, "message", replay)
        assert error and f"belongs to {VICTIM}" in text, text
    status = actors.status(victim["run"])
    assert status["status"] == "running", status
    assert actors.inspect(f"run:{victim['run']}", "messages")["messages"] == []


async def test_a_forged_caller_cannot_read_another_sessions_follow_ups(home: StateRoot) -> None:
    done = finished(actors.spawn(template="echo TOKEN-VICTIM-RESULT", session=VICTIM))
    assert done["status"] == "done"
    async with mcp_server() as mcp:
        for forged in forged_claims(home, "http://127.0.0.1:9"):
            error, text = await call(mcp, "inbox_read", {"bodies": True, "_actors_caller": forged})
            assert not error, text
            assert "TOKEN-VICTIM-RESULT" not in text and done["run"] not in text, text
    peek = cli("inbox", "read", "--session", VICTIM, "--peek")
    assert peek.stdout.startswith("1 unread follow-up(s)"), peek.stdout  # still the victim's


async def test_a_claim_through_claude_code_or_codex_is_ignored(home: StateRoot) -> None:
    """Claude Code and Codex say who calls by other means (the SessionStart record of
    the process, `_meta.threadId`); a claim in the arguments changes nothing there."""
    claude_session = "0b5e55ed-0000-4000-8000-00000000c1a0"
    start = json.dumps({"session_id": claude_session, "source": "startup", "cwd": "/"})
    assert cli("hook", "session-start", input=start).returncode == 0  # this process: "Claude"
    async with mcp_server() as mcp:
        forged = {"opencode_session": VICTIM, "url": "http://127.0.0.1:9"}
        args = {"template": "true", "as": "run:via-claude", "_actors_caller": forged}
        error, text = await call(mcp, "spawn", args)
        assert not error, text
        assert actors.status("via-claude")["owner_id"] == claude_session
        args = {"template": "true", "as": "run:via-codex", "_actors_caller": forged}
        result = await mcp.call_tool("spawn", args, meta={"threadId": "thread-26"})
        assert not result.is_error, result.content[0].text
        assert actors.status("via-codex")["owner_id"] == "codex-thread-26"
    assert not (home.sessions / VICTIM).exists()


class Listener:
    """A TCP listener in its own process (another uid with `user`): for each connection
    it reports what arrived before the end of the request head (or EOF) as one JSON
    line, then answers 503."""

    SCRIPT = r"""
import json, socket, sys
if len(sys.argv) > 1:  # a Unix socket at that path
    server = socket.socket(socket.AF_UNIX)
    server.bind(sys.argv[1])
else:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
server.listen(16)
print(server.getsockname()[1] if len(sys.argv) == 1 else 0, flush=True)
while True:
    conn, _ = server.accept()
    conn.settimeout(20)
    data = b""
    try:
        while b"\r\n\r\n" not in data and b'"type": "user"' not in data:
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    print(json.dumps(data.decode("latin-1")), flush=True)
    try:
        conn.sendall(b"HTTP/1.1 503 Busy\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    except OSError:
        pass
    conn.close()
"""

    def __init__(self, user: int | None = None, unix: str | None = None) -> None:
        # another uid cannot run this tree's interpreter (under /root): the system one
        python = sys.executable if user is None else shutil.which("python3", path="/usr/bin:/bin")
        if python is None:
            pytest.skip("no system python3 for a listener of another uid")
        self.proc = subprocess.Popen(
            [python, "-I", "-c", self.SCRIPT, *([unix] if unix else [])],
            stdout=subprocess.PIPE,
            cwd="/",
            user=user,
            group=user,
            extra_groups=[] if user is not None else None,
        )
        self.port = int(self._line(30))
        self.url = f"http://127.0.0.1:{self.port}"

    def _line(self, timeout: float) -> str:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            raise TimeoutError(f"the listener said nothing within {timeout}s")
        return self.proc.stdout.readline().decode()

    def request(self, timeout: float = 30) -> str:
        """What the next connection brought (its request head; '' when it sent nothing)."""
        return str(json.loads(self._line(timeout)))

    def quiet(self) -> bool:
        """Nothing reported so far (no connection finished)."""
        assert self.proc.stdout is not None
        return not select.select([self.proc.stdout], [], [], 0)[0]

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=30)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@contextmanager
def listener(user: int | None = None, unix: str | None = None) -> Iterator[Listener]:
    if user is not None and os.geteuid() != 0:
        pytest.skip("a listener of another uid needs root")
    running = Listener(user, unix)
    try:
        yield running
    finally:
        running.close()


def _followed_up(home: StateRoot, run: str) -> bool:
    return (home.run(run).followup).exists()


def wait_followed_up(home: StateRoot, run: str) -> None:
    """The run's follow-up is durable and its first delivery attempt over (the runner
    publishes followup.json after both)."""
    from tests.conftest import wait_for_change

    wait_for_change(home.runs, lambda: _followed_up(home, run), 60, f"run {run} followed up")


async def test_no_password_goes_to_a_url_a_call_supplies(home: StateRoot) -> None:
    """Neither a forged claim's URL nor a genuine claim's URL that is not the OpenCode
    above the server (a port some other process holds) gets the password, or anything."""
    with listener() as elsewhere:
        async with mcp_server(OPENCODE_SERVER_PASSWORD=PASSWORD) as mcp:
            forged = {"opencode_session": VICTIM, "url": elsewhere.url}
            args = {"template": "true", "as": "run:forged-url", "_actors_caller": forged}
            error, text = await call(mcp, "spawn", args)
            assert not error, text
            signed = plugin_claim(home, "ses_caller", elsewhere.url)
            args = {"template": "true", "as": "run:not-our-server", "_actors_caller": signed}
            error, text = await call(mcp, "spawn", args)
            assert not error, text
        for run in ("forged-url", "not-our-server"):
            finished(actors.status(run))
            wait_followed_up(home, run)
        assert elsewhere.quiet(), elsewhere.request()
    assert actors.status("forged-url")["owner_id"] != VICTIM
    record = json.loads((home.sessions / "ses_caller" / "session.json").read_text())
    assert record["harness"] == "file" and "password" not in json.dumps(record)


def test_a_port_another_user_took_never_gets_the_password(home: StateRoot) -> None:
    """A session registered for a loopback port (its OpenCode since gone) whose port
    another local user now listens on: the follow-up's connection is refused before a
    byte is sent, and so is registering against that port."""
    with listener(user=NOBODY) as taken:
        registered = cli(
            "session", "register", "--harness", "opencode", "--id", "oc-gone", "--no-check",
            "-o", f"url={taken.url}", "-o", "session=ses_gone", "-o", f"password={PASSWORD}",
        )  # fmt: skip
        assert registered.returncode == 0, registered.stderr
        run = actors.spawn(template="echo TOKEN-FOR-OC", session="oc-gone")
        finished(run)
        head = taken.request()  # the delivery connected, and sent nothing
        assert "authorization" not in head.lower() and PASSWORD not in head, head
        flushed = cli("flush", "--session", "oc-gone")
        assert PASSWORD not in flushed.stdout + flushed.stderr
        probe = cli(
            "session", "register", "--harness", "opencode", "--id", "oc-probe",
            "-o", f"url={taken.url}", "-o", "session=ses_probe", "-o", f"password={PASSWORD}",
        )  # fmt: skip
        assert probe.returncode == 2, probe.stderr
        assert "uid 65534" in probe.stderr and not (home.sessions / "oc-probe").exists()
        while not taken.quiet():
            head = taken.request()
            assert "authorization" not in head.lower() and PASSWORD not in head, head
    unread = cli("inbox", "read", "--session", "oc-gone", "--peek")
    assert unread.stdout.startswith("1 unread follow-up(s)"), unread.stdout  # kept, not lost


def _states(home: StateRoot, session: str) -> list[dict[str, Any]]:
    from runtime.delivery.engine import DeliveryRunner

    return [dict(state) for state in DeliveryRunner(home).states(session).values()]


SOCKET_SESSIONS = {
    "claude_code": ["-o", "messaging=socket", "-o", "messaging_token=TOKEN-CLAUDE-TOKEN-26"],
    "codex": ["-o", "thread=thread-gone"],
    "pi": [],
}
"""Sessions delivered through a Unix socket path: Claude Code's messaging socket (with its
token), a Codex app-server's socket, a pi host's socket."""


@pytest.mark.parametrize("harness", sorted(SOCKET_SESSIONS))
def test_a_socket_path_another_user_took_gets_nothing(home: StateRoot, harness: str) -> None:
    """The same for a socket path (SO_PEERCRED): a path now listened on by another uid
    gets neither the token nor the follow-up, and the follow-up is kept."""
    import tempfile

    shared = tempfile.mkdtemp(prefix="actors-26-")
    os.chown(shared, NOBODY, NOBODY)
    path = os.path.join(shared, "app.sock")
    option = "messaging_socket" if harness == "claude_code" else "socket"
    try:
        with listener(user=NOBODY, unix=path) as taken:
            registered = cli(
                "session", "register", "--harness", harness, "--id", "gone", "--no-check",
                "-o", f"{option}={path}", *SOCKET_SESSIONS[harness],
            )  # fmt: skip
            assert registered.returncode == 0, registered.stderr
            finished(actors.spawn(template="echo TOKEN-FOR-SOCKET", session="gone"))
            if harness == "claude_code":  # the socket file is checked before connecting
                wakes = [s.get("metadata", {}).get("wake") for s in _states(home, "gone")]
                assert any("belongs to uid 65534" in str(w) for w in wakes), wakes
                assert taken.quiet()
            else:
                head = taken.request()  # it connected, and wrote nothing
                assert head == "", head
        unread = cli("inbox", "read", "--session", "gone", "--peek")
        assert unread.stdout.startswith("1 unread follow-up(s)"), unread.stdout
    finally:
        shutil.rmtree(shared, ignore_errors=True)
