"""`actors emit` from inside a run, and tmux wake-to-injected for a follow-up."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._stats import emit, register_session, row


def main(quick: bool) -> None:
    n = 20 if quick else 100
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        os.environ["ACTORS_HOME"] = str(Path(tmp) / "state")
        import actors

        record = actors.spawn(template="sleep 600")
        token = Path(record["state_dir"], "token").read_text().strip()
        env = dict(os.environ, ACTORS_RUN_ID=record["run"], ACTORS_RUN_TOKEN=token)
        env.pop("ACTORS_SESSION", None)
        base, wall = [], []
        for i in range(n):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], check=True)
            base.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "actors", "emit", "progress.tick", str(i)],
                env=env,
                check=True,
            )
            wall.append((time.perf_counter() - t0) * 1000)
        emit(row("actors emit (CLI, inside a run) wall", wall, base))
        actors.kill(record["run"])

        if shutil.which("tmux") is None:
            emit("tmux wake-to-injected: skipped (tmux not installed)")
            return
        socket = f"actors-bench-{os.getpid()}"
        os.environ["TMUX_TMPDIR"] = tmp
        subprocess.run(
            [
                "tmux",
                "-L",
                socket,
                "-f",
                "/dev/null",
                "new-session",
                "-d",
                "-s",
                "agent",
                "-x",
                "200",
                "-y",
                "50",
                "cat",
            ],
            check=True,
        )
        try:
            register_session("tmux", "tm", socket=socket, target="agent:0.0", enter_delay="0.15")
            from runtime.core.ids import new_id
            from runtime.delivery.engine import DeliveryRunner
            from runtime.store.layout import StateRoot

            runner = DeliveryRunner(StateRoot.from_env())
            samples = []
            for i in range(5 if quick else 20):
                env_id = new_id()
                t0 = time.perf_counter()
                state = runner.submit(
                    "tm",
                    {"id": env_id, "type": "note", "summary": f"bench {i}"},
                    delivery_id=env_id,
                )
                assert state.get("state") == "delivered", state
                samples.append((time.perf_counter() - t0) * 1000)
            emit(row("tmux follow-up: submit -> injected (seen)", samples))
            emit("  (includes the 150 ms Enter delay the Ink-based TUIs need)")
        finally:
            subprocess.run(["tmux", "-L", socket, "kill-server"], check=False)


if __name__ == "__main__":
    main("--quick" in sys.argv)
