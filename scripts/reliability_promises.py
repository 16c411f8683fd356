"""The threat model and the hardening promises of docs/reliability.md, with the attack
tests (tests/reliability/test_attack_*.py) that prove each one.

scripts/reliability_report.py renders these next to what the suites observed: per
promise, how many attack cases ran, how many held, and how many still fail as expected
failures (known bugs). A test is attributed to a promise by its file, or by name where a
file covers several promises; a new test in a listed file counts without any change here.
"""

from __future__ import annotations

from collections import Counter
from typing import NamedTuple


class Promise(NamedTuple):
    number: int
    title: str
    promise: str
    file: str
    """The attack file whose tests count for this promise unless named elsewhere."""
    names: tuple[str, ...] = ()
    """Test-name fragments that claim a test of another promise's file for this one."""
    also: tuple[str, ...] = ()
    """Further test files (sibling attacks) that prove this promise as a whole."""


PROMISES = (
    Promise(
        1,
        "Signals only to a proven identity",
        "No process is signalled unless its identity (pid, start ticks, boot id), or its membership in the run derived from a process verified at that instant, is proven; a dead runner's recorded session id proves nothing.",
        "test_attack_signals",
        also=("test_signal_identity",),
    ),
    Promise(
        2,
        "A state root is trusted only if it is yours",
        "A root, or a directory in it, owned by another user or writable by group or others is refused with one line and the fix.",
        "test_attack_root_trust",
        also=("test_trust",),
    ),
    Promise(
        3,
        "No symlink under the root is followed",
        "No read, write, rename, truncate, chmod or delete under the state root goes through a symlink; the operation fails cleanly instead.",
        "test_attack_symlinks",
    ),
    Promise(
        4,
        "Run-written text never acts in a terminal",
        "C0/C1 controls and DEL are stripped from every text typed or shown; nothing is typed into a pane whose foreground program is a shell; text reaching a model is bounded and fenced as data.",
        "test_attack_terminal",
        also=("test_leaks_terminal",),
    ),
    Promise(
        5,
        "Secrets stay masked",
        "Every stored file and every view except run.json masks every declared secret, in every rendering; a secret too short to mask is refused at declaration.",
        "test_attack_secrets",
        also=("test_leaks_secrets",),
    ),
    Promise(
        6,
        "A run token is not on disk",
        "The state directory keeps a verifier of the run token, never the token, so reading another run's files does not let a process act as that run.",
        "test_attack_root_trust",
        ("token",),
        also=("test_run_tokens",),
    ),
    Promise(
        7,
        "Nothing doubled",
        "A message is received once whatever process is killed at whatever step of the FIFO or inbox path.",
        "test_attack_exactly_once",
        also=("test_fifo_kill_points",),
    ),
    Promise(
        8,
        "Linear, bounded output",
        "Any output shape costs linear time and bounded memory; logs are capped with rotation.",
        "test_attack_output",
        also=("test_output_bounds",),
    ),
    Promise(
        9,
        "Bounded runner memory",
        "Unread messages a runner does not act on do not grow its memory.",
        "test_attack_output",
        ("unread_messages",),
    ),
    Promise(
        10,
        "Legal input never crashes a run",
        "Records of a run are bounded previews; no run fails for the size of its own record.",
        "test_attack_bad_input",
        ("large_legal",),
    ),
    Promise(
        11,
        "Bad input: one line, exit 2, nothing written",
        "Malformed settings, a runner that cannot start and malformed protocol input all end in one line and exit 2 (or a protocol error response), with no partial state.",
        "test_attack_bad_input",
        also=("test_runner_start_failure",),
    ),
    Promise(
        12,
        "install touches only what it owns",
        "install and uninstall never change the mode of what they did not create, keep file modes and links, and uninstall restores them.",
        "test_attack_install",
    ),
    Promise(
        13,
        "Colliding collab scopes are refused",
        "Scopes that would share a branch name are refused before anything is created.",
        "test_attack_collab",
    ),
    Promise(
        14,
        "Webhook requests cannot be replayed",
        "The signature covers a timestamp, the delivery id and the body; receivers verify within a replay window.",
        "test_attack_webhook",
    ),
    Promise(
        15,
        "Private whatever the umask, no create through a link",
        "Every file and directory actors creates is 0600 / 0700 under any umask, and no create follows a dangling link.",
        "test_attack_umask",
    ),
    Promise(
        16,
        "A crashed runner heals without a human",
        "A SIGKILLed runner's session gets exactly one `run.exited` follow-up within 5 s and its orphans die, from the processes the session already has (`inbox wait`, the MCP server, a parent's runner), however many race; a pid now owned by another process is neither taken for the runner nor signalled.",
        "test_self_healing",
    ),
    Promise(
        17,
        "A call acts only for the session the harness proves",
        "Which session an MCP tool call acts for is decided by what the harness itself proves (Codex's `_meta.threadId`, an OpenCode plugin claim signed with the per-user key, fresh and used once, Claude Code's SessionStart record of its process), never by an argument a model writes; no credential (OpenCode's password, Claude Code's messaging token) goes to an address a call supplies or to a local port or socket whose listener is another user's; a session that continues under another id in the same harness process (`/clear`) keeps its runs and gets each follow-up it missed once.",
        "test_attack_caller",
    ),
    Promise(
        18,
        "No reader is broken by what another writes",
        "Everything a run, a recipe folder, a harness or a client can write is bounded where it is read (size, depth, value): a damaged file is shown as `(damaged: FILE)` and never breaks a reader of another run; no state file is written through a hard link; no field forges a row of text output.",
        "test_attack_hostile_state",
    ),
    Promise(
        19,
        "Kill always kills",
        "A kill needs no journal write and waits on no lock a stopped process holds; every process the run ever started dies, a double-forked daemon included (its cgroup v2, `cgroup.kill`; without one, the verified runner's session and descendants, the documented fallback); a damaged run.json is killed with --force; no test or verb waits unbounded on a lock a paused process holds.",
        "test_attack_kill",
        also=("test_attack_deadlock",),
    ),
    Promise(
        20,
        "No fault short of losing the disk loses an outcome",
        "A full or read-only disk, no descriptor, memory or inotify instance left, or stdout that cannot be written: every verb exits 0 or says what ran out in one line and exits 2, changing nothing; every MCP request is answered; the dashboard answers 503 and keeps serving, and never polls. A run's end waits out a full disk and ends with its outcome and one follow-up; a runner dead after its outcome was journaled is folded from what events.jsonl proves; follow-ups are marked read only once written out.",
        "test_attack_faults",
        also=("test_disk_full",),
    ),
    Promise(
        21,
        "Text reaching a model is fenced on every path",
        "Every text a model gets (hook answers, the doorbell, the messaging socket, Codex, OpenCode, pi, the agent-team inbox, the tmux pointer and its body file, `inbox read`, MCP `inbox_read`) comes from one renderer: what a run wrote is bounded (bytes and lines, the cut announced), inert, and fenced as data under a fresh nonce with every line behind a gutter, so no run-written line can pass for our framing, a fence or a role; only our own header line names a delivery; a parallel join's headers cannot be forged by branch output.",
        "test_attack_fences",
    ),
    Promise(
        22,
        "A hook never fails its harness",
        "Every `actors hook ...` exits 0 on any input (not JSON, too deep, too large, no stdin, an endless pipe), environment (a state root that is a file, group-writable or not ours, an unwritable CLAUDE_ENV_FILE, closed or broken output) or bug, with no output or a whole answer, and says why in one stderr line; `file-changed` exits 2 only after writing the doorbell line for a real unread follow-up.",
        "test_attack_hooks",
    ),
)

THREAT_MODEL = """\
## Threat model

Trusted: **you**, the user who owns the state root, and the programs you run as
yourself (your shell, your coding harness, the recipes you chose to spawn). On Linux,
processes of the same user are not a security boundary: one can read another's memory,
environment (/proc/PID/environ) and files. A run token therefore guards against
accidents and confused deputies (a child of one run acting on another run by mistake),
not against a hostile program running as you.

Not trusted:
- **other users**: a state root, or anything in it, owned or writable by someone else
  is refused;
- **files planted in the state root**: a symlink, hard link, FIFO, directory or forged
  record is never followed, written through, waited on or acted on; a recorded pid proves
  nothing until the process is verified at the instant it would be signalled;
- **a run against its own kill**: a run is your program, but it may rewrite its own
  state files, stop its runner or double-fork a daemon; none of that stops `kill`. Where
  a cgroup v2 can be made, each run's processes are held in one and killed whole; a
  process of yours that deliberately moves itself out of that cgroup (it can: same user)
  is beyond it, as is, without a cgroup, a daemon that left the run's session;
- **what a run writes**: its output, summaries and messages are data. They are stripped
  of terminal controls before any terminal or pane sees them, escaped in every row of
  text output, bounded and fenced before a model sees them, masked of declared secrets
  before they are stored, and never typed into a shell. The state files it can write over
  (its own included) are read bounded in size, nesting and value, so one run's damage is
  reported as that run's damage and never breaks a reader of another run;
- **what a run wrote, on its way to a model**: one renderer fences it as data (a fresh
  nonce per rendering, every line behind a gutter, bounded, inert), so it can neither
  end our framing nor pass for a role, a fence or a delivery's header; a branch's output
  cannot forge the headers a parallel join puts between outputs;
- **harness input**: hook payloads, MCP requests, dashboard request bodies, recipe files
  in a project's folder and adapter responses are validated through one bounded decoder;
  every request gets an answer, and bad input is one line and exit status 2, except in
  a harness hook, which never fails its harness: it exits 0 (why, on one stderr line),
  and only `file-changed` exits 2, to wake the model for a real unread follow-up;
- **a model's tool arguments**: the model (or a prompt injected into it) writes every
  argument of a tool call, so none of them says which session the call acts for. That
  is decided by what the harness proves and the model cannot write: Codex's
  `_meta.threadId` (set by Codex, outside the arguments), Claude Code's SessionStart
  record of the Claude process `actors mcp` runs under (written by the hook, keyed by
  that process's pid and start time), and for OpenCode a claim its plugin adds that
  counts only when signed (HMAC-SHA256) with the per-user key
  `harness-processes/caller.key` (0600 in the state root, which the plugin reads inside
  OpenCode and another user cannot), fresh and used once. A claim that is not (a
  model's own, one through another harness) is dropped and the call acts for the
  server's fallback session. A model that may also run shell commands as you can read
  that key, as it can run `actors` itself: it is you;
- **loopback ports and socket paths**: every local user shares 127.0.0.1, and a socket
  path can be taken over once its program exits. No credential goes to an address a
  call supplies: `actors mcp` gives the OpenCode password only to a URL whose listening
  socket is held by its own ancestor (the OpenCode that started it), and the adapters
  check, once connected and before the first byte, that the far end is your process
  (/proc/net/tcp for a port, SO_PEERCRED for a Unix socket: OpenCode's server, Claude
  Code's messaging socket, a Codex app-server, a pi host). Where /proc is not available
  (not Linux) no URL can be proven and `actors mcp` registers a `file` session instead;
  only a session you registered yourself holds a password there.

A session that goes on under another id (Claude Code's `/clear`: the same process, a
new session id) is the same principal as the one before, proven by that process's
SessionStart record and nothing else: it controls the runs the conversation started,
and their follow-ups, unread or yet to come, reach the live session once.

Not an attacker, but handled like one: **the machine running out**. A disk fills up or is
remounted read-only, descriptors, memory or inotify instances are used up, stdout goes to
a full device. Each is one line naming what ran out and exit status 2 (503 from the
dashboard), with nothing half-written; where giving up would lose an outcome held only in
memory (a run's end), the writer waits and retries until the disk takes it.
"""


def attribute(file: str, name: str) -> int | None:
    """The promise a test proves: claimed by name first, else by its file."""
    for promise in PROMISES:
        if promise.file == file and any(part in name for part in promise.names):
            return promise.number
    for promise in PROMISES:
        if file in promise.also or (promise.file == file and not promise.names):
            return promise.number
    return None


def render_promises(cases: list[tuple[str, str, str]]) -> list[str]:
    """`cases`: (test file stem, test name, outcome) for every reliability case run."""
    held: Counter[int] = Counter()
    failing: Counter[int] = Counter()
    for file, name, outcome in cases:
        number = attribute(file, name)
        if number is None:
            continue
        if outcome == "passed":
            held[number] += 1
        else:
            failing[number] += 1
    lines = [
        "## Promises under attack",
        "",
        "Each promise, the attack file that proves it, and what the last run saw: attack",
        "cases tried, held, and still failing (expected failures: known bugs, listed at the",
        "end, or real failures).",
        "",
        "| # | Promise | Proven by | Tried | Held | Failing |",
        "|---:|---|---|---:|---:|---:|",
    ]
    for p in PROMISES:
        tried = held[p.number] + failing[p.number]
        where = f"`tests/reliability/{p.file}.py`" + (
            f" (tests named *{'*, *'.join(p.names)}*)" if p.names else ""
        )
        where += "".join(f", `tests/reliability/{f}.py`" for f in p.also)
        lines.append(
            f"| {p.number} | **{p.title}.** {p.promise} | {where} | {tried} | "
            f"{held[p.number]} | {failing[p.number]} |"
        )
    lines.append("")
    return lines
