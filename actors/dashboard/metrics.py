"""`/metrics` and `actors metrics`: the state root's tally (runtime.views.tally) in the
Prometheus text exposition format 0.0.4.

Written out by hand rather than with prometheus_client: the format is a few lines of
text, and every number is a read of the state root at scrape time, so a client library's
registry and collectors would be the same code wrapped in a dependency. Label values are
escaped as the format requires (backslash, double quote, line feed) and any other control
character becomes U+FFFD, so no recipe or harness name can forge or break a line.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from runtime.store.layout import StateRoot
    from runtime.views.tally import Tally

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""The Content-Type a server sends with `render_metrics`'s text."""
SPAWN_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
"""Seconds: a runner is ready in tens of milliseconds when the machine is idle."""
FOLLOWUP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
                    300.0, 1800.0)  # fmt: skip
"""Seconds: milliseconds for an inbox, up to minutes for a retried or held delivery."""
LABEL_CHARS = 200
"""The longest label value kept (a longer one is cut and ends with `…`)."""

Labels = Mapping[str, str]


def render_metrics(root: StateRoot) -> str:
    """Every metric of the state root, as one text document ending in a newline."""
    from runtime.views.tally import gather

    started = time.perf_counter()
    tally = gather(root)
    text = _Text()
    _runs(text, tally)
    _latency(text, tally)
    _deliveries(text, tally)
    _build(text, time.perf_counter() - started)
    return text.done()


def _runs(text: _Text, tally: Tally) -> None:
    from runtime.views.tally import STATUSES

    text.family("actors_runs", "gauge", "Runs in the state root by status.")
    for status in (*STATUSES, *sorted(set(tally.runs) - set(STATUSES))):
        text.sample("actors_runs", {"status": status}, tally.runs[status])
    text.family(
        "actors_runs_by_recipe",
        "gauge",
        "Runs by recipe and status (the most used recipes by name, the rest as (other);"
        " inline templates as (template), tools as tool:NAME).",
    )
    for (recipe, status), count in sorted(tally.by_recipe.items()):
        text.sample("actors_runs_by_recipe", {"recipe": recipe, "status": status}, count)
    _steps(text, tally)


def _steps(text: _Text, tally: Tally) -> None:
    """The finished runs' steps, by the one definition `status` and the dashboard use
    (runtime.views.counts): how each step ended, its attempts and retries."""
    from runtime.views.counts import FINAL_COUNTS

    name = "actors_steps"
    text.family(
        name,
        "gauge",
        "Steps of the finished runs in the state root by how their last attempt ended"
        " (failed includes timed_out).",
    )
    for key in FINAL_COUNTS[:4]:
        text.sample(name, {"state": key}, tally.steps[key])
    for key, what in (
        ("attempts", "attempts of"),
        ("retries", "retries (attempts after the first) of"),
    ):
        text.family(f"actors_step_{key}", "gauge", f"The {what} the finished runs' steps.")
        text.sample(f"actors_step_{key}", {}, tally.steps[key])


def _latency(text: _Text, tally: Tally) -> None:
    text.histogram(
        "actors_spawn_latency_seconds",
        "Spawn requested (run.json created_at) to the runner started (its run.runner.start"
        " event), over the runs in the state root.",
        {(): tally.spawn_s},
        SPAWN_BUCKETS,
    )
    text.histogram(
        "actors_followup_latency_seconds",
        "Run ended (result.json ended_at) to its terminal follow-up delivered or accepted"
        " (the receipt in the session's deliveries.jsonl), by harness.",
        {(("harness", h),): samples for h, samples in sorted(tally.followup_s.items())},
        FOLLOWUP_BUCKETS,
    )


def _deliveries(text: _Text, tally: Tally) -> None:
    name = "actors_delivery_receipts_total"
    text.family(name, "counter", "Delivery receipts journaled, by receipt status and harness.")
    for (status, harness), count in sorted(tally.receipts.items()):
        text.sample(name, {"status": status, "harness": harness}, count)
    name = "actors_deliveries_pending"
    text.family(name, "gauge", "Follow-ups not yet delivered, accepted or finally failed.")
    text.sample(name, {}, tally.pending_deliveries)
    for name, what, help_text in (
        ("actors_inbox_backlog", "waiting", "Messages waiting in inboxes, summed by kind"),
        ("actors_inbox_backlog_max", "fullest", "Messages waiting in the fullest inbox of a kind"),
        ("actors_inboxes", "inboxes", "Inboxes counted in the backlog, by kind"),
    ):
        text.family(
            name,
            "gauge",
            f"{help_text} (session: unread follow-ups; run, branch: unclaimed messages of"
            " live runs).",
        )
        for kind, backlog in sorted(tally.backlogs.items()):
            text.sample(name, {"kind": kind}, getattr(backlog, what))


def _build(text: _Text, took_s: float) -> None:
    from actors._version import __version__

    text.family("actors_build_info", "gauge", "The actors version serving these metrics.")
    labels = {"version": __version__, "python": platform.python_version()}
    text.sample("actors_build_info", labels, 1)
    name = "actors_metrics_gather_seconds"
    text.family(name, "gauge", "Seconds this scrape took to read the state root.")
    text.sample(name, {}, took_s)


def escape_label(value: str) -> str:
    """A label value as the format writes it between double quotes."""
    if len(value) > LABEL_CHARS:
        value = value[: LABEL_CHARS - 1] + "…"
    out = []
    for char in value:
        if char == "\\":
            out.append("\\\\")
        elif char == '"':
            out.append('\\"')
        elif char == "\n":
            out.append("\\n")
        elif char < " " or "\x7f" <= char <= "\x9f" or "\ud800" <= char <= "\udfff":
            out.append("\ufffd")  # a control character, or a lone surrogate (not UTF-8)
        else:
            out.append(char)
    return "".join(out)


def number(value: float) -> str:
    """A sample value: integers as such, floats in Python's shortest exact form."""
    if isinstance(value, int):
        return str(value)
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


class _Text:
    """The document being written: `# HELP` and `# TYPE` once per family, then samples."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def family(self, name: str, kind: str, help_text: str) -> None:
        escaped = help_text.replace("\\", "\\\\").replace("\n", "\\n")
        self.lines += [f"# HELP {name} {escaped}", f"# TYPE {name} {kind}"]

    def sample(self, name: str, labels: Labels, value: float) -> None:
        if labels:
            inner = ",".join(f'{key}="{escape_label(val)}"' for key, val in labels.items())
            name = f"{name}{{{inner}}}"
        self.lines.append(f"{name} {number(value)}")

    def histogram(
        self,
        name: str,
        help_text: str,
        series: Mapping[tuple[tuple[str, str], ...], Iterable[float]],
        buckets: tuple[float, ...],
    ) -> None:
        """Cumulative `_bucket{le=...}` counts ending in `+Inf`, then `_sum` and `_count`."""
        self.family(name, "histogram", help_text)
        for key, values in series.items():
            samples = sorted(values)
            labels = dict(key)
            seen = 0
            for bound in buckets:
                while seen < len(samples) and samples[seen] <= bound:
                    seen += 1
                self.sample(f"{name}_bucket", {**labels, "le": number(bound)}, seen)
            self.sample(f"{name}_bucket", {**labels, "le": "+Inf"}, len(samples))
            self.sample(f"{name}_sum", labels, float(sum(samples)))
            self.sample(f"{name}_count", labels, len(samples))

    def done(self) -> str:
        return "\n".join(self.lines) + "\n"
