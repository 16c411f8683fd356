#!/usr/bin/env python3
"""The `agent` recipe's one step: run a coding agent headless on a prompt, keep its answer.

Each harness has its own headless mode with machine-readable output, and each names its
final answer and its session id differently; this script is the one place that knows
them (verified against the real binaries in the peers tier):

| harness  | command                                   | answer                   | session id |
|----------|-------------------------------------------|--------------------------|------------|
| claude   | `claude -p --output-format json`          | `.result`                | `.session_id` |
| codex    | `codex exec --json`                       | last `agent_message` item | `thread.started.thread_id` |
| opencode | `opencode run --format json`              | `text` parts of the last step | `.sessionID` |
| pi       | `pi -p --mode json`                       | last assistant message's text | `session.id` |
| gemini   | `gemini -p --output-format json`          | `.response`              | `.session_id` |

The answer goes to `<out>/answer.md` (the run's `answer` artifact) and to stdout (the
run's output, and the next step's stdin in a sequence); `<out>/session.json` keeps the
harness, the session id and the argv that resumes it (the `session` artifact); the
harness's raw output is kept in `<out>/events.jsonl`. One `agent.result` message carries
the same, so the run's follow-up tells the coordinator how to resume the agent.
Templates have no shell, so the harness is started with an argv; its stdin is empty
(pi's carries the prompt).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

HARNESSES = ("claude", "codex", "opencode", "pi", "gemini")
ANSWER_IN_MESSAGE = 8000
"""Characters of the answer carried in the agent.result message (the file has it all)."""


class UserError(Exception):
    """A mistake in the recipe's values: one line on stderr, exit 2, no traceback."""


def _list(name: str, text: str) -> list[str]:
    """An array value as the template renders it (compact JSON), or a comma list."""
    if not text:
        return []
    try:
        items = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: nested too deeply
        items = [part.strip() for part in text.split(",") if part.strip()]
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise UserError(f'{name} must be a list of strings, e.g. \'["a","b"]\' or a,b')
    return items


def command(
    harness: str, prompt: str, model: str, tools: list[str], flags: list[str], session: str = ""
) -> list[str]:
    """The harness's headless argv; the prompt last, after `--` where the parser has it, so
    a prompt starting with `-` is never read as an option (pi has no `--`: its prompt goes
    on stdin, which `pi -p` reads when no message is given). With `session`, the harness
    continues that session of its own (the id a previous run recorded)."""
    if tools and harness in ("codex", "opencode"):
        raise UserError(
            f"{harness} has no allowed-tools option; leave tools empty and restrict it"
            " with its own configuration (flags=...)"
        )
    if harness == "claude":
        argv = ["claude", "-p", "--output-format", "json"]
        argv += ["--model", model] if model else []
        argv += ["--allowedTools", ",".join(tools)] if tools else []
        argv += ["--resume", session] if session else []
        return [*argv, *flags, "--", prompt]
    if harness == "codex":
        argv = ["codex", "exec", *(["resume"] if session else []), "--json"]
        argv += ["--skip-git-repo-check", *(["--model", model] if model else [])]
        return [*argv, *flags, "--", *([session] if session else []), prompt]
    if harness == "opencode":
        argv = ["opencode", "run", "--format", "json"]
        argv += ["--model", model] if model else []
        argv += ["--session", session] if session else []
        return [*argv, *flags, "--", prompt]
    if harness == "pi":
        argv = ["pi", "-p", "--mode", "json"]
        argv += ["--model", model] if model else []
        argv += ["--tools", ",".join(tools)] if tools else []
        argv += ["--session", session] if session else []
        return [*argv, *flags]  # the prompt goes on stdin: pi's parser has no `--`
    argv = ["gemini", "--output-format", "json"]
    argv += ["--model", model] if model else []
    argv += [f"--allowed-tools={tool}" for tool in tools]
    argv += ["--resume", session] if session else []
    return [*argv, *flags, f"--prompt={prompt}"]


def resume_argv(harness: str, session_id: str) -> list[str]:
    """The argv (before a new prompt) that continues the same session headless."""
    return {
        "claude": ["claude", "-p", "--resume", session_id],
        "codex": ["codex", "exec", "resume", session_id],
        "opencode": ["opencode", "run", "--session", session_id],
        "pi": ["pi", "-p", "--session", session_id],
        "gemini": ["gemini", "--resume", session_id, "-p"],
    }[harness]


def _events(stdout: str) -> list[dict[str, Any]]:
    """Every JSON object line of a JSONL stream (harnesses may print other noise)."""
    found = []
    for line in stdout.splitlines():
        try:
            event = json.loads(line)
        except (ValueError, RecursionError):  # RecursionError: nested too deeply
            continue
        if isinstance(event, dict):
            found.append(event)
    return found


def parse(harness: str, stdout: str) -> tuple[str, str, str | None]:
    """(answer, session id, error) from the harness's JSON output."""
    if harness in ("claude", "gemini"):
        try:
            doc = json.loads(stdout)
        except (ValueError, RecursionError):  # RecursionError: nested too deeply
            return "", "", f"{harness} printed no JSON result"
        if not isinstance(doc, dict):
            return "", "", f"{harness} printed no JSON object"
        if harness == "claude":
            error = str(doc.get("result") or doc.get("subtype")) if doc.get("is_error") else None
            return str(doc.get("result") or ""), str(doc.get("session_id") or ""), error
        error = json.dumps(doc["error"]) if doc.get("error") else None
        return str(doc.get("response") or ""), str(doc.get("session_id") or ""), error
    events = _events(stdout)
    answer, session, error = "", "", None
    for event in events:
        kind = event.get("type")
        if harness == "codex":
            item = event.get("item") if isinstance(event.get("item"), dict) else {}
            if kind == "thread.started":
                session = str(event.get("thread_id") or "")
            elif kind == "item.completed" and item.get("type") == "agent_message":
                answer = str(item.get("text") or "")
            elif kind in ("turn.failed", "error"):
                error = json.dumps(event.get("error") or event.get("message"))
        elif harness == "opencode":
            session = str(event.get("sessionID") or session)
            part = event.get("part") if isinstance(event.get("part"), dict) else {}
            if kind == "step_start":
                answer = ""  # the final answer is the text of the last step
            elif kind == "text":
                answer += str(part.get("text") or "")
            elif kind == "error":
                error = json.dumps(event.get("error"))
        else:  # pi
            message = event.get("message") if isinstance(event.get("message"), dict) else {}
            if kind == "session":
                session = str(event.get("id") or "")
            elif kind == "message_end" and message.get("role") == "assistant":
                parts = message.get("content") or []
                answer = "".join(
                    str(p.get("text") or "")
                    for p in parts
                    if isinstance(p, dict) and p.get("type") == "text"
                )
                if message.get("stopReason") == "error":
                    error = str(message.get("errorMessage") or "the model request failed")
    return answer, session, error


def _emit(record: dict[str, Any], answer: str) -> None:
    """One agent.result message (the run's semantic result); outside a run, nothing."""
    if not os.environ.get("ACTORS_RUN_ID"):
        return
    body = {**record, "answer": answer[:ANSWER_IN_MESSAGE]}
    if len(answer) > ANSWER_IN_MESSAGE:
        body["answer_truncated"] = True
    summary = f"{record['harness']} answered ({len(answer)} chars); session {record['session_id']}"
    subprocess.run(
        ["actors", "emit", "agent.result", json.dumps(body), "--body-json", "--summary", summary],
        stdin=subprocess.DEVNULL,
        check=False,
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="agent_run")
    parser.add_argument("--harness", required=True)
    parser.add_argument("--prompt", required=True)
    parser.add_argument("--model", default="")
    parser.add_argument("--tools", default="")
    parser.add_argument("--flags", default="")
    parser.add_argument("--cwd", default=".")
    parser.add_argument("--session", default="", help="continue this session of the harness")
    parser.add_argument("--out", required=True)
    parser.add_argument("--with-stdin", action="store_true", help="append stdin to the prompt")
    args = parser.parse_args(argv)
    if args.harness not in HARNESSES:
        raise UserError(f"unknown harness {args.harness!r}; use one of {', '.join(HARNESSES)}")
    prompt = args.prompt
    if args.with_stdin:
        given = sys.stdin.read()
        prompt = f"{prompt}\n\n{given}" if given.strip() else prompt
    if not prompt.strip():
        raise UserError("the prompt is empty; pass -v prompt='what the agent should do'")
    cwd = Path(args.cwd)
    if not cwd.is_dir():
        raise UserError(f"cwd {str(cwd)!r} is not a directory")
    argv_ = command(
        args.harness,
        prompt,
        args.model,
        _list("tools", args.tools),
        _list("flags", args.flags),
        args.session,
    )
    program = shutil.which(argv_[0])
    if program is None:
        print(
            f"agent: {argv_[0]} is not on PATH; install {args.harness} or fix PATH", file=sys.stderr
        )
        return 127
    out = Path(args.out)
    out.mkdir(mode=0o700, parents=True, exist_ok=True)
    done = subprocess.run(
        [program, *argv_[1:]],
        cwd=cwd,
        input=prompt if args.harness == "pi" else "",  # pi -p reads a prompt from stdin
        stdout=subprocess.PIPE,
        text=True,
        check=False,
    )
    _write(out / "events.jsonl", done.stdout)
    answer, session, error = parse(args.harness, done.stdout)
    session = session or args.session  # `codex exec resume` announces no thread
    if done.returncode != 0 or error or not answer.strip() or not session:
        why = error or (
            f"exited {done.returncode}" if done.returncode else "no final answer or session id"
        )
        print(
            f"agent: {args.harness} failed: {why[:500]} (output: {out / 'events.jsonl'})",
            file=sys.stderr,
        )
        return done.returncode or 1
    record = {
        "harness": args.harness,
        "session_id": session,
        "resume": resume_argv(args.harness, session),
        "cwd": str(cwd.resolve()),
        "answer_path": str(out / "answer.md"),
    }
    _write(out / "answer.md", answer if answer.endswith("\n") else answer + "\n")
    _write(out / "session.json", json.dumps(record, indent=2) + "\n")
    _emit(record, answer)
    sys.stdout.write(answer if answer.endswith("\n") else answer + "\n")
    return 0


def _write(path: Path, text: str) -> None:
    """Whole-file write through a temporary name, so a reader never sees half an answer."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
    with os.fdopen(os.open(temporary, flags, 0o600), "w") as out:
        out.write(text)
    os.replace(temporary, path)


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except UserError as exc:
        print(f"agent: {exc}", file=sys.stderr)
        sys.exit(2)
