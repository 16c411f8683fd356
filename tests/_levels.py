"""What `actors doctor delivery` observed, per harness and version: the rows of the
generated level table in docs/adapters.md.

The doctor tests (file and tmux in tests/adapters, every real harness in tests/peers)
pass the doctor's output through `observed`, which returns the verdicts by level for the
test's own assertions and, when ACTORS_LEVELS_REPORT names a file, appends one JSON line
describing the observation. `scripts/adapters_report.py` sets that variable, runs those
tests and renders the table from the lines, so the page states only what a passing test
saw (a row is appended before the test asserts; the script drops the rows of a test that
failed).
"""

from __future__ import annotations

import json
import os
import re
import time

LEVEL_LINE = re.compile(r'^(D[0-8]) (\w+): ([\w/]+)(?: reason="(.*)")?$', re.M)
FIELD_LINE = re.compile(r"^(harness|transport|declared_level)=(.*)$", re.M)


def observed(stdout: str, *, version: str = "", setup: str = "", pin: str = "") -> dict[str, str]:
    """The doctor's verdicts by level (`{"D3": "pass", ...}`), read only from the lines
        that start with a level (a probe token elsewhere may end in `D8` too); recorded as a
        row when the report is on. `setup` says how the session was reached when one harness
        is probed in more than one way (`-o messaging=socket`); `pin` names a second, older pin
    of the harness (peers/<pin>/), empty for the current one."""
    verdicts = {found.group(1): found.group(3) for found in LEVEL_LINE.finditer(stdout)}
    target = os.environ.get("ACTORS_LEVELS_REPORT")
    if target and verdicts:
        fields = {found.group(1): found.group(2) for found in FIELD_LINE.finditer(stdout)}
        row = {
            **fields,
            "version": version,
            "setup": setup,
            "pin": pin,
            "verdicts": verdicts,
            "reasons": {f.group(1): f.group(4) or "" for f in LEVEL_LINE.finditer(stdout)},
            "test": os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0],
            "ts": time.time(),
        }
        with open(target, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(row) + "\n")
    return verdicts
