"""Execute a compiled template graph with trio: the walk over its nodes.

Semantics (docs/recipes.md has the user-facing version):
- a leaf's argv is rendered per word and executed without a shell, in its own process
  group (`leaf` launches it and captures its output);
- a sequence feeds each step the previous step's complete stdout on stdin; a parallel
  node gives every branch the same stdin and joins their outputs in order under
  `--- branch: <label> status: <s> ---` headers, which no branch output can forge (a
  line of it that starts like one is quoted, runtime.runs.output.HeaderQuote);
- `retry` is the maximum number of attempts, with `recover` run between failed ones;
- a failure's policy decides how far it reaches: `continue` (default) lets the rest run
  but still fails the enclosing node, `branch` stops the enclosing subtree up to the
  nearest parallel branch where it is contained (the run is then degraded), `root` aborts
  the whole run at once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from runtime.compiler.placeholders import MAX_REPEAT, substitute_word, truthy
from runtime.core.errors import BadInput
from runtime.runs.context import Outcome, RunContext
from runtime.runs.leaf import run_leaf
from runtime.runs.output import LOG_CAP_BYTES, Capture, quoted_copy, trim
from runtime.store import safe
from runtime.store.writes import ensure_dir

TIMEOUT_CODE = 124


def _label(node: dict[str, Any], index: int) -> str:
    return str(node.get("label") or f"branch-{index}")


async def run_node(
    ctx: RunContext,
    node: dict[str, Any],
    stdin: Path | None,
    values: dict[str, Any] | None = None,
    *,
    feeds: bool = False,
) -> Outcome:
    """Run a node with its when / repeat / delay / retry / recover / timeout / failure
    policy applied. `values` carries the enclosing repeat's index variables; `feeds`
    says a later step reads this node's output (so it is kept whole)."""
    values = {
        **(node.get("scope_defaults") or {}),  # an imported recipe's defaults
        **(values if values is not None else ctx.values),
        **(node.get("scope") or {}),  # repeat variables; an import's own values
    }
    if node.get("when") is not None and not _when(node["when"], values):
        ctx.nodes.append(
            {
                "id": node["id"],
                "label": node.get("label"),
                "kind": node["kind"],
                "status": "skipped",
                "code": 0,
                "attempts": 0,
                "degraded": False,
                "reason": f"when {node['when']!r} is false",
            }
        )
        return Outcome("done", 0, stdin, reason="skipped")  # stdin passes through
    if node.get("repeat") is not None:
        group = _repeat_group(node, values)
        if isinstance(group, Outcome):
            return group
        return await run_node(ctx, group, stdin, values, feeds=feeds)
    if node.get("delay_ms"):
        await trio.sleep(node["delay_ms"] / 1000)
    outcome = Outcome("cancelled", 143, None)
    attempts = int(node.get("retry") or 1)
    for attempt in range(1, attempts + 1):
        outcome = await _attempt(ctx, node, stdin, attempt, values, feeds)
        if outcome.ok or ctx.stop_reason is not None or outcome.status == "cancelled":
            break
        if attempt < attempts and node.get("recover"):
            recovered = await run_leaf(ctx, node, node["recover"], None, attempt, values)
            if not recovered.ok:
                outcome.reason = f"{outcome.reason}; recover failed ({recovered.reason})"
                break
    ctx.record_node(node, outcome, attempt)
    return outcome


def _when(condition: str, values: dict[str, Any]) -> bool:
    try:
        return truthy(substitute_word(condition, values))
    except BadInput:
        return False  # a condition on a missing value is false, as `{x??}` is


def _repeat_group(node: dict[str, Any], values: dict[str, Any]) -> dict[str, Any] | Outcome:
    """The node as a group of `repeat` instances, each with its own index variables."""
    spec = node["repeat"]
    try:
        count = int(spec if isinstance(spec, int) else substitute_word(spec, values))
    except (BadInput, ValueError) as exc:
        why = exc.message if isinstance(exc, BadInput) else f"{spec!r} is not a count"
        return Outcome("failed", 2, None, reason=f"repeat: {why}")
    parallel = bool(node.get("repeat_parallel"))
    limit = 64 if parallel else MAX_REPEAT
    if not 0 <= count <= limit:
        return Outcome("failed", 2, None, reason=f"repeat: {count} is outside 0-{limit}")
    if count == 0:
        return Outcome("done", 0, None, reason="repeat 0: nothing to run")
    label = node.get("label")
    instances = [
        {
            **node,
            "repeat": None,
            "repeat_parallel": None,
            "id": f"{node['id']}#{index}",
            "label": f"{label}-{index}" if label else f"{node['id']}#{index}",
            "scope": {
                "index": index,
                "prev": (index - 1) % count,
                "next": (index + 1) % count,
                "repeat": count,
            },
        }
        for index in range(count)
    ]
    return {
        "id": node["id"],
        "label": label,
        "kind": "parallel" if parallel else "sequence",
        "children": instances,
        "concurrency": node.get("concurrency"),
        "min_successful": node.get("min_successful"),
        "retry": 1,
        "failure": node.get("failure") or "continue",
    }


async def _attempt(
    ctx: RunContext,
    node: dict[str, Any],
    stdin: Path | None,
    attempt: int,
    values: dict[str, Any],
    feeds: bool,
) -> Outcome:
    timeout_ms = node.get("timeout_ms")
    with trio.move_on_after(timeout_ms / 1000 if timeout_ms else float("inf")) as scope:
        if node["kind"] == "leaf":
            outcome = await run_leaf(ctx, node, node["words"], stdin, attempt, values, feeds=feeds)
        elif node["kind"] == "sequence":
            outcome = await _run_sequence(ctx, node, stdin, values, feeds)
        else:
            outcome = await _run_parallel(ctx, node, stdin, values, feeds)
    if scope.cancelled_caught:
        return Outcome("timeout", TIMEOUT_CODE, None, reason=f"timed out after {timeout_ms:g} ms")
    return outcome


async def _run_sequence(
    ctx: RunContext, node: dict[str, Any], stdin: Path | None, values: dict[str, Any], feeds: bool
) -> Outcome:
    current = stdin
    last: Outcome | None = None
    failed: Outcome | None = None
    degraded = False
    children = node["children"]
    for index, child in enumerate(children):
        later = feeds or index < len(children) - 1  # a later step reads this one's output
        last = await run_node(ctx, child, current, values, feeds=later)
        if current is not stdin and current != last.output:
            trim(current)  # read by the step that just ended, and by no other
        degraded = degraded or last.degraded
        if not last.ok:
            if last.status == "cancelled":
                return last
            failed = failed or last
            if last.escalation in ("branch", "root"):
                return Outcome(
                    last.status,
                    last.code,
                    last.output,
                    "branch" if last.escalation == "branch" else None,
                    degraded,
                    last.reason,
                )
        current = last.output
    assert last is not None
    if failed is not None:
        return Outcome("failed", failed.code, last.output, None, degraded, failed.reason)
    return Outcome("done", 0, last.output, None, degraded)


async def _run_parallel(
    ctx: RunContext, node: dict[str, Any], stdin: Path | None, values: dict[str, Any], feeds: bool
) -> Outcome:
    children = node["children"]
    minimum = _minimum(node, values, len(children))
    if isinstance(minimum, Outcome):
        return minimum
    node = {**node, "min_successful": minimum}
    results: list[Outcome | None] = [None] * len(children)
    limiter = trio.CapacityLimiter(node.get("concurrency") or len(children))
    labels = [_label(child, i) for i, child in enumerate(children, start=1)]

    async def branch(index: int) -> None:
        async with limiter:
            ctx.branches[labels[index]] = "running"
            result = await run_node(ctx, children[index], stdin, values, feeds=True)
            results[index] = result
            ctx.branches[labels[index]] = result.status

    async with trio.open_nursery() as nursery:
        for index in range(len(children)):
            nursery.start_soon(branch, index)
    final = [r or Outcome("cancelled", 143, None) for r in results]
    output = _join_outputs(ctx, node, labels, final, (stdin, feeds))
    successes = sum(1 for r in final if r.ok)
    usable = sum(1 for r in final if _usable(r))
    counted_failures = [r for r in final if not r.ok and r.escalation != "branch"]
    contained = [r for r in final if not r.ok and r.escalation == "branch"]
    minimum = node.get("min_successful")
    ok = usable >= minimum if minimum is not None else not counted_failures and successes > 0
    degraded = ok and (len(contained) + len(counted_failures) > 0 or any(r.degraded for r in final))
    if ok:
        return Outcome("done", 0, output, None, degraded)
    worst = (counted_failures or contained or final)[0]
    reason = f"{successes} of {len(final)} branches succeeded"
    if minimum is not None:
        reason = f"{usable} of {len(final)} branches usable (minimum {minimum})"
    return Outcome("failed", worst.code or 1, output, None, False, reason)


def _minimum(node: dict[str, Any], values: dict[str, Any], branches: int) -> int | Outcome | None:
    """The group's `min_successful`: a placeholder (`{quorum}`) is rendered with the run's
    values; one that is not a count up to the number of branches fails the group before
    any branch starts."""
    spec = node.get("min_successful")
    if not isinstance(spec, str):
        return spec if isinstance(spec, int) else None
    try:
        minimum = int(substitute_word(spec, values))
    except (BadInput, ValueError) as exc:
        why = exc.message if isinstance(exc, BadInput) else f"{spec!r} is not a count"
        return Outcome("failed", 2, None, reason=f"min_successful: {why}")
    if not 0 <= minimum <= branches:
        return Outcome(
            "failed", 2, None, reason=f"min_successful: {minimum} is outside 0-{branches} branches"
        )
    return minimum


def _usable(outcome: Outcome) -> bool:
    """A branch counts toward `min_successful` when it succeeded and produced output."""
    return outcome.ok and outcome.output is not None and safe.lstat(outcome.output).st_size > 0


def _join_outputs(
    ctx: RunContext,
    node: dict[str, Any],
    labels: list[str],
    results: list[Outcome],
    flow: tuple[Path | None, bool],
) -> Path:
    """The branches' outputs under their headers, streamed; the branch captures are then
    read by no one and cut to the cap (as is the join when no later step reads it)."""
    path = ctx.paths.node_output(node["id"])
    ensure_dir(path.parent)
    stdin, feeds = flow
    out = Capture(path, None if feeds else LOG_CAP_BYTES)
    try:
        minimum = node.get("min_successful")
        if minimum is not None:
            usable = sum(1 for r in results if _usable(r))
            state = (
                "complete"
                if usable == len(results)
                else "degraded"
                if usable >= minimum
                else "insufficient_data"
            )
            out.write(
                f"--- parallel_status: {state} usable: {usable} expected: "
                f"{len(results)} minimum: {minimum} ---\n".encode()
            )
        for label, result in zip(labels, results, strict=True):
            out.write(f"--- branch: {label} status: {result.status} ---\n".encode())
            if result.output and result.output.exists():
                quoted_copy(out, result.output)  # no branch output can pass for a header
                if result.output != stdin:  # a skipped branch passes the stdin through
                    trim(result.output)
    finally:
        out.close()
    return path
