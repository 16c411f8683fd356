"""The MCP server driven by the mcp SDK's own client over stdio."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

import actors
from runtime.core.process import wait_gone
from runtime.store.layout import StateRoot


def _server(home: StateRoot) -> StdioServerParameters:
    import os

    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "actors", "mcp", "--session", "coord-mcp"],
        env=dict(os.environ),
    )


async def _call(session: ClientSession, name: str, args: dict[str, Any]) -> Any:
    result = await session.call_tool(name, args)
    assert not result.is_error, result.content[0].text
    return result


async def test_spawn_message_inspect_and_read_the_follow_up(home: StateRoot) -> None:
    import actors

    async with stdio_client(_server(home)) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        assert "Do not poll" in init.instructions
        tools = await session.list_tools()
        assert sorted(t.name for t in tools.tools) == [
            "inbox_read",
            "inspect",
            "message",
            "recipes",
            "restart",
            "result",
            "spawn",
            "status",
            "tools_register",
        ]
        spawn_schema = next(t for t in tools.tools if t.name == "spawn").input_schema
        assert set(spawn_schema["properties"]) == {
            "as",
            "recipe",
            "file",
            "template",
            "values",
            "group",
            "after",
        }

        started = await _call(
            session, "spawn", {"recipe": "player", "as": "run:mcp-player", "values": {"tracks": 2}}
        )
        assert started.structured_content["run"] == "mcp-player"
        assert "do not poll" in started.structured_content["note"]  # what Claude Code shows
        sent = await _call(session, "message", {"to": "run:mcp-player", "type": "player.stop"})
        assert sent.structured_content["state"] == "queued"
        final = actors.wait("mcp-player", timeout=60)
        assert final["status"] == "done"
        assert wait_gone([int(actors.status("mcp-player")["pid"])], timeout=60)
        view = await _call(session, "inspect", {"target": "run:mcp-player", "view": "messages"})
        types_seen = [m["type"] for m in view.structured_content["messages"]]
        assert "player.stopped" in types_seen
        assert "\n" not in view.content[0].text  # compact by default
        full = await _call(
            session, "inspect", {"target": "run:mcp-player", "view": "messages", "verbose": True}
        )
        assert "\n" in full.content[0].text and len(full.content[0].text) > len(
            view.content[0].text
        )
        peek = await _call(session, "inbox_read", {"peek": True})
        (shown,) = peek.structured_content["followups"]
        assert set(shown) == {"type", "from", "summary", "body_file"}, shown
        assert "mcp-player" in shown["summary"]
        assert '"run": "mcp-player"' in Path(shown["body_file"]).read_text()  # the whole body
        assert f"[actors] body: {shown['body_file']}" in peek.content[0].text  # as the CLI says
        inbox = await _call(session, "inbox_read", {"bodies": True})
        followups = inbox.structured_content["followups"]
        assert [(f["type"], f["body"]["run"]) for f in followups] == [("run.done", "mcp-player")]
        assert followups[0]["body"]["result"]["type"] == "player.stopped"
        again = await _call(session, "inbox_read", {})
        assert again.structured_content["followups"] == []


async def test_errors_come_back_as_tool_errors_with_the_cli_message(home: StateRoot) -> None:
    async with stdio_client(_server(home)) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        missing = await session.call_tool("message", {"to": "run:ghost", "type": "x.y"})
        assert missing.is_error
        assert missing.content[0].text == "no run ghost; `actors ls` lists the runs"
        bad = await session.call_tool("spawn", {"template": "echo {who}"})
        assert bad.is_error and "no value for who" in bad.content[0].text
        extra = await session.call_tool("spawn", {"recipe": "hello", "bogus": 1})
        assert extra.is_error and "bogus" in extra.content[0].text
        recipes = await session.call_tool("recipes", {})
        assert {"hello", "fanout", "ticker", "player"} <= set(recipes.structured_content["recipes"])
        # a value of another JSON type is refused, never coerced into what was not written
        for tool, args in (
            ("inspect", {"target": "session:all", "lines": True}),
            ("inspect", {"target": "session:all", "lines": "40"}),
            ("inbox_read", {"peek": "no"}),
            ("spawn", {"recipe": "hello", "as": 7}),
        ):
            wrong = await session.call_tool(tool, args)
            assert wrong.is_error, (tool, args)
            assert len(wrong.content[0].text.splitlines()) == 1, wrong.content[0].text
        assert actors.runs() == []


async def test_under_claude_code_the_server_acts_for_the_claude_session(home: StateRoot) -> None:
    """Claude Code exports CLAUDE_CODE_SESSION_ID to the MCP servers it starts (see the
    peers test); runs spawned through the tools then belong to that session."""
    import os

    import actors

    env = {k: v for k, v in os.environ.items() if k != "ACTORS_SESSION"}
    env["CLAUDE_CODE_SESSION_ID"] = "0b5e8a44-1c2d-4e6f-8a9b-0c1d2e3f4a5b"
    params = StdioServerParameters(command=sys.executable, args=["-m", "actors", "mcp"], env=env)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await _call(session, "spawn", {"template": "true", "as": "run:cc-owned"})
    assert actors.status("cc-owned")["owner_id"] == env["CLAUDE_CODE_SESSION_ID"]


async def test_spawn_into_a_full_group_is_queued_and_restart_starts_a_finished_run(
    home: StateRoot,
) -> None:
    import actors
    from tests.conftest import cli, make_fifo, wait_for_change

    assert cli("group", "set", "mcp", "--parallel", "1").returncode == 0
    gate = make_fifo(home.path.parent / "busy.fifo")
    async with stdio_client(_server(home)) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await _call(
            session,
            "spawn",
            {"template": "cat {g}", "values": {"g": str(gate)}, "as": "busy", "group": "mcp"},
        )
        wait_for_change(
            home.run("busy").dir, lambda: actors.status("busy")["status"] == "running", 30
        )
        queued = await _call(
            session, "spawn", {"template": "echo later", "as": "later", "group": "mcp"}
        )
        assert queued.structured_content["status"] == "queued"
        assert "queued (waits for a slot of group mcp)" in queued.structured_content["note"]
        skipped = await _call(
            session, "spawn", {"template": "echo x", "as": "dependent", "after": ["run:busy"]}
        )
        assert skipped.structured_content["status"] == "queued"
        unknown = await session.call_tool("spawn", {"template": "echo x", "group": "nope"})
        assert unknown.is_error and "no group nope" in unknown.content[0].text
        early = await session.call_tool("restart", {"run": "run:busy"})
        assert early.is_error and "only a finished run" in early.content[0].text
        assert cli("kill", "busy", "--session", "coord-mcp").returncode == 0
        assert actors.wait("later", timeout=60)["status"] == "done"
        assert actors.wait("dependent", timeout=60)["status"] == "skipped"
        again = await _call(session, "restart", {"run": "run:dependent"})
        assert again.structured_content["run"] == "dependent-2"
        assert actors.wait("dependent-2", timeout=60)["status"] == "done"


async def test_status_and_result_mask_the_runs_secrets(home: StateRoot) -> None:
    """MCP `status` shows what `actors status --json` shows: a reason may quote a secret
    value (here the run's result.json says it, as a run may write it), and the model
    never sees it."""
    import json

    import actors

    secret = "hunter2-SECRET-value"
    record = actors.spawn(
        template="sh -c 'exit 3' x {token}", values={"token": secret}, secret_names=["token"]
    )
    assert actors.wait(record["run"], timeout=60)["status"] == "failed"
    result = home.run(record["run"]).result
    said = json.loads(result.read_text())
    result.write_text(json.dumps(dict(said, reason=f"it said {secret}")))
    assert secret in actors.status(record["run"])["reason"]  # the API is the owner's own
    async with stdio_client(_server(home)) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        for tool in ("status", "result"):
            seen = await _call(session, tool, {"run": record["run"]})
            assert secret not in seen.content[0].text, (tool, seen.content[0].text)
            assert secret not in str(seen.structured_content), tool
