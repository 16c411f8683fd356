"""A recipe's `precheck`: its own check of the values, run by spawn before anything is
written. Exit 0 lets the spawn go on; any other exit refuses it (exit 2) with the last
line the command wrote to stderr, so a recipe can refuse what only it understands (two
scopes that would share one git branch) while the state root stays untouched.
"""

from __future__ import annotations

import os
import subprocess
from typing import Any

from runtime.compiler.placeholders import render_argv
from runtime.core import config
from runtime.core.errors import BadInput

PRECHECK_TIMEOUT_S = 60.0


def precheck(recipe: str, words: list[str], values: dict[str, Any]) -> None:
    """Run the precheck (stdin /dev/null, the caller's directory and environment minus
    any run identity); BadInput when it fails, cannot start or takes too long."""
    argv = render_argv(words, values)
    marks = {
        s.name for s in (config.RUN_ID, config.RUN_TOKEN, config.RUN_INSTANCE, config.STATE_DIR)
    }
    env = {k: v for k, v in os.environ.items() if k not in marks}
    try:
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            env=env,
            timeout=PRECHECK_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise BadInput(
            f"{recipe}: its precheck took over {PRECHECK_TIMEOUT_S:.0f} s; nothing was started"
        ) from None
    except OSError as exc:
        raise BadInput(
            f"{recipe}: its precheck {argv[0]!r} could not start ({exc.strerror})",
            hint="nothing was started",
        ) from None
    if done.returncode != 0:
        text = done.stderr.decode("utf-8", "replace").strip().splitlines()
        why = text[-1].strip() if text else f"its precheck exited {done.returncode}"
        why = why.removeprefix(f"{recipe}: ")  # the script may name itself too
        raise BadInput(f"{recipe}: {why[:500]}")
