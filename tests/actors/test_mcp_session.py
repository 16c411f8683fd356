"""Per-call session resolution of `actors mcp`, against a real server subprocess driven
by the mcp SDK's client: Codex's `_meta.threadId`, the OpenCode plugin's signed
`_actors_caller`, Claude Code's harness-process record (changed under a running server,
as `/clear` does), and what wins over what. (Forged and replayed claims:
tests/reliability/test_attack_caller.py.)"""

from __future__ import annotations

import json
import os
import secrets
import socket
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
from runtime.delivery.harness_processes import record_harness_process
from runtime.delivery.sessions import load_session
from runtime.store.layout import StateRoot
from tests.peers.conftest import register_session


@asynccontextmanager
async def server(*args: str, **env: str) -> AsyncIterator[ClientSession]:
    """`actors mcp ARGS`, a child of this test process (so this process is its harness)."""
    dropped = ("ACTORS_SESSION", *HARNESS_SESSION_VARIABLES)
    environ = {k: v for k, v in os.environ.items() if k not in dropped}
    environ.update(env)
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "actors", "mcp", *args], env=environ
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def spawn(session: ClientSession, run: str, meta: Any = None, **extra: Any) -> str:
    """Spawn `run` through the tool; the session the run belongs to."""
    args = {"template": "true", "as": f"run:{run}", **extra}
    result = await session.call_tool("spawn", args, meta=meta)
    assert not result.is_error, result.content[0].text
    return str(actors.status(run)["owner_id"])


async def test_codex_thread_in_meta_names_the_registered_session(home: StateRoot) -> None:
    register_session("codex", "me", "--no-check", socket="/nonexistent/s.sock", thread="thread-1")
    async with server() as session:
        assert await spawn(session, "t1", meta={"threadId": "thread-1"}) == "me"
        # an unregistered thread, no app-server above us: a file session of its own
        assert await spawn(session, "t2", meta={"threadId": "thread-2"}) == "codex-thread-2"
        assert load_session(home, "codex-thread-2")["harness"] == "file"
        # no thread: the fallback (the local user)
        assert (await spawn(session, "t3")).startswith("user:")
        # a thread id that cannot name a session is not trusted as one
        assert (await spawn(session, "t4", meta={"threadId": "../../x"})).startswith("user:")


def signed(home: StateRoot, session: str, url: str, **override: Any) -> dict[str, Any]:
    """A claim as the OpenCode plugin makes it (signed with the key `actors mcp` made)."""
    from actors.mcp_session import caller_key, claim_mac

    key = caller_key(home)
    assert key is not None, "actors mcp makes the key when it starts"
    ts, nonce = int(time.time() * 1000), secrets.token_hex(16)
    claim = {"opencode_session": session, "url": url, "ts": ts, "nonce": nonce}
    claim["mac"] = claim_mac(key, session, url, ts, nonce)
    return {**claim, **override}


@contextmanager
def listening() -> Iterator[str]:
    """A loopback port this test process listens on: the server's parent, as OpenCode is."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/"


async def test_opencode_caller_registers_each_session_with_the_server_password(
    home: StateRoot,
) -> None:
    with listening() as url:
        async with server(OPENCODE_SERVER_PASSWORD="pw") as session:
            first, second = signed(home, "ses_aaa", url), signed(home, "ses_bbb", url)
            assert await spawn(session, "o1", _actors_caller=first) == "ses_aaa"
            assert await spawn(session, "o2", _actors_caller=second) == "ses_bbb"
            record = load_session(home, "ses_aaa")
            assert record["harness"] == "opencode"
            assert record["options"] == {
                "url": url.rstrip("/"),
                "session": "ses_aaa",
                "password": "pw",
            }
            # a URL that is not the server of the OpenCode above us: a file session, and
            # neither the password nor a follow-up goes there
            away = signed(home, "ses_ddd", "http://203.0.113.9:4096")
            assert await spawn(session, "o5", _actors_caller=away) == "ses_ddd"
            assert load_session(home, "ses_ddd")["harness"] == "file"
            assert "password" not in load_session(home, "ses_ddd")["options"]
            bogus = signed(home, "../etc", url)
            assert (await spawn(session, "o3", _actors_caller=bogus)).startswith("user:")
            # the reserved argument is taken out before validation: nothing else is accepted
            wrong = await session.call_tool("spawn", {"template": "true", "_other": 1})
            assert wrong.is_error and "_other" in wrong.content[0].text
        # a session the user registered for that OpenCode session is the one used
        register_session(
            "opencode", "mine", "--no-check", url="http://127.0.0.1:4096", session="ses_ccc"
        )
        async with server() as session:
            third = signed(home, "ses_ccc", url)
            assert await spawn(session, "o4", _actors_caller=third) == "mine"


async def test_a_session_registered_here_follows_its_opencode_to_a_new_port(
    home: StateRoot,
) -> None:
    """OpenCode restarted on another port keeps its session ids: the registration made
    by `actors mcp` moves with it (one the user made is left as it is)."""
    async with server(OPENCODE_SERVER_PASSWORD="pw") as session:
        with listening() as before:
            assert (
                await spawn(session, "p1", _actors_caller=signed(home, "ses_m", before)) == "ses_m"
            )
        with listening() as after:
            assert (
                await spawn(session, "p2", _actors_caller=signed(home, "ses_m", after)) == "ses_m"
            )
        assert load_session(home, "ses_m")["options"]["url"] == after.rstrip("/")


def test_the_installed_plugin_signs_what_the_server_verifies(home: StateRoot) -> None:
    """The plugin text `actors install opencode` writes, run by node as OpenCode runs it,
    makes claims the server accepts: the two sides agree on the key's place and the MAC."""
    import shutil
    import subprocess

    from actors.mcp_session import ClaimCheck, caller_key
    from adapters.opencode.install import PLUGIN

    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    caller_key(home, create=True)
    plugin = home.path.parent / "actors-session.mjs"
    plugin.write_text(PLUGIN)
    driver = (
        f"import {{ ActorsSession }} from {json.dumps(str(plugin))};"
        "const hooks = await ActorsSession({ serverUrl: new URL('http://127.0.0.1:4096') });"
        "const output = { args: { template: 'true', _actors_caller: { opencode_session: 'ses_x' } } };"
        "await hooks['tool.execute.before']({ tool: 'actors_spawn', sessionID: 'ses_plugin' }, output);"
        "process.stdout.write(JSON.stringify(output.args));"
    )
    done = subprocess.run(
        [node, "--input-type=module", "-e", driver],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "ACTORS_HOME": str(home.path)},
    )
    assert done.returncode == 0, done.stderr
    args = json.loads(done.stdout)
    claim = args["_actors_caller"]  # the model's own claim replaced
    assert claim["opencode_session"] == "ses_plugin" and claim["url"] == "http://127.0.0.1:4096/"
    assert ClaimCheck(home).verify(claim) == ("ses_plugin", "http://127.0.0.1:4096/")


async def test_the_harness_process_record_is_read_per_call(home: StateRoot) -> None:
    """The record of this (the server's parent) process changes while the server runs,
    as Claude Code's SessionStart hook rewrites it on `/clear`."""
    async with server() as session:
        assert (await spawn(session, "c0")).startswith("user:")
        record_harness_process(home, "before-clear", pid=os.getpid())
        assert await spawn(session, "c1") == "before-clear"
        record_harness_process(home, "after-clear", pid=os.getpid())
        assert await spawn(session, "c2") == "after-clear"
        # Codex's thread wins over the process record (several threads, one server)
        assert await spawn(session, "c3", meta={"threadId": "th9"}) == "codex-th9"
    async with server("--session", "explicit") as session:
        assert await spawn(session, "c4") == "explicit"  # --session is used as given


async def test_a_record_of_a_recycled_pid_is_not_used(home: StateRoot) -> None:
    directory = home.path / "harness-processes"
    directory.mkdir(mode=0o700, parents=True)
    (directory / f"{os.getpid()}-1").write_text('{"session": "stale"}')  # other start time
    async with server() as session:
        assert (await spawn(session, "r1")).startswith("user:")


HARNESS = (
    "import os, subprocess, sys; name, value = sys.argv[1].split('=');"
    " subprocess.run(sys.argv[2:], env={**os.environ, name: value}, check=True)"
)
"""A harness: starts its argv with one variable more (its session id) in the environment."""
ASK = "from actors.mcp_session import harness_session; print(harness_session())"


@pytest.mark.parametrize(
    ("outer", "inner"),
    [
        ("CLAUDE_CODE_SESSION_ID", "QWEN_CODE_SESSION_ID"),
        ("QWEN_CODE_SESSION_ID", "COPILOT_AGENT_SESSION_ID"),
        ("COPILOT_AGENT_SESSION_ID", "CLAUDE_CODE_SESSION_ID"),
    ],
)
@pytest.mark.parametrize("wrapper", [False, True], ids=["direct", "through-a-shell"])
def test_a_harness_inside_another_gives_its_own_session_not_the_outer_one(
    outer: str, inner: str, wrapper: bool
) -> None:
    """`qwen -p` run from Claude Code's shell inherits CLAUDE_CODE_SESSION_ID: the MCP
    server Qwen starts acts for Qwen's session (the variable its nearest ancestor set),
    also when a shell stands between Qwen and the server, whatever the variables' order."""
    ask = [sys.executable, "-c", ASK]
    if wrapper:
        ask = ["sh", "-c", '"$@"', "sh", *ask]
    env = {k: v for k, v in os.environ.items() if k not in HARNESS_SESSION_VARIABLES}
    env[outer] = "outer-session"
    done = subprocess.run(
        [sys.executable, "-c", HARNESS, f"{inner}=inner-session", *ask],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "inner-session\n"
