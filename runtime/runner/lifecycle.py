"""A run's life from its runner's point of view: its first steps and its end.

`begin` runs first, before anything slow: the token out of the environment, a session of
its own, the run's cgroup, its identity recorded (a slow start never makes a fresh run
look dead), its owner's guardians rung. `conclude` is the end, one named sequence in one
place: the verdict the graph earned (`earned`), the terminal progress, event and
result.json (`finish`, result.json last and once), the step follow-ups still in flight,
the terminal follow-up (`end`), and the sweep of every process the run still has. A
runner that crashes still ends through `conclude` with a `runner error` result.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from runtime.compiler.redact import redact_deep, secret_texts
from runtime.core import cgroups, config, platform
from runtime.core.errors import ActorsError, log_exception
from runtime.core.faults import pause_point
from runtime.core.ids import new_id, now_iso
from runtime.core.process import STOP_SIGNALS, capture, early_stop, kill_session, read_proc, verify
from runtime.runner import ENTRY
from runtime.runner.bells import ring_guardians
from runtime.runner.output import output_preview
from runtime.store.appends import locked
from runtime.store.events import has_event, record_event, write_progress
from runtime.store.layout import RunPaths, StateRoot
from runtime.store.reads import read_json
from runtime.store.writes import patiently, publish_json_once
from runtime.views.counts import counts_of

if TYPE_CHECKING:
    from runtime.runner.context import Outcome, RunContext
    from runtime.runner.steps import Deliveries
    from runtime.store.records import ResultRecord, RunRecord

KILL_GRACE_S = config.seconds(config.KILL_GRACE)
DELIVERY_BUDGET_S = config.seconds(config.DELIVERY_BUDGET)
FAILURE_TAIL_LINES = 10
FAILURE_TAIL_BYTES = 2048
FAILURES_EXPLAINED = 20
"""Failures given a command and stderr tail in result.json (a 500-branch fan-out that
fails everywhere must not write 1 MB of tails; the first ones say enough)."""


liveness = -1
"""The descriptor of the runner's liveness lock (runtime.core.platform.ExitWatch): held
for the process's life, kept across a park."""

_token = ""
"""The run's token, from spawn through this process's environment (the state directory
holds only its verifier); main() takes it out of os.environ, so only children get it."""


def _child_env(paths: RunPaths, run: RunRecord) -> dict[str, str]:
    env = dict(os.environ)
    env.pop(config.SESSION.name, None)  # children act through the run token, never a session
    for name in config.HARNESS_CAPABILITIES:  # nor through the harness's own way in
        env.pop(name, None)
    # Children find the same `actors` installation as the runner (a venv's bin directory).
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    env.update(
        {
            config.RUN_ID.name: run["run"],
            config.RUN_TOKEN.name: _token,
            config.STATE_DIR.name: str(paths.dir),
            config.ADDRESS.name: f"run:{run['run']}",
            config.RUN_INSTANCE.name: run["run_instance_id"],
        }
    )
    return env


def new_context(paths: RunPaths, run: RunRecord) -> RunContext:
    """The one execution's shared state."""
    from runtime.runner.context import RunContext  # deferred: start-up cost

    ctx = RunContext(
        paths=paths,
        instance=run["run_instance_id"],
        values=run["values"],
        env=_child_env(paths, run),
        cwd=run["cwd"],
        secrets=secret_texts(run["values"], run.get("secret_names", [])),
        grace=KILL_GRACE_S,
    )
    if os.getcwd() != run["cwd"]:  # commands start in the runner's directory
        try:
            os.chdir(run["cwd"])
        except OSError as exc:
            ctx.cwd_error = exc
    return ctx


def earned(
    run: RunRecord, ctx: RunContext, outcome: Outcome | None, started: float, started_at: str
) -> ResultRecord:
    """The result a finished graph earned (not yet published), secrets masked."""
    result: dict[str, Any] = {
        "run": run["run"],
        "run_instance_id": ctx.instance,
        "created_at": run.get("created_at"),
        "started_at": started_at,
        "ended_at": now_iso(),
        "duration_ms": round((time.monotonic() - started) * 1000),
        "degraded": False,
        "killed": False,
    }
    result.update(_verdict(ctx, outcome))
    _add_artifacts_and_output(run, ctx, outcome, result)
    # a reason or output head may quote a secret (the captures are masked already)
    return cast("ResultRecord", redact_deep(result, ctx.secrets))  # every key assembled above


def _verdict(ctx: RunContext, outcome: Outcome | None) -> dict[str, Any]:
    """The run's status, code and reason, from how its graph ended (or was stopped)."""
    if ctx.skipped is not None:
        return {"status": "skipped", "code": 1, "reason": f"skipped: {ctx.skipped}"}
    if ctx.abort is not None:
        return {
            "status": "failed",
            "code": ctx.abort["code"] or 1,
            "reason": f"node {ctx.abort['label'] or ctx.abort['node']} failed with failure=root",
        }
    if ctx.stop_reason == "retired":
        return {
            "status": "done",
            "code": 0,
            "retired": True,
            "reason": "retired: every child run is terminal",
        }
    stopped = {"stopped": ctx.stopped} if ctx.stopped is not None else {}
    if ctx.stop_reason == "killed":
        return {
            "status": "killed",
            "code": 137,
            "killed": True,
            "reason": "control.kill",
            **stopped,
        }
    if outcome is None or ctx.stop_reason in ("cancelled", "stopped"):
        reason = "control.stop" if ctx.stop_reason == "stopped" else "stopped on request"
        return {"status": "cancelled", "code": 143, "reason": reason, **stopped}
    if outcome.ok:
        return {"status": "done", "code": 0, "degraded": outcome.degraded}
    return {"status": "failed", "code": outcome.code or 1, "reason": outcome.reason}


def _add_artifacts_and_output(
    run: RunRecord, ctx: RunContext, outcome: Outcome | None, result: dict[str, Any]
) -> None:
    """Declared artifacts (a required one missing fails a done run), the output and the
    per-node record."""
    from runtime.views.artifacts import manifest, missing_required  # deferred: start-up cost

    artifacts = manifest(run.get("artifacts") or {})
    missing = missing_required(artifacts)
    if missing and result["status"] == "done":
        result.update(status="failed", code=1, reason=f"required artifact missing: {missing[0]}")
    output = outcome.output if outcome is not None else None
    result.update(
        output_file=str(output) if output else None,
        output=output_preview(output),
        artifacts=artifacts,
        nodes=ctx.nodes,
        failures=ctx.failures,
        **ctx.steps.counts(),
    )
    _explain_failures(ctx, result)


def _explain_failures(ctx: RunContext, result: dict[str, Any]) -> None:
    """Each failed node gets the command that failed in it (masked), its exit code and
    the last lines of its stderr; the one that decided the run becomes `failure`, which
    `result`, `status` and the follow-up lead with: "exit code 3" alone explains nothing."""
    from runtime.store.tail import bounded_tail  # deferred: start-up cost

    for failure in ctx.failures[:FAILURES_EXPLAINED]:
        done = ctx.failed_commands.get(failure["node"])
        if done is None:
            continue
        text, cut, _ = bounded_tail(
            Path(done["stderr_file"]), max_lines=FAILURE_TAIL_LINES, max_bytes=FAILURE_TAIL_BYTES
        )
        failure.update(
            command=done["command"],
            exit_code=done["code"],
            stderr_tail=text,
            stderr_cut=cut,
            stderr_file=done["stderr_file"],
        )
    if not ctx.failures or (result["status"] != "failed" and not result.get("degraded")):
        return
    deciding = [f for f in ctx.failures if ctx.abort and f["node"] == ctx.abort["node"]]
    explained = [f for f in ctx.failures if f.get("command")]
    result["failure"] = (deciding or explained or ctx.failures)[0]


def conclude(
    paths: RunPaths,
    run: RunRecord,
    ctx: RunContext,
    outcome: Outcome | None,
    timing: tuple[float, str],
    deliveries: Deliveries | None,
) -> int:
    """The run's end, in this order: the verdict the graph earned, its terminal progress,
    event and result.json (`finish`), the step follow-ups still in flight (up to the
    delivery budget), the terminal follow-up and the sweep (`end`). The exit status."""
    from runtime.delivery.followups import preload

    preload()  # the graph has ended: load the delivery path before the result is public
    ctx.close()
    result = earned(run, ctx, outcome, *timing)
    finish(paths, run, result)
    if deliveries is not None:
        deliveries.drain(DELIVERY_BUDGET_S)
    end(paths, run, result)
    return 0 if result["status"] == "done" else 1


def crash(paths: RunPaths, run: RunRecord, exc: BaseException) -> int:
    """The runner itself failed: the run still ends, `failed` with a `runner error`."""
    result = crash_result(run, exc)
    finish(paths, run, result)
    end(paths, run, result)
    return 1


def crash_result(run: RunRecord, exc: BaseException) -> ResultRecord:
    log_exception(exc)  # runner.log, if it can still be written
    return {
        "run": run["run"],
        "run_instance_id": run["run_instance_id"],
        "status": "failed",
        "code": 1,
        "reason": f"runner error: {type(exc).__name__}: {str(exc)[:4000]}",
        "ended_at": now_iso(),
        "degraded": False,
        "killed": False,
    }


def finish(paths: RunPaths, run: RunRecord, result: ResultRecord) -> None:
    """Terminal progress, then the terminal event, then result.json (published once):
    the one place a run's end is written, by either runner. Each write waits out a full
    disk (or no descriptor left) until it lands (runtime.store.writes `patiently`): the
    outcome is in this process's memory alone, so giving up would lose it. Meanwhile the
    run is `running` (its runner verifies) and runner.log says what it waits for."""
    pause_point("runner.before_finish")
    instance = run["run_instance_id"]
    patiently(
        lambda: write_progress(
            paths.progress,
            instance,
            phase=result["status"],
            **{**counts_of(result), "active": 0},
            degraded=result.get("degraded", False),
        ),
        "write progress.json",
    )
    event = {
        "done": "run.done",
        "cancelled": "run.cancelled",
        "killed": "run.killed",
        "skipped": "run.skipped",
    }.get(result["status"], "run.failed")
    ident = new_id()

    def terminal_event() -> None:
        if not has_event(paths.events, ident):  # a try that failed only at its fsync
            record_event(
                paths.events,
                instance,
                event,
                fsync=True,
                ident=ident,
                code=result["code"],
                degraded=result.get("degraded", False),
                reason=result.get("reason"),
            )

    patiently(terminal_event, f"record {event} in events.jsonl")
    pause_point("runner.before_result")
    patiently(lambda: publish_json_once(paths.result, result), "publish result.json")
    pause_point("runner.after_result")


def end(paths: RunPaths, run: RunRecord, result: ResultRecord) -> None:
    """Deliver the terminal follow-up (retrying within a budget; the reconciler does the
    rest), unless the caller that spawned the run still waits for its result; then stop
    whatever of the run's session is still alive. Handing it over waits out a full disk
    as `finish` does: its whole step is repeated (locks released in between), and the
    session's inbox keeps one copy whatever the number of tries (its delivery id)."""
    skipped = new_id()  # the id of a `followup.skipped` event, recorded once whatever the tries
    try:
        patiently(lambda: _follow_up(paths, run, result, skipped), "hand over the follow-up")
    except Exception as exc:
        log_exception(exc)  # runner.log; `actors reconcile` will deliver it
    sweep(paths, run)
    if paths.placed_on_hosts.exists():  # out of its cgroup by now
        from runtime.runner.fold import reap_placed  # deferred: few runs went to a host

        reap_placed(StateRoot(paths.dir.parent.parent), paths)


def _follow_up(paths: RunPaths, run: RunRecord, result: ResultRecord, skipped: str) -> None:
    from runtime.delivery.followups import (  # deferred: see main
        FOLLOW_STATUSES,
        follow_up_terminal,
        skip_waited,
    )

    with locked(paths.fold_lock):  # one submitter at a time (runtime.runs.reconcile)
        waiter = _live_waiter(run) if result.get("status") in FOLLOW_STATUSES else None
        if waiter is not None:
            if not has_event(paths.events, skipped):  # an earlier try got this far
                record_event(
                    paths.events,
                    run["run_instance_id"],
                    "followup.skipped",
                    fsync=True,
                    ident=skipped,
                    reason="the caller waited for the result",
                    waiter_pid=waiter,
                )
            skip_waited(paths, waiter)
        else:
            follow_up_terminal(StateRoot.from_env(), paths, run, budget_s=DELIVERY_BUDGET_S)


def run_cgroup(paths: RunPaths, run: RunRecord) -> Path | None:
    """The cgroup spawn chose for this run, if it is one of this run's names (run.json
    is the run's own to rewrite: a foreign path is never joined or killed)."""
    recorded = run.get("cgroup")
    if not isinstance(recorded, str) or not recorded:
        return None
    path = Path(recorded)
    prefix = cgroups.run_prefix(paths.dir.parent.parent, paths.run_id)
    if path.parent.name != cgroups.BASE_NAME or not path.name.startswith(prefix):
        return None
    return path


def sweep(paths: RunPaths, run: RunRecord) -> None:
    """The run is over: nothing it started may outlive it. Its cgroup, when it has one,
    holds every process it ever started (a double-forked daemon included): the runner
    steps out of it and kills the rest at once. Then its own session, the proof that
    holds without a cgroup."""
    group = run_cgroup(paths, run)
    if group is not None and cgroups.leave(group):
        _rescue_runners(group)
        cgroups.kill([group])
    kill_session(os.getpid())  # proven: we are alive and lead this session


def _rescue_runners(group: Path) -> None:
    """A run spawned by one of this run's commands starts its runner inside this run's
    cgroup, and moves it into its own at its start (moving a process costs the kernel
    ~15 ms, which spawn does not wait for). One that has not moved yet is moved now,
    into its own run's cgroup, before this one is killed: a run this run spawned
    outlives it. A runner is known by its argv (the entry point and its run's
    directory); the cgroup it goes to is that run's, so a process that only borrows
    the argv lands in the cgroup of the run it names, and dies with that run."""

    for pid in cgroups.members(group):
        argv = (read_proc(pid, "cmdline") or b"").split(b"\0")
        if len(argv) < 4 or os.fsdecode(argv[2]) != ENTRY:
            continue
        other = RunPaths(Path(os.fsdecode(argv[3])))
        try:
            found = read_json(other.run_json)
        except ActorsError:
            continue
        target = run_cgroup(other, cast("RunRecord", found)) if isinstance(found, dict) else None
        if target is not None and target != group:
            cgroups.place(target, pid)


def _live_waiter(run: RunRecord) -> int | None:
    """The pid of the caller blocked on this run's result (`spawn --wait`, a foreground
    `actors run`) if that very process is alive now: its identity (pid, start time, boot
    id) is proven, so a recycled pid never swallows a follow-up. A waiter killed by
    Ctrl-C or SIGKILL is gone, and the follow-up is delivered as usual."""
    waiter = run.get("waiter")
    if not isinstance(waiter, dict) or verify(waiter)[0] != "valid":
        return None
    return int(waiter["pid"])


def begin(
    dir_arg: str, mode: Callable[[RunRecord], str] | None = None
) -> tuple[RunPaths, RunRecord] | int:
    """The runner's first steps, before anything slow: take the token out of the
    environment, lead a session, read run.json and record this process's identity (a
    slow import after that never makes a fresh run look dead), then ring the owner's
    guardians. An exit status when there is no usable run.json. `mode` names how the
    runner waits (`poll`); the primitives it takes are recorded beside it."""
    paths = RunPaths(Path(dir_arg))
    global _token
    _token = os.environ.pop(config.RUN_TOKEN.name, "")
    try:
        os.setsid()
    except OSError:
        pass  # already a session leader (posix_spawn setsid)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)
    for sig in STOP_SIGNALS:  # spawn started us with them blocked: none is lost before
        signal.signal(sig, early_stop)  # the runner's own handler (replay_early_stops)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, (*STOP_SIGNALS, signal.SIGQUIT))
    found = read_json(paths.run_json)
    if not isinstance(found, dict):
        print(f"runner: no usable run.json in {paths.dir}", file=sys.stderr)
        return 2
    run = cast("RunRecord", found)  # written by spawn just before it started this process
    global liveness
    # held since spawn (handed over at LIVENESS_FD); taken here when started otherwise
    liveness = platform.hold_liveness(str(paths.liveness), inherited=platform.LIVENESS_FD)
    group = run_cgroup(paths, run)
    pause_point("runner.before_cgroup")
    joined = group is not None and cgroups.join(group)
    if isinstance(run.get("cwd"), str):
        try:  # before the identity is taken: a restart's runner starts elsewhere
            os.chdir(run["cwd"])
        except OSError:
            pass  # new_context says so to every command
    identity = capture(os.getpid())
    patiently(  # a full disk: wait, rather than leave a run that never says it started
        lambda: record_event(
            paths.events,
            run["run_instance_id"],
            "run.runner.start",
            pid=os.getpid(),
            process_identity=identity,
            mode=mode(run) if mode is not None else "poll",
            cgroup=str(group) if joined else None,
            primitives=platform.paths_taken(),
        ),
        "record run.runner.start in events.jsonl",
    )
    ring_guardians(str(run.get("owner_id")))  # the owner's guardians watch us from now
    return paths, run
