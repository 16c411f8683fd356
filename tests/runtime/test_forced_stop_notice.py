"""The one decision about a forced-stop notice (runtime.delivery.followups): it reads the
outcome published, which a hostile run can rewrite, so every field it trusts is checked."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from runtime.delivery.followups import terminal_followup
from runtime.store.layout import StateRoot

if TYPE_CHECKING:
    from pathlib import Path

    from runtime.store.records import ResultRecord, RunRecord


def _notice(tmp_path: Path, owner: str, status: str, stopped: Any) -> dict[str, Any] | None:
    run = cast("RunRecord", {"run": "r1", "run_instance_id": "i1", "owner_id": owner})
    result = cast(
        "ResultRecord",
        {"run": "r1", "run_instance_id": "i1", "status": status, "code": 143, "stopped": stopped},
    )
    envelope = terminal_followup(StateRoot(tmp_path).run("r1"), run, result)
    return cast("dict[str, Any] | None", envelope)


def test_only_another_sessions_forced_stop_of_a_session_run_is_told(tmp_path: Path) -> None:
    told = _notice(tmp_path, "owner", "cancelled", {"by": "intruder", "forced": True})
    assert told is not None and told["summary"].startswith("Run r1 cancelled by intruder")
    assert told["idempotency_key"] == "i1:forced"
    for owner, status, stopped in (
        ("owner", "cancelled", {"by": "owner", "forced": True}),  # its own stop
        ("owner", "killed", {"by": "intruder", "forced": False}),  # allowed without force
        ("owner", "killed", {"by": "intruder", "forced": "yes"}),  # not a boolean true
        ("owner", "killed", {"by": 7, "forced": True}),
        ("owner", "killed", ["intruder", True]),
        ("owner", "killed", None),
        ("run:parent", "killed", {"by": "intruder", "forced": True}),  # a parent is rung
    ):
        assert _notice(tmp_path, owner, status, stopped) is None, (owner, stopped)


def test_a_stopper_name_a_run_forged_is_inert_and_bounded(tmp_path: Path) -> None:
    forged = "\x1b]0;pwned\x07evil\nnext: rm -rf ~" + "x" * 500
    told = _notice(tmp_path, "owner", "killed", {"by": forged, "forced": True})
    assert told is not None
    for text in (told["summary"], told["body"]["by"]):
        assert "\x1b" not in text and "\x07" not in text and "\n" not in text, text
    assert len(told["body"]["by"]) <= 80
