"""`actors install pi`: the MCP server `actors` in pi's `mcp.json` and the actors pi
extension (`extensions/actors.js`), in pi's agent directory (`$PI_CODING_AGENT_DIR`,
default `~/.pi/agent`) or, with `--project`, in the project's `.pi/`.

pi (>= 0.99) connects the servers of `mcp.json` itself; ours is declared with `direct`
exposure (its seven tools are declared to the model like built-in ones, not hidden
behind codemode or tool search). The extension (EXTENSION below, JavaScript that pi
loads with jiti) runs inside the user's own pi: at each session start it runs `actors
hook pi-session-start`, which registers the session and records that this pi process
serves it (so the `actors mcp` pi started acts for it), then it watches the session's
wake file with fs.watch and, on a change, runs `actors hook pi-wake` and sends what it
answers into pi as a user message (adapters/pi/extension.py).

A project's `.pi/` is trust-gated since pi 0.79: pi reads neither its `mcp.json` nor its
extensions until the user trusts the project (pi asks in the TUI; `--approve` in RPC and
print mode), so the user scope is the default.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from adapters.install_edits import Edit, json_edit, mcp_entry
from runtime.core.errors import BadInput

HEADER = "// Written by `actors install pi` (`actors uninstall pi` removes it).\n"

EXTENSION = """\
// Wakes this pi when a run it started reports back: each session is registered with
// actors, its wake file watched (fs.watch, no timer), and unread follow-ups are sent in
// as one user message, fenced as data (adapters/pi/extension.py in actors).
import { spawn } from "node:child_process"
import { watch } from "node:fs"
import { basename, dirname } from "node:path"

const ACTORS = __ACTORS__
const HOOK_TIMEOUT_MS = 30000
const MAX_ROUNDS = 64 // hand-overs in a row at most (each marks what it sent read)

// `actors hook NAME` with `input` as JSON on stdin; its one-line JSON answer, or null.
const hook = (name, input) =>
  new Promise((resolve) => {
    let out = ""
    let child
    try {
      child = spawn(ACTORS[0], [...ACTORS.slice(1), "hook", name], {
        stdio: ["pipe", "pipe", "ignore"],
        timeout: HOOK_TIMEOUT_MS,
      })
    } catch {
      return resolve(null)
    }
    child.on("error", () => resolve(null))
    child.stdout.on("data", (chunk) => (out += chunk))
    child.on("close", () => {
      try {
        const answer = JSON.parse(out.split("\\n")[0])
        resolve(answer && typeof answer === "object" ? answer : null)
      } catch {
        resolve(null)
      }
    })
    child.stdin.on("error", () => {})
    child.stdin.end(JSON.stringify(input))
  })

// `actors hook pi-serve`, kept running for this pi: one request line, one answer line
// (matched by `seq`), so a wake pays no interpreter start. Started on first use, again
// after it ended; ended with the session.
const server = () => {
  const self = { pending: new Map(), seq: 0, buffer: "", ended: false }
  try {
    self.child = spawn(ACTORS[0], [...ACTORS.slice(1), "hook", "pi-serve"], {
      stdio: ["pipe", "pipe", "ignore"],
    })
  } catch {
    return null
  }
  const end = () => {
    self.ended = true
    for (const resolve of self.pending.values()) resolve(null)
    self.pending.clear()
  }
  self.child.on("error", end)
  self.child.on("close", end)
  self.child.stdin.on("error", () => {})
  self.child.stdout.on("data", (chunk) => {
    self.buffer += chunk
    for (let cut; (cut = self.buffer.indexOf("\\n")) >= 0; ) {
      const line = self.buffer.slice(0, cut)
      self.buffer = self.buffer.slice(cut + 1)
      let answer
      try {
        answer = JSON.parse(line)
      } catch {
        continue
      }
      const resolve = answer && self.pending.get(answer.seq)
      if (resolve) {
        self.pending.delete(answer.seq)
        resolve(answer)
      }
    }
  })
  self.ask = (input) =>
    new Promise((resolve) => {
      if (self.ended) return resolve(null)
      const seq = ++self.seq
      self.pending.set(seq, resolve)
      self.child.stdin.write(JSON.stringify({ ...input, seq }) + "\\n")
    })
  self.close = () => self.child.stdin.end()
  return self
}

export default function actors(pi) {
  let current = null

  // One hand-over at a time; a change while one runs makes it look again after, and so
  // does a hand-over (one holds ~9,000 characters: the rest come in the next message).
  const drain = async (armed) => {
    if (armed.running) return void (armed.again = true)
    armed.running = true
    try {
      let handed = false
      for (let round = 0; round < MAX_ROUNDS && !armed.closed; round++) {
        armed.again = false
        if (!armed.server || armed.server.ended) armed.server = server()
        const asked = { session: armed.session }
        const answer = armed.server ? await armed.server.ask(asked) : await hook("pi-wake", asked)
        handed = Boolean(answer && typeof answer.text === "string" && answer.text)
        if (handed) {
          const deliverAs = answer.deliver_as === "steer" ? "steer" : "followUp"
          pi.sendUserMessage(answer.text, { deliverAs })
        }
        if (!handed && !armed.again) break
      }
    } finally {
      armed.running = false
    }
  }

  const disarm = () => {
    if (!current) return
    current.closed = true
    current.watcher?.close()
    current.server?.close()
    current = null
  }

  pi.on("session_start", async (_event, ctx) => {
    disarm()
    // the user's own pi only: a pi in RPC mode is one a program drives (actors' own host
    // reaches it), one in print or JSON mode answers once and exits (a subagent run)
    if (ctx.mode !== "tui") return
    const started = await hook("pi-session-start", {
      session_id: ctx.sessionManager.getSessionId(),
      cwd: ctx.cwd,
      session_file: ctx.sessionManager.getSessionFile() ?? null,
    })
    if (!started || typeof started.session !== "string" || typeof started.wake !== "string") return
    process.env.ACTORS_SESSION = started.session // runs pi's bash tool spawns report here
    const armed = { session: started.session, running: false, again: false, closed: false }
    const name = basename(started.wake)
    try {
      armed.watcher = watch(dirname(started.wake), { persistent: false }, (_kind, file) => {
        if (!file || file === name) drain(armed)
      })
      armed.watcher.on("error", () => {})
    } catch {
      return
    }
    current = armed
    drain(armed) // what arrived before the watch
  })

  pi.on("session_shutdown", async () => disarm())
}
"""


def extension_text(command: list[str]) -> str:
    """The extension as install writes it: starting `actors` as `command`."""
    return HEADER + EXTENSION.replace("__ACTORS__", json.dumps(command))


def agent_dir() -> Path:
    """pi's agent directory: `$PI_CODING_AGENT_DIR` (as pi reads it), else ~/.pi/agent."""
    import os

    given = os.environ.get("PI_CODING_AGENT_DIR")
    if given:
        return Path(os.path.expanduser(given))
    return Path.home() / ".pi" / "agent"


def plan(scope: str, wake: str, command: list[str]) -> list[Edit]:
    """Our MCP server entry (`mcpServers.actors`, started as `command mcp`) and the
    extension; `wake` is Claude Code's."""
    where = Path.cwd() / ".pi" if scope == "project" else agent_dir()
    entry: dict[str, Any] = {
        "command": command[0],
        "args": [*command[1:], "mcp"],
        "exposure": "direct",
    }
    return [
        json_edit(where / "mcp.json", *mcp_entry("mcpServers", entry), what="MCP server actors"),
        whole_file(where / "extensions" / "actors.js", extension_text(command)),
    ]


def whole_file(path: Path, text: str) -> Edit:
    """The extension: a file of ours alone (it starts with HEADER), written whole and
    replaced whole (an earlier install's, e.g. for another `actors` path), taken out
    whole by uninstall; any other file of that name is refused."""

    def add(current: str | None) -> str:
        if current and not current.startswith(HEADER):
            raise BadInput(f"{path} exists and is not ours; remove it first, nothing was changed")
        return text

    def remove(current: str, added: object = None) -> str:
        return "" if current.startswith(HEADER) else current

    return Edit(path, add, remove, what="extension actors (wakes the idle pi; registers it)")


def next_steps(scope: str) -> list[str]:
    """What install cannot do: pi reads a project's .pi/ only once the project is trusted."""
    if scope == "project":
        return [
            "pi loads .pi/mcp.json and .pi/extensions/ only in a trusted project: answer pi's"
            " trust prompt (or run `pi --approve` once), or use `actors install pi --user`",
            "restart pi (or /reload) to load the extension",
        ]
    return ["restart pi (or /reload in a running pi) to load the extension and the MCP server"]
