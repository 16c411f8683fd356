"""Issue 18 #1, #2, #11: one follow-up per run outcome, failures that say why, and the
offer to keep what worked, through real runs on a temporary state root.

Every run here is a real runner process; the order of events is forced with FIFO gates
(a command blocks reading one until the test writes it), never with sleeps.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import actors
from runtime.delivery.sessions import SessionInbox
from runtime.store.layout import StateRoot, session_paths
from runtime.store.reads import read_jsonl
from tests.conftest import (
    cli,
    finished,
    make_fifo,
    read_fifo_line,
    wait_for_change,
    write_recipe,
)

SESSION = "coord"


def inbox(home: StateRoot) -> list[dict[str, Any]]:
    """Every envelope delivered to the test's session, oldest first."""
    return [e["envelope"] for e in SessionInbox(session_paths(home, SESSION)).entries()]


def events(home: StateRoot, run: str) -> list[dict[str, Any]]:
    return read_jsonl(home.run(run).events).records


def spawned(*args: str) -> str:
    proc = cli("spawn", "--session", SESSION, *args)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().removeprefix("run:")


def done(run: str) -> dict[str, Any]:
    """Wait until the run is terminal and its runner has exited (follow-ups decided)."""
    return finished({"run": run, "pid": actors.status(run)["pid"]})


# -- #1 one follow-up per outcome --------------------------------------------------------


def test_a_failing_one_command_run_sends_one_follow_up_that_names_the_run(
    home: StateRoot,
) -> None:
    run = spawned("-t", "sh -c 'echo broken >&2; exit 3'")
    done(run)
    (only,) = inbox(home)
    assert only["type"] == "run.failed"
    assert only["summary"].startswith(f"Run {run} failed (code 3): ")
    assert only["summary"].endswith(f"; next: actors result {run}")
    # the step is still journalled, as a diagnostic, with the run named
    (step,) = [m for m in read_jsonl(home.run(run).outbox).records if m["type"] == "command.done"]
    assert step["delivery"] == "log" and step["summary"].startswith(f"Run {run}: command ")


def _parallel_recipe(tmp_path: Path, gate: Path, *, opt_in: bool) -> Path:
    recipe: dict[str, Any] = {
        "parallel": True,
        "template": [
            {"label": "quick", "template": "true"},
            {"label": "slow", "template": f"sh -c 'read line < {gate}'"},
        ],
    }
    if opt_in:
        recipe["mailbox"] = {"emits": ["command.done"]}
    return write_recipe(tmp_path, "opted" if opt_in else "plain", recipe)


@pytest.mark.parametrize("opt_in", [False, True], ids=["default", "emits-command.done"])
def test_a_branch_ending_while_others_run_follows_up_only_when_the_recipe_opts_in(
    home: StateRoot, tmp_path: Path, opt_in: bool
) -> None:
    gate = make_fifo(tmp_path / "gate.fifo")
    run = spawned(str(_parallel_recipe(tmp_path, gate, opt_in=opt_in)))
    run_dir = home.run(run).dir

    def quick_done() -> bool:
        return any(
            e["event"] == "command.done" and e.get("label") == "quick" for e in events(home, run)
        )

    wait_for_change(run_dir, quick_done, what="the quick branch ended")
    writer = os.open(gate, os.O_WRONLY)  # the slow branch is still reading it: release it
    os.write(writer, b"go\n")
    os.close(writer)
    done(run)
    kinds = [(e["type"], (e.get("body") or {}).get("label")) for e in inbox(home)]
    if opt_in:  # the quick branch ended while the slow one ran: a step follow-up first
        assert kinds == [("command.done", "quick"), ("run.done", None)]
    else:
        assert kinds == [("run.done", None)]


def test_spawn_wait_holds_the_result_so_no_follow_up_is_owed(home: StateRoot) -> None:
    proc = cli("spawn", "--session", SESSION, "-t", "sh -c 'echo bad >&2; exit 5'", "--wait")
    assert proc.returncode == 5
    # the caller gets the reason itself, since no follow-up will bring it
    assert "exit     5" in proc.stderr and "bad" in proc.stderr
    (run,) = [r["run"] for r in actors.runs()]
    done(run)
    assert inbox(home) == []
    marker = json.loads(home.run(run).followup.read_text())
    assert marker["skipped"] == "waited" and marker["delivery_id"] is None
    (skipped,) = [e for e in events(home, run) if e["event"] == "followup.skipped"]
    assert skipped["reason"] == "the caller waited for the result"
    assert skipped["waiter_pid"] == marker["waiter_pid"]


def test_a_foreground_tool_run_is_owed_no_follow_up_but_an_async_one_is(
    home: StateRoot,
) -> None:
    for name, extra in (("sync-echo", ()), ("async-echo", ("--async",))):
        made = cli("tools", "register", name, "-t", "echo from {n=x}", *extra)
        assert made.returncode == 0, made.stderr
    ran = cli("run", "--session", SESSION, "sync-echo", "--n", "fg")
    assert (ran.returncode, ran.stdout) == (0, "from fg\n")
    started = cli("run", "--session", SESSION, "async-echo")
    assert started.returncode == 0, started.stderr
    for listed in actors.runs():
        done(listed["run"])
    assert [(e["type"], e["body"]["result"]["body"]) for e in inbox(home)] == [
        ("run.done", "from x\n")
    ]


def test_the_waiter_outlives_the_runners_decision(home: StateRoot, tmp_path: Path) -> None:
    """The race: result.json is published before the runner checks its waiter. A waiter
    that returned as soon as it saw the result would be gone at the check, and the
    runner would send the follow-up anyway. The runner is frozen right after publishing
    the result; the waiter must still be there, and once the runner goes on, it skips."""
    barrier = make_fifo(tmp_path / "barrier.fifo")
    env = dict(os.environ, ACTORS_PAUSE_AT="runner.after_result", ACTORS_PAUSE_FIFO=str(barrier))
    waiter = subprocess.Popen(
        [sys.executable, "-m", "actors", "spawn", "--session", SESSION, "-t", "true", "--wait"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    pid, point = read_fifo_line(barrier).split()
    assert point == "runner.after_result"
    (run,) = [r["run"] for r in actors.runs()]
    assert actors.status(run)["status"] == "done"  # the waiter can see the result now
    with pytest.raises(subprocess.TimeoutExpired):
        waiter.wait(timeout=2)  # four of its 0.5 s looks at the run: it stays
    os.kill(int(pid), signal.SIGCONT)
    out, err = waiter.communicate(timeout=30)
    assert waiter.returncode == 0, err
    assert out.strip() == f"run:{run}  done"
    done(run)
    assert inbox(home) == []
    assert json.loads(home.run(run).followup.read_text())["skipped"] == "waited"


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["SIGKILL", "Ctrl-C"])
def test_a_waiter_stopped_before_the_end_leaves_the_follow_up_owed(
    home: StateRoot, tmp_path: Path, sig: signal.Signals
) -> None:
    gate = make_fifo(tmp_path / "gate.fifo")
    waiter = subprocess.Popen(
        [
            *(sys.executable, "-m", "actors", "spawn", "--session", SESSION, "--wait"),
            *("-t", f"sh -c 'read line < {gate}'"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    writer = os.open(gate, os.O_WRONLY)  # returns once the run's command reads the gate
    waiter.send_signal(sig)
    waiter.communicate(timeout=30)
    assert waiter.returncode != 0
    os.write(writer, b"go\n")
    os.close(writer)
    (run,) = [r["run"] for r in actors.runs()]
    done(run)
    (only,) = inbox(home)
    assert only["type"] == "run.done" and only["body"]["run"] == run
    assert not [e for e in events(home, run) if e["event"] == "followup.skipped"]


def test_a_decision_point_still_follows_up_once_each(home: StateRoot) -> None:
    ask = "sh -c 'actors emit review.asked \"which one?\" --deliver followup; exit 0'"
    run = spawned("-t", ask)
    done(run)
    assert [e["type"] for e in inbox(home)] == ["review.asked", "run.done"]


# -- #2 failures show their reason -------------------------------------------------------

NOISY = (
    "sh -c 'i=0; while [ $i -lt 30 ]; do i=$((i+1)); echo line-$i >&2; done;"
    ' printf "\\033]0;title\\007 with {api_token}\\n" >&2; exit 3\''
)
SECRET = "hunter2-very-secret"


def test_a_failure_names_its_command_exit_code_and_stderr_tail_everywhere(
    home: StateRoot,
) -> None:
    run = spawned("-t", NOISY, "-v", f"api_token={SECRET}")
    done(run)
    result = json.loads(cli("result", run, "--json").stdout)
    failure = result["failure"]
    assert failure["exit_code"] == 3 and "***" in failure["command"]
    tail = failure["stderr_tail"].splitlines()
    assert len(tail) == 10 and tail[0] == "line-22" and tail[-1].endswith("with ***")
    # the text a person reads: masked, bounded, nothing left to drive the terminal
    for verb in ("result", "status"):
        shown = cli(verb, run)
        assert shown.returncode == 0, shown.stderr
        out = shown.stdout
        assert "exit     3" in out and "line-30" in out and "line-20" not in out
        assert "\\x1b]0;title\\x07 with ***" in out
        assert SECRET not in out and "\x1b" not in out and "\x07" not in out
    (follow_up,) = inbox(home)
    assert "exited 3: \x1b]0;title\x07 with *** (`sh -c" in follow_up["summary"]  # inert when shown
    assert follow_up["body"]["failure"]["stderr_tail"].count("\n") == 10
    assert SECRET not in json.dumps(follow_up)


def test_a_command_that_cannot_start_says_so(home: StateRoot) -> None:
    run = spawned("-t", "no-such-command-xyz --flag")
    done(run)
    (follow_up,) = inbox(home)
    assert (
        "exited 127: actors: cannot start 'no-such-command-xyz': No such file or directory (`no-such-command-xyz --flag`)"
        in follow_up["summary"]
    )
    assert "cannot start 'no-such-command-xyz'" in follow_up["body"]["failure"]["stderr_tail"]


def test_a_timed_out_step_names_its_timeout_command_and_stderr(
    home: StateRoot, tmp_path: Path
) -> None:
    recipe = {
        "template": [
            {
                "label": "slowpoke",
                "timeout": "300ms",
                "template": "sh -c 'echo warming up >&2; exec sleep 30'",
            }
        ]
    }
    run = spawned(str(write_recipe(tmp_path, "slow", recipe)))
    done(run)
    (follow_up,) = inbox(home)
    assert follow_up["summary"].startswith(
        f"Run {run} failed (code 124): slowpoke: timed out after 300 ms: warming up (`sh -c"
    )
    shown = cli("result", run).stdout
    assert "exit     124  (timed out after 300 ms)" in shown and "    warming up" in shown


SCRIPTS = Path(__file__).resolve().parents[2] / "recipes" / "scripts"


@pytest.mark.parametrize(
    ("script", "args", "env", "says"),
    [
        ("collab_branch.py", ["check", "--scopes=[]"], {}, "scopes must be a non-empty list"),
        ("collab_branch.py", ["check", "--scopes=[true]"], {}, "scope true is not a name"),
        ("collab_branch.py", ["check", "--scopes=a,a"], {}, "is given twice"),
        ("collab_branch.py", ["check", "--scopes=a", "--repo=/nonexistent"], {}, "not a directory"),
        ("backlog_worker.py", [], {}, "run me inside an actors run"),
        ("backlog_worker.py", ["--task-timeout=soon"], {"run": 1}, "is not a number"),
        ("backlog_worker.py", ["--backlog=/nonexistent"], {"run": 1}, "does not exist"),
        ("backlog_worker.py", ["--workers=2", "--index=2"], {"run": 1}, "from 0 to 1"),
        ("backlog_precheck.py", ["--workers=0"], {}, "workers must be from 1 to 64"),
        ("backlog_precheck.py", [], {}, "is not a git repository"),
    ],
)
def test_shipped_scripts_refuse_user_errors_in_one_line(
    tmp_path: Path, script: str, args: list[str], env: dict[str, int], says: str
) -> None:
    backlog = tmp_path / "backlog.md"
    backlog.write_text("- [ ] one\n")
    given = {a.split("=", 1)[0] for a in args}
    defaults = {
        "collab_branch.py": ["--repo=.", "--base=HEAD", "--run=r", "--agent-cmd=true"],
        "backlog_worker.py": [
            "--index=0",
            "--workers=2",
            f"--backlog={backlog}",
            f"--repo={tmp_path}",
            "--agent-cmd=true",
        ],
        "backlog_precheck.py": [f"--backlog={backlog}", f"--repo={tmp_path}", "--agent-cmd=true"],
    }[script]
    argv = args + [d for d in defaults if d.split("=", 1)[0] not in given]
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ACTORS_RUN")}
    environ.pop("ACTORS_STATE_DIR", None)
    if env:
        environ.update(ACTORS_RUN_ID="r", ACTORS_STATE_DIR=str(tmp_path))
    proc = subprocess.run(
        [sys.executable, str(SCRIPTS / script), *argv],
        capture_output=True,
        text=True,
        env=environ,
        cwd=tmp_path,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and says in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


# -- #11 offer to keep what worked -------------------------------------------------------


def test_a_template_that_worked_is_offered_for_keeping_and_kept_only_when_asked(
    home: StateRoot, tmp_path: Path
) -> None:
    run = spawned(
        "-t", "echo hi {who=you} {api_token=none}", "-v", "who=ada", "-v", f"api_token={SECRET}"
    )
    done(run)
    (follow_up,) = inbox(home)
    offer = follow_up["body"]["keep"]
    assert f"actors tools register echo --from-run {run}" in offer
    assert "Ask the operator" in offer
    recipes = tmp_path / "config" / "actors" / "recipes"
    assert not recipes.exists() or not list(recipes.iterdir())  # never saved unasked

    kept = cli("tools", "register", "greet", "--from-run", f"run:{run}")
    assert kept.returncode == 0, kept.stderr
    written = json.loads((recipes / "greet.json").read_text())
    assert written == {"template": "echo hi {who=you} {api_token=none}", "defaults": {"who": "ada"}}
    assert SECRET not in (recipes / "greet.json").read_text()
    assert cli("run", "greet").stdout == "hi ada none\n"
    assert cli("run", "greet", "--who", "bo").stdout == "hi bo none\n"

    again = cli("tools", "register", "greet", "--from-run", run)
    assert again.returncode == 2 and "already exists" in again.stderr and "--force" in again.stderr
    forced = cli("tools", "register", "greet", "--from-run", run, "--force")
    assert forced.returncode == 0, forced.stderr

    # a waited run gets no follow-up: the offer comes on the waiter's stderr instead
    waited = cli("spawn", "--session", SESSION, "-t", "echo once", "--wait")
    assert waited.returncode == 0, waited.stderr
    waited_run = waited.stdout.split()[0].removeprefix("run:")
    assert f"actors tools register echo --from-run {waited_run}" in waited.stderr


def test_an_ad_hoc_recipe_file_is_offered_under_its_name(home: StateRoot, tmp_path: Path) -> None:
    path = write_recipe(tmp_path, "nightly-report", {"template": "echo report {day=mon}"})
    run = spawned(str(path), "-v", "day=tue")
    done(run)
    (follow_up,) = inbox(home)
    assert f"actors tools register nightly-report --from-run {run}" in follow_up["body"]["keep"]
    kept = cli("tools", "register", "nightly-report", "--from-run", run)
    assert kept.returncode == 0, kept.stderr
    assert cli("run", "nightly-report").stdout == "report tue\n"


def test_only_a_successful_ad_hoc_run_can_be_kept(home: StateRoot) -> None:
    failed = spawned("-t", "false")
    library = spawned("hello")
    for run in (failed, library):
        done(run)
    assert all("keep" not in e["body"] for e in inbox(home))  # neither offers it
    refused = cli("tools", "register", "x", "--from-run", failed)
    assert refused.returncode == 2
    assert f"run {failed} is failed; only a run that succeeded" in refused.stderr
    refused = cli("tools", "register", "x", "--from-run", library)
    assert refused.returncode == 2 and "already a tool" in refused.stderr
    both = cli("tools", "register", "x", "--from-run", failed, "-t", "true")
    assert both.returncode == 2 and "give the recipe once" in both.stderr
    assert "Traceback" not in refused.stderr + both.stderr
