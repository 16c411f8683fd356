"""Is this Claude Code a headless `claude -p` that ends when its turn does? Decided from
what Claude itself puts in its hooks' environment (2.1.331): CLAUDE_CODE_ENTRYPOINT is
`sdk-cli` for a Claude started with -p (`cli` interactive), and CLAUDE_PID names the
Claude process, whose argv says whether it reads more prompts on stdin.

Its own module, standard library only: the SessionStart hook records the answer and the
Stop hook (adapters/claude_code/stop.py) acts on it, at the end of every turn of every
Claude session, where an interactive one leaves after reading one environment variable.
"""

from __future__ import annotations

import os

ENTRYPOINT_PRINT = "sdk-cli"
"""CLAUDE_CODE_ENTRYPOINT of a Claude started with -p (an interactive one says `cli`)."""
ANCESTORS = 4
"""How far up from the hook the Claude process may be (sh -c, then Claude)."""


def headless(environ: dict[str, str] | None = None) -> bool:
    """True only for a `claude -p` that exits when its turn ends: Claude says it is not
    interactive (CLAUDE_CODE_ENTRYPOINT), and the Claude process that runs this hook
    (CLAUDE_PID, which must be an ancestor of ours: an inherited value names another
    process) was started with -p / --print and reads no prompts on stdin. Anything
    that cannot be verified (no /proc) counts as interactive: never held."""
    env = os.environ if environ is None else environ
    if env.get("CLAUDE_CODE_ENTRYPOINT") != ENTRYPOINT_PRINT:
        return False
    raw = env.get("CLAUDE_PID", "")
    if not raw.isdigit() or int(raw) not in _ancestors(ANCESTORS):
        return False
    try:
        with open(f"/proc/{int(raw)}/cmdline", "rb") as handle:
            argv = handle.read(1 << 20).split(b"\0")
    except OSError:
        return False
    return prints_once([a.decode("utf-8", "replace") for a in argv[1:]])


def prints_once(args: list[str]) -> bool:
    """Claude's arguments ask for one print-mode turn: -p / --print, and no stream of
    prompts on stdin (`--input-format stream-json` keeps the process for more turns)."""
    if not any(a in ("-p", "--print") for a in args):
        return False
    streamed = any(
        a == "--input-format=stream-json"
        or (a == "--input-format" and i + 1 < len(args) and args[i + 1] == "stream-json")
        for i, a in enumerate(args)
    )
    return not streamed


def _ancestors(depth: int) -> set[int]:
    """The pids of this process's parent, its parent, ... (`depth` of them at most)."""
    found: set[int] = set()
    pid = os.getppid()
    while pid > 1 and len(found) < depth:
        found.add(pid)
        try:
            with open(f"/proc/{pid}/stat", "rb") as handle:
                stat = handle.read(4096)
            pid = int(stat[stat.rindex(b")") + 2 :].split()[1])  # the field after the state
        except (OSError, ValueError, IndexError):
            break
    return found
