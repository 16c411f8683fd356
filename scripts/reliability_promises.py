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
        18,
        "No reader is broken by what another writes",
        "Everything a run, a recipe folder, a harness or a client can write is bounded where it is read (size, depth, value): a damaged file is shown as `(damaged: FILE)` and never breaks a reader of another run; no state file is written through a hard link; no field forges a row of text output.",
        "test_attack_hostile_state",
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
- **what a run writes**: its output, summaries and messages are data. They are stripped
  of terminal controls before any terminal or pane sees them, escaped in every row of
  text output, bounded and fenced before a model sees them, masked of declared secrets
  before they are stored, and never typed into a shell. The state files it can write over
  (its own included) are read bounded in size, nesting and value, so one run's damage is
  reported as that run's damage and never breaks a reader of another run;
- **harness input**: hook payloads, MCP requests, dashboard request bodies, recipe files
  in a project's folder and adapter responses are validated through one bounded decoder;
  every request gets an answer, and bad input is one line and exit status 2.
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
