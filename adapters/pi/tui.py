"""`pi_tui`: a user's own interactive pi, reached through the actors pi extension.

`actors install pi` writes the extension into pi's extensions directory; inside the
user's pi process it registers each pi session (`actors hook pi-session-start`), watches
the session's wake file with fs.watch, and on a change sends the unread follow-ups in as
one user message (`actors hook pi-wake`, adapters/pi/extension.py). So delivery itself is
the file adapter's: the inbox append rings the wake file, and pi's own extension does
the waking, with no host process of ours (the `pi` harness, adapters/pi/adapter.py, is
the other way: a pi we start in RPC mode).

Capabilities: D6. `native`: the running pi session itself is woken; `injects`: the
follow-up's fenced text is the user message (no self-fetch). No completion is observed
(the extension reports nothing back after the turn), so no D7.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from adapters.file import FileAdapter
from runtime.delivery.contract import Capabilities, Option

if TYPE_CHECKING:
    from runtime.delivery.doctor import Probe


class PiTuiAdapter(FileAdapter):
    """The file adapter's delivery (the inbox append rings the wake file); the actors pi
    extension inside the user's pi does the waking."""

    capabilities = Capabilities(
        wake_mode="the actors pi extension watches the wake file (fs.watch) and sends the"
        " follow-ups in as a user message (pi.sendUserMessage)",
        level="D6",
        modes=("immediate", "on-idle", "manual"),
        notes="the user's own interactive pi, with `actors install pi`; proven by tests/peers",
        native=True,
        injects=True,
    )
    OPTIONS: ClassVar[tuple[Option, ...]] = ()

    @classmethod
    def judge_probe(cls, probe: Probe) -> None:
        """`actors doctor delivery`: judged from the wake log the extension's hook writes."""
        judge(probe)


def judge(probe: Probe, wait_s: float = 10.0) -> None:
    """Wait for the wake-log record that names the probe: the extension handed it to pi."""
    import time

    from adapters.pi.extension import VIA
    from runtime.store.reads import read_jsonl

    started = time.monotonic()
    record = None
    while record is None and time.monotonic() - started < wait_s:
        record = next(
            (
                r
                for r in read_jsonl(probe.paths.wakes).records
                if probe.delivery_id in (r.get("ids") or []) and r.get("via") == VIA
            ),
            None,
        )
        if record is None:
            time.sleep(0.05)
    woke = record is not None
    after = f"{(time.monotonic() - started) * 1000:.0f} ms"
    level = probe.level
    level("D1 native_free_continuation", "pass", "the user's running pi session is woken itself")
    level(
        "D2 receiver_armed",
        "pass" if woke else "fail",
        "the actors pi extension watches the wake file"
        if woke
        else "no extension took the probe: is pi running with `actors install pi`?",
    )
    level(
        "D3 addressed_enqueue",
        "pass" if probe.copies == 1 else "fail",
        f"token={probe.token} in {probe.paths.inbox}",
    )
    level(
        "D4 idle_active_wake",
        "pass" if woke else "fail",
        f"the extension sent it in after {after}" if woke else f"no wake within {wait_s:.0f} s",
    )
    level(
        "D5 context_injection",
        "pass" if woke else "fail",
        "the follow-up's fenced text itself is the user message",
    )
    level("D6 continuity", "pass" if woke else "fail", f"same session ({probe.owner})")
    level("D7 completion_reply", "n/a", "the extension reports no turn end")
    level(
        "D8 robustness",
        "pass" if probe.copies == 1 else "fail",
        "duplicate id suppressed; handed over once under the session's locks",
    )
