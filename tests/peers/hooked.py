"""What the hook-driven headless harnesses share (Qwen Code, Copilot CLI, Gemini CLI).

Their runs (tests/peers/run_*.py): a throw-away HOME and project dir under `base`, a
recorder hook that appends every input of the harness's turn-end hook to a file, an
environment without the user's own variables for that harness (its keys, URLs, models:
the fake model is the only one it may reach), and one headless turn that must succeed.
Each harness's own module says what differs: its settings, its variables, its argv.

Their tests (tests/peers/test_*.py): `hand_over_once`, the hand-over at the turn-end
hook every one of them must do the same; each test adds what its harness answers.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from runtime.delivery.engine import DeliveryRunner
from runtime.store.layout import StateRoot, session_paths
from tests.conftest import cli, wait_for_change
from tests.peers.fake_llm import FakeLLM, last_user_text

RECORDER = (
    "import sys; data = sys.stdin.read(); open(sys.argv[1], 'a').write(data.strip() + chr(10))"
)
"""The recorder hook's program: one line per hook input, appended to the file it is given."""


@dataclass
class HookedHarness:
    """One setup of a harness: where it lives, the fake model's port, and the actors
    state root and session its hooks act for (`ACTORS_SESSION`; "" for none: then the
    harness's own session id is the session)."""

    base: Path
    llm_port: int
    actors_home: Path
    session: str

    HOOK_LOG: ClassVar[str] = "hook.jsonl"
    """The recorder's file under `base`, named after the hook it records."""
    OWN_VARIABLES: ClassVar[tuple[str, ...]] = ()
    """Prefixes of the variables the harness reads from the user's environment."""

    @property
    def home(self) -> Path:
        return self.base / "home"

    @property
    def proj(self) -> Path:
        return self.base / "proj"

    @property
    def hook_log(self) -> Path:
        return self.base / self.HOOK_LOG

    def hook_inputs(self) -> list[dict[str, Any]]:
        """Every input the harness gave its turn-end hook, in order."""
        if not self.hook_log.exists():
            return []
        return [json.loads(line) for line in self.hook_log.read_text().splitlines()]

    def recorder(self) -> str:
        """The hook command that appends each input to `hook_log` (a shell command line)."""
        python = shlex.quote(sys.executable)
        return f"{python} -c {shlex.quote(RECORDER)} {shlex.quote(str(self.hook_log))}"

    def make_dirs(self, config: str) -> Path:
        """HOME/`config` and the project dir, made; HOME/`config` returned."""
        folder = self.home / config
        folder.mkdir(parents=True, exist_ok=True)
        self.proj.mkdir(parents=True, exist_ok=True)
        return folder

    def harness_env(self, **values: str) -> dict[str, str]:
        """This environment less the harness's own variables (OWN_VARIABLES), with
        `values`, this setup's HOME and the actors state root and session."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(self.OWN_VARIABLES)}
        env.pop("ACTORS_SESSION", None)
        env.update(HOME=str(self.home), **values, ACTORS_HOME=str(self.actors_home), NO_COLOR="1")
        if self.session:  # none: the harness's own session id is the session
            env["ACTORS_SESSION"] = self.session
        return env

    def env(self) -> dict[str, str]:
        """The harness's environment (each harness sets its model provider)."""
        return self.harness_env()

    def turn(self, argv: list[str], timeout: float) -> str:
        """One headless turn, `argv` run in the project dir with `env()`, stdin closed;
        what it printed (a failed turn fails the test with all it said)."""
        done = subprocess.run(
            argv,
            cwd=self.proj,
            env=self.env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
        return done.stdout

    def setup(self) -> HookedHarness:
        raise NotImplementedError

    def run(self, prompt: str, timeout: float = 120) -> Any:
        """One headless turn of `prompt` in a new session: what the harness answered."""
        raise NotImplementedError


@dataclass
class HandOver:
    """What `hand_over_once` saw, for the harness's own checks: each turn's answer, the
    hook inputs of the first turn and the model requests it made."""

    first: Any
    later: Any
    inputs: list[dict[str, Any]]
    requests: list[dict[str, Any]]


def hand_over_once(
    home: StateRoot,
    fake_llm: FakeLLM,
    peer: HookedHarness,
    *,
    harness: str,
    boundary: str,
    token: str,
) -> HandOver:
    """The hand-over at a harness's turn-end hook, as every such harness must do it: a
    follow-up pending in the session's inbox (a `file` session) is the model's next
    prompt of the same turn, exactly once (the hook lets the continuation stop, the
    journal records one `delivered` by `harness` at `boundary`, the inbox is read), and a
    later turn with nothing pending is one plain model request."""
    session = peer.session
    delivery = f"d-{harness}"
    done = cli("session", "register", "--harness", "file", "--id", session)
    assert done.returncode == 0, done.stderr
    envelope = {
        "type": "run.done",
        "from": f"run:{harness}",
        "summary": f"Run {token} done",
        "body": {"status": "done"},
    }
    DeliveryRunner(home).submit(session, envelope, delivery_id=delivery)
    peek = cli("inbox", "read", "--session", session, "--peek").stdout
    assert peek.startswith("1 unread follow-up(s)\n") and token in peek, peek
    peer.setup()

    first = peer.run("hello TOKEN-FIRST")

    prompts = [last_user_text(r["body"]) for r in fake_llm.requests]
    assert len(prompts) == 2, prompts
    assert "TOKEN-FIRST" in prompts[0] and token not in prompts[0]
    assert token in prompts[1] and delivery in prompts[1]
    # the harness's own record of the hook calls: the turn's end, then the continuation's
    # end (stop_hook_active), where our hook found nothing and let the agent stop
    inputs = peer.hook_inputs()
    assert [i["stop_hook_active"] for i in inputs] == [False, True], inputs
    (record,) = _delivered(home, session, delivery, harness)
    assert record["metadata"]["boundary"] == boundary
    assert cli("inbox", "read", "--session", session).stdout == "0 unread follow-up(s)\n"
    requests = list(fake_llm.requests)

    # A later turn: nothing pending, so one model request and no follow-up in it.
    later = peer.run("later TOKEN-SECOND")
    (request,) = fake_llm.requests[len(requests) :]
    assert "TOKEN-SECOND" in last_user_text(request["body"])
    assert token not in json.dumps(request["body"])
    assert [i["stop_hook_active"] for i in peer.hook_inputs()] == [False, True, False]
    assert len(_delivered(home, session, delivery, harness)) == 1
    return HandOver(first, later, inputs, requests)


def wait_in_inbox(home: StateRoot, session: str, text: str, timeout: float = 60) -> None:
    """Until a follow-up mentioning `text` is in `session`'s inbox file (woken by each
    write under the session's directory, or the nearest one that exists: a session no
    one registered has none before its first follow-up; TimeoutError after `timeout`
    seconds)."""
    inbox = session_paths(home, session).inbox
    watched = next(d for d in inbox.parents if d.is_dir())
    wait_for_change(
        watched,
        lambda: inbox.exists() and text in inbox.read_text(),
        timeout=timeout,
        what=f"a follow-up mentioning {text!r} in session {session}'s inbox",
    )


def handed_over(home: StateRoot, session: str, harness: str) -> list[dict[str, Any]]:
    """The session journal's `delivered` records of follow-ups `harness`'s turn-end hook
    handed over (not the `file` session's own deliveries into its inbox)."""
    path = session_paths(home, session).deliveries
    records = [json.loads(line) for line in path.read_text().splitlines()]
    return [r for r in records if r["event"] == "delivered" and r.get("harness") == harness]


def _delivered(home: StateRoot, session: str, ident: str, harness: str) -> list[dict[str, Any]]:
    """The journal's `delivered` records of delivery `ident` by `harness`."""
    path = session_paths(home, session).deliveries
    records = [json.loads(line) for line in path.read_text().splitlines()]
    return [
        r
        for r in records
        if r["id"] == ident and r["event"] == "delivered" and r.get("harness") == harness
    ]
