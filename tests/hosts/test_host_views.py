"""Runs on hosts in the dashboard and the MCP tools: `run:<host>/<id>` where a run id is
(status, result, message, kill), listed with their host, owned as locally; against a
real sshd host (tests/hosts/netns.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from runtime.store.layout import StateRoot
from tests.conftest import cli, make_fifo, read_fifo_line
from tests.dashboard.conftest import start_dashboard, stop_dashboard
from tests.dashboard.test_server import ACTION, get, post
from tests.hosts.netns import SshHost
from tests.hosts.test_hosts import add, spawn


def _mcp(session: str) -> StdioServerParameters:
    import os

    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "actors", "mcp", "--session", session],
        env=dict(os.environ),
    )


async def test_mcp_status_result_message_and_kill_of_a_remote_run(
    ssh_home: StateRoot, ssh_hosts: list[SshHost], tmp_path: Path
) -> None:
    host = ssh_hosts[0]
    add(host)
    ready = make_fifo(tmp_path / "ready")
    mine = spawn(host, "-t", f"sh -c 'echo up > {ready}; exec sleep 31341'", session="coord-mcp")
    theirs = spawn(host, "-t", "sleep 31342", session="someone-else")
    done = spawn(host, "-t", "echo hello-from-alpha", session="coord-mcp")
    player = spawn(host, "player", session="coord-mcp")
    assert read_fifo_line(ready) == "up"
    assert cli("wait", done).returncode == 0
    async with stdio_client(_mcp("coord-mcp")) as (read, write), ClientSession(read, write) as mcp:
        await mcp.initialize()
        status = await mcp.call_tool("status", {"run": mine})
        assert not status.is_error, status.content[0].text
        assert status.structured_content["status"] == "running"
        assert status.structured_content["run"] == mine
        assert status.structured_content["host"] == "alpha"
        result = await mcp.call_tool("result", {"run": done})
        assert not result.is_error, result.content[0].text
        assert "hello-from-alpha" in result.structured_content["output"]
        # another session's run: refused, as locally
        refused = await mcp.call_tool("message", {"to": theirs, "type": "control.kill"})
        assert refused.is_error and "belongs to someone-else" in refused.content[0].text
        assert any("sleep 31342" in p for p in host.processes())
        unknown = await mcp.call_tool("status", {"run": "run:alpha/nope"})
        assert unknown.is_error and "no run nope placed on host alpha" in unknown.content[0].text
        killed = await mcp.call_tool("message", {"to": mine, "type": "control.kill"})
        assert not killed.is_error, killed.content[0].text
        # a message the run accepts goes to its mailbox there; control.stop is its cancel
        sent = await mcp.call_tool(
            "message", {"to": player, "type": "player.next", "body": {"n": 1}}
        )
        assert not sent.is_error, sent.content[0].text
        assert sent.structured_content["host"] == "alpha"
        stopped = await mcp.call_tool("message", {"to": player, "type": "control.stop"})
        assert not stopped.is_error, stopped.content[0].text
    inbox = cli("inspect", player, "--view", "mailbox", "--json")
    assert '"player.next"' in inbox.stdout, inbox.stdout + inbox.stderr
    assert not any("sleep 31341" in p for p in host.processes())
    rows = {r["run"]: r for r in json.loads(cli("ls", "--json").stdout)}
    assert rows[mine]["status"] == "killed" and rows[player]["status"] == "cancelled"


def test_the_dashboard_lists_shows_and_kills_remote_runs(
    ssh_home: StateRoot, ssh_hosts: list[SshHost], tmp_path: Path
) -> None:
    host = ssh_hosts[1]
    add(host)
    ready = make_fifo(tmp_path / "ready")
    mine = spawn(host, "-t", f"sh -c 'echo up > {ready}; exec sleep 31343'")
    theirs = spawn(host, "-t", "sleep 31344", session="someone-else")
    assert read_fifo_line(ready) == "up"
    server = start_dashboard("--session", "coord")
    try:
        page = get(server, "/api/runs", headers={"X-Actors-Token": server.token}).json()
        listed: dict[str, Any] = {
            r["run"]: r for g in page["groups"] for r in g["runs"] if r.get("host")
        }
        assert {listed[mine]["host"], listed[theirs]["host"]} == {"beta"}
        assert listed[mine]["status"] == "placed"
        _, run_id = mine[4:].split("/")
        detail = get(
            server, f"/api/hosts/beta/runs/{run_id}", headers={"X-Actors-Token": server.token}
        )
        assert detail.status_code == 200, detail.text
        assert detail.json()["status"]["status"] == "running"
        assert detail.json()["status"]["run"] == mine
        other = theirs[4:].split("/")[1]
        refused = post(server, f"/api/hosts/beta/runs/{other}/kill", {}, **ACTION)
        assert refused.status_code == 409 and refused.json()["owner"] == "someone-else"
        assert any("sleep 31344" in p for p in host.processes())
        sent = post(server, "/api/message", {"to": theirs, "type": "note.x", "body": 1}, **ACTION)
        assert sent.status_code == 409 and sent.json()["needs_force"] is True
        killed = post(server, f"/api/hosts/beta/runs/{run_id}/kill", {}, **ACTION)
        assert killed.status_code == 200, killed.text
        assert not any("sleep 31343" in p for p in host.processes())
        forced = post(server, f"/api/hosts/beta/runs/{other}/kill", {"force": True}, **ACTION)
        assert forced.status_code == 200, forced.text
        assert not any("sleep 31344" in p for p in host.processes())
        missing = get(server, "/api/hosts/beta/runs/nope", headers={"X-Actors-Token": server.token})
        assert missing.status_code == 404
        bad = get(server, "/api/hosts/../runs/x", headers={"X-Actors-Token": server.token})
        assert bad.status_code == 404
    finally:
        assert stop_dashboard(server).returncode == 0
    after = {r["run"]: r["status"] for r in json.loads(cli("ls", "--json").stdout)}
    assert after[mine] == after[theirs] == "killed"


def test_actors_message_control_kill_and_stop_end_the_placement(
    ssh_home: StateRoot, ssh_hosts: list[SshHost]
) -> None:
    """`actors message run:<host>/<id> control.kill` (and `control.stop`) is the host's
    kill (cancel), as from the MCP tools: the run ends there and its placement here, so
    `ls` and `status` agree and `host rm` is not refused for it."""
    add(ssh_hosts[0])
    for kind, end in (("control.kill", "killed"), ("control.stop", "cancelled")):
        address = spawn(ssh_hosts[0], "-t", "sleep 300")
        done = cli("message", address, kind, "--session", "coord")
        assert done.returncode == 0, done.stderr
        rows = {r["run"]: r for r in json.loads(cli("ls", "--json").stdout)}
        assert rows[address]["status"] == end, rows[address]
        there = json.loads(cli("status", address, "--json").stdout)
        assert there["status"] == end, there
    removed = cli("host", "rm", ssh_hosts[0].name)
    assert removed.returncode == 0, removed.stderr
