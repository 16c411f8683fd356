"""`python -m runtime.runs.runner STATE_DIR`: the process that owns one run from start to end.

It records its own identity first (before importing trio, so a slow import never makes a
fresh run look dead), executes the template graph, traps SIGTERM / SIGINT / SIGHUP as a
graceful stop (children get SIGTERM, a grace period, then SIGKILL), writes the terminal
progress and events, and publishes result.json last. Before exiting it stops anything of
the run's session that is still alive, so no descendant outlives its run.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from runtime.compiler.redact import secret_texts
from runtime.core import config
from runtime.core.faults import pause_point
from runtime.core.ids import now_iso
from runtime.core.process import capture, kill_session
from runtime.runs.events import record_event, write_progress
from runtime.store.files import publish_json_once, read_bytes, read_json
from runtime.store.journals import LOG
from runtime.store.layout import RunPaths

KILL_GRACE_S = config.seconds(config.KILL_GRACE)
DELIVERY_BUDGET_S = config.seconds(config.DELIVERY_BUDGET)
CONTROL_COALESCE_S = 0.002
RETIRE_RECHECK_S = 5.0  # a child that ended without a follow-up is noticed this late at worst
RETIRE_SETTLE_S = 1.0  # children spawned within this long after the others ended still count
OUTPUT_PREVIEW_CHARS = 4000


def _child_env(paths: RunPaths, run: dict[str, Any]) -> dict[str, str]:
    env = dict(os.environ)
    env.pop(config.SESSION.name, None)  # children act through the run token, never a session
    # Children find the same `actors` installation as the runner (a venv's bin directory).
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    token = read_bytes(paths.token).decode().strip()
    env.update(
        {
            config.RUN_ID.name: run["run"],
            config.RUN_TOKEN.name: token,
            config.STATE_DIR.name: str(paths.dir),
            config.ADDRESS.name: f"run:{run['run']}",
            config.RUN_INSTANCE.name: run["run_instance_id"],
        }
    )
    return env


def _preview(path: Path | None) -> str | None:
    if path is None or not path.exists():
        return None
    return read_bytes(path, limit=OUTPUT_PREVIEW_CHARS * 4).decode(errors="replace")[
        :OUTPUT_PREVIEW_CHARS
    ]


async def _execute(paths: RunPaths, run: dict[str, Any]) -> dict[str, Any]:
    import trio

    from runtime.runs.artifacts import manifest, missing_required
    from runtime.runs.executor import RunContext, run_node

    ctx = RunContext(
        paths=paths,
        instance=run["run_instance_id"],
        values=run["values"],
        env=_child_env(paths, run),
        cwd=run["cwd"],
        secrets=secret_texts(run["values"], run.get("secret_names", [])),
        grace=KILL_GRACE_S,
    )
    ctx.on_command_done = lambda done: _command_done(paths, run, ctx, done)
    started, started_at = time.monotonic(), now_iso()
    outcome = None

    async def watch_signals(task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
            task_status.started()
            async for signum in signals:
                record_event(
                    paths.events, ctx.instance, "run.signal", signal=signal.Signals(signum).name
                )
                ctx.stop("cancelled")

    async def consume_controls(task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Apply control.* messages from the run's inbox (woken by its doorbell)."""
        from runtime.messaging.boxes import CONTROL_TYPES, run_mailbox
        from runtime.messaging.mailbox import RECONCILE_INTERVAL_S, doorbell

        box = run_mailbox(paths)
        with doorbell(box.doorbells, topic="control") as fd:
            task_status.started()
            while True:
                for entry in box.claim(types=CONTROL_TYPES, limit=16, consumer="runner"):
                    _apply_control(ctx, box, entry)
                with trio.move_on_after(RECONCILE_INTERVAL_S):
                    await trio.lowlevel.wait_readable(fd)
                    # Coalesce a burst: one claim pass for everything rung in the next ms,
                    # instead of one pass (and one flock) per message of a busy inbox.
                    await trio.sleep(CONTROL_COALESCE_S)
                try:
                    os.read(fd, 65536)
                except BlockingIOError:
                    pass

    async def retire_when_children_end(task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """`retire_when: children_terminal`: once this run has spawned child runs and every
        one of them is terminal, stop this run (SIGTERM, grace, SIGKILL), exactly once.
        Woken by the children's own follow-ups (types `run.*`, routed to this run's inbox);
        a slow timer covers a child that ended without one (its runner vanished)."""
        from runtime.messaging.boxes import run_mailbox
        from runtime.messaging.mailbox import doorbell
        from runtime.runs.index import list_runs
        from runtime.runs.status import TERMINAL
        from runtime.store.layout import StateRoot

        me, root = f"run:{run['run']}", StateRoot.from_env()
        with doorbell(run_mailbox(paths).doorbells, topic="run") as fd:
            task_status.started()
            while True:
                children = [
                    r
                    for r in await trio.to_thread.run_sync(list_runs, root)
                    if r.get("parent") == me
                ]
                if children and all(r.get("status") in TERMINAL for r in children):
                    # settle: a supervisor may be between two spawns when its first child ends
                    await trio.sleep(RETIRE_SETTLE_S)
                    again = await trio.to_thread.run_sync(list_runs, root)
                    if sorted(r["run"] for r in again if r.get("parent") == me) != sorted(
                        r["run"] for r in children
                    ):
                        continue
                    record_event(
                        paths.events,
                        ctx.instance,
                        "run.retire",
                        children=[r["run"] for r in children],
                    )
                    ctx.stop("retired")
                    return
                with trio.move_on_after(RETIRE_RECHECK_S):
                    await trio.lowlevel.wait_readable(fd)
                try:
                    os.read(fd, 65536)
                except BlockingIOError:
                    pass

    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(watch_signals)
            await nursery.start(consume_controls)
            if run.get("retire_when") == "children_terminal":
                await nursery.start(retire_when_children_end)
            ctx.progress()
            with ctx.root_scope:
                outcome = await run_node(ctx, run["template"], None)
            nursery.cancel_scope.cancel()
    finally:
        ctx.close()

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
    if ctx.abort is not None:
        result.update(
            status="failed",
            code=ctx.abort["code"] or 1,
            reason=f"node {ctx.abort['label'] or ctx.abort['node']} failed with failure=root",
        )
    elif ctx.stop_reason == "retired":
        result.update(
            status="done", code=0, retired=True, reason="retired: every child run is terminal"
        )
    elif ctx.stop_reason == "killed":
        result.update(status="killed", code=137, killed=True, reason="control.kill")
    elif outcome is None or ctx.stop_reason in ("cancelled", "stopped"):
        reason = "control.stop" if ctx.stop_reason == "stopped" else "stopped on request"
        result.update(status="cancelled", code=143, reason=reason)
    elif outcome.ok:
        result.update(status="done", code=0, degraded=outcome.degraded)
    else:
        result.update(status="failed", code=outcome.code or 1, reason=outcome.reason)
    artifacts = manifest(run.get("artifacts") or {})
    missing = missing_required(artifacts)
    if missing and result["status"] == "done":
        result.update(status="failed", code=1, reason=f"required artifact missing: {missing[0]}")
    output = outcome.output if outcome is not None else None
    result.update(
        output_file=str(output) if output else None,
        output=_preview(output),
        artifacts=artifacts,
        nodes=ctx.nodes,
        failures=ctx.failures,
        completed=ctx.completed,
        failed=ctx.failed,
    )
    return result


def _apply_control(ctx: Any, box: Any, entry: dict[str, Any]) -> None:
    kind = entry["envelope"]["type"]
    if kind == "control.stop":
        box.mark(entry["id"], "handled")
        ctx.stop("stopped")
    elif kind == "control.kill":
        box.mark(entry["id"], "handled")
        ctx.grace = 0.0
        ctx.stop("killed")
    else:
        box.mark(entry["id"], "failed", error=f"{kind} applies to finished runs only")


def _finish(paths: RunPaths, run: dict[str, Any], result: dict[str, Any]) -> None:
    """Terminal progress, then the terminal event, then result.json (published once)."""
    instance = run["run_instance_id"]
    write_progress(
        paths.progress,
        instance,
        phase=result["status"],
        active=0,
        completed=result.get("completed", 0),
        failed=result.get("failed", 0),
        degraded=result.get("degraded", False),
    )
    event = {"done": "run.done", "cancelled": "run.cancelled", "killed": "run.killed"}.get(
        result["status"], "run.failed"
    )
    record_event(
        paths.events,
        instance,
        event,
        fsync=True,
        code=result["code"],
        degraded=result.get("degraded", False),
        reason=result.get("reason"),
    )
    pause_point("runner.before_result")
    publish_json_once(paths.result, result)
    pause_point("runner.after_result")


_DELIVERY_THREADS: list[threading.Thread] = []


def _follow_up(paths: RunPaths, run: dict[str, Any]) -> None:
    """Deliver the terminal follow-up (retrying within a budget; the reconciler does the rest)."""
    from runtime.delivery.followups import follow_up_terminal
    from runtime.store.layout import StateRoot

    try:
        follow_up_terminal(StateRoot.from_env(), paths, run, budget_s=DELIVERY_BUDGET_S)
    except Exception:
        traceback.print_exc()  # runner.log; `actors reconcile` will deliver it


def _command_done(paths: RunPaths, run: dict[str, Any], ctx: Any, done: dict[str, Any]) -> None:
    """Journal every leaf in the outbox; bubble failures and parallel branch completions."""
    from runtime.core.ids import new_id
    from runtime.delivery.followups import deliver
    from runtime.store.files import append_jsonl
    from runtime.store.layout import StateRoot

    failed = done["status"] != "done"
    envelope = {
        "id": new_id(),
        "type": "command.done",
        "to": "coordinator",
        "from": f"run:{run['run']}",
        "summary": f"Command {done.get('label') or done['node']} completed with code {done['code']}",
        "level": "error" if failed else "info",
        "ts": now_iso(),
        "body": done,
        "run": run["run"],
        "run_instance_id": run["run_instance_id"],
        "delivery": "followup" if failed or ctx.active > 0 else "log",
    }
    append_jsonl(paths.outbox, envelope, compactor=LOG)
    if envelope["delivery"] == "followup" and done["status"] != "cancelled":
        # Off the event loop: a slow adapter (a webhook timing out) must not stall the run.
        def send() -> None:
            try:
                deliver(StateRoot.from_env(), run, envelope)
            except Exception:
                traceback.print_exc()

        thread = threading.Thread(target=send, name=f"followup-{done['command_id']}")
        thread.start()
        _DELIVERY_THREADS.append(thread)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m runtime.runs.runner STATE_DIR", file=sys.stderr)
        return 2
    paths = RunPaths(Path(args[0]))
    try:
        os.setsid()
    except OSError:
        pass  # already a session leader (posix_spawn setsid)
    for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)
    run = read_json(paths.run_json)
    if not isinstance(run, dict):
        print(f"runner: no usable run.json in {paths.dir}", file=sys.stderr)
        return 2
    instance = run["run_instance_id"]
    record_event(
        paths.events,
        instance,
        "run.runner.start",
        pid=os.getpid(),
        process_identity=capture(os.getpid()),
    )
    import trio

    from runtime.delivery.followups import preload

    preload()  # the terminal follow-up must not wait on imports

    try:
        result = trio.run(_execute, paths, run)
    except BaseException as exc:  # the run must still end with a result
        traceback.print_exc()
        result = {
            "run": run["run"],
            "run_instance_id": instance,
            "status": "failed",
            "code": 1,
            "reason": f"runner error: {type(exc).__name__}: {exc}",
            "ended_at": now_iso(),
            "degraded": False,
            "killed": False,
        }
    _finish(paths, run, result)
    for thread in _DELIVERY_THREADS:  # step follow-ups land before the terminal one
        thread.join(timeout=DELIVERY_BUDGET_S)
    _follow_up(paths, run)
    kill_session(os.getpid())
    return 0 if result["status"] == "done" else 1


if __name__ == "__main__":
    sys.exit(main())
