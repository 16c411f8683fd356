"""`actors install opencode`: `mcp.actors` in the project's `opencode.json`, or the
user's `$XDG_CONFIG_HOME/opencode/opencode.json` (default `~/.config`), and the plugin
`plugins/actors-session.js` beside it (`.opencode/` in the project). `actors install
kilo` writes the same into Kilo Code's `kilo.json` and `kilo/plugins/` (`.kilo/`).

OpenCode starts one MCP server per instance, before any session exists, and calls its
tools with the arguments alone. The plugin hooks `tool.execute.before` (which OpenCode
runs with the calling session's id, on the very arguments object it then sends) and
sets `_actors_caller = {opencode_session, url, ts, nonce, mac}` on each call of our
tools, replacing whatever the model put there. `mac` is the HMAC-SHA256 of the other
fields under the key `actors mcp` keeps in `$ACTORS_HOME/harness-processes/caller.key`
(the plugin finds the state root as runtime.core.config does), so `actors mcp` acts for
the session that called and for no session a model names (actors.mcp_session).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from adapters.install_edits import Edit, json_edit, mcp_entry
from runtime.core import config
from runtime.core.errors import BadInput

PLUGIN = """\
// Written by `actors install opencode` (`actors uninstall opencode` removes it).
// Tells the actors MCP server which OpenCode session calls its tools, so the runs a
// session spawns report back to that session. The claim is signed with the key the
// server keeps in its state root (0600): a model can write tool arguments, not this.
import { createHmac, randomBytes } from "node:crypto"
import { readFileSync } from "node:fs"
import { homedir } from "node:os"
import { join, resolve } from "node:path"

const home = (path) => (path === "~" || path.startsWith("~/") ? homedir() + path.slice(1) : path)
const stateRoot = () =>
  resolve(
    process.env.ACTORS_HOME
      ? home(process.env.ACTORS_HOME)
      : join(home(process.env.XDG_STATE_HOME || "~/.local/state"), "actors"),
  )
const callerKey = () => {
  try {
    const key = JSON.parse(readFileSync(join(stateRoot(), "harness-processes", "caller.key"), "utf8")).key
    return typeof key === "string" ? Buffer.from(key, "hex") : undefined
  } catch {
    return undefined
  }
}

export const ActorsSession = async ({ serverUrl }) => ({
  "tool.execute.before": async (input, output) => {
    if (!input.tool.startsWith("actors_") || !output.args || typeof output.args !== "object") return
    const claim = {
      opencode_session: String(input.sessionID),
      url: String(serverUrl),
      ts: Date.now(),
      nonce: randomBytes(16).toString("hex"),
    }
    const key = callerKey()
    if (key) {
      const signed = ["actors-caller-1", claim.opencode_session, claim.url, String(claim.ts), claim.nonce]
      claim.mac = createHmac("sha256", key).update(signed.join("\\n")).digest("hex")
    }
    output.args._actors_caller = claim
  },
})
"""

EARLIER_PLUGINS = (
    """\
// Written by `actors install opencode` (`actors uninstall opencode` removes it).
// Tells the actors MCP server which OpenCode session calls its tools, so the runs a
// session spawns report back to that session.
export const ActorsSession = async ({ serverUrl }) => ({
  "tool.execute.before": async (input, output) => {
    if (!input.tool.startsWith("actors_") || !output.args || typeof output.args !== "object") return
    output.args._actors_caller = { opencode_session: input.sessionID, url: String(serverUrl) }
  },
})
""",
)
"""Plugins earlier versions wrote (unsigned claims, which `actors mcp` now ignores): still
ours, so install replaces them and uninstall removes them."""


def plan(scope: str, wake: str, command: list[str], *, product: str = "opencode") -> list[Edit]:
    """Our local MCP server entry, for `command` (how OpenCode starts us), and the
    plugin; `wake` is Claude Code's. `product` names the config: `opencode`, or `kilo`
    for Kilo Code (an OpenCode fork: the same config keys and plugin API, read from
    `kilo.json` in `~/.config/kilo/` or the project, plugins from `.kilo/plugins/`)."""
    xdg = Path(config.path(config.XDG_CONFIG_HOME))
    if scope == "project":
        target = Path.cwd() / f"{product}.json"
        plugins = Path.cwd() / f".{product}" / "plugins"
    else:
        target, plugins = xdg / product / f"{product}.json", xdg / product / "plugins"
    local: dict[str, Any] = {"type": "local", "command": [*command, "mcp"], "enabled": True}
    return [
        json_edit(target, *mcp_entry("mcp", local), what="MCP server actors (mcp.actors)"),
        whole_file(plugins / "actors-session.js"),
    ]


def plan_kilo(scope: str, wake: str, command: list[str]) -> list[Edit]:
    """`actors install kilo`: OpenCode's plan in Kilo Code's config."""
    return plan(scope, wake, command, product="kilo")


def whole_file(path: Path) -> Edit:
    """A file that is ours alone: written whole, taken out whole (uninstall removes it)."""

    def add(text: str | None) -> str:
        if text and text != PLUGIN and text not in EARLIER_PLUGINS:
            raise BadInput(f"{path} exists and is not ours; remove it first, nothing was changed")
        return PLUGIN

    def remove(text: str, added: object = None) -> str:
        return "" if text == PLUGIN or text in EARLIER_PLUGINS else text

    return Edit(
        path, add, remove, what="plugin actors-session (the calling session for actors mcp)"
    )
