"""Big state roots, fast: a few real runs, then clones of their finished state dirs.

Spawning 10,000 real runs takes many minutes on a small machine; reading 10,000 state
dirs is what a listing, a dashboard or a metrics scrape pays for. So `build_state_root`
spawns a handful of real runs (done, failed, killed), waits until each is finished and
its follow-up settled, then copies each finished directory under new ids, giving every
copy its own run id and run instance id (the delivery id derives from the latter), and
appends the copies' follow-ups to the owner session's inbox and delivery journal. The
index is then built the way the runtime builds it: by listing the runs
(`runtime.views.index.list_runs`). Every file is real and readable by every command.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from runtime.core.ids import new_id

SESSION = "bench"
"""The file session that owns the runs (its inbox holds their follow-ups)."""
SEEDS = ("true", "false", "sleep 60")
"""The real runs each copy is cloned from: done, failed, and (killed) killed."""
_SKIP = {"doorbells", "guardians", "control.fifo", "fifo-commits"}
"""Live wake-up machinery of a running run: a finished one has nothing there to copy."""


def build_state_root(root: Path, runs: int) -> None:
    """Fill the state root `root` (the `ACTORS_HOME` directory) with `runs` finished runs:
    real seeds plus clones, owned by the file session `bench`, indexed like `actors ls`."""
    from runtime.store.layout import StateRoot
    from runtime.store.reads import read_json
    from runtime.views.index import list_runs

    root = root.absolute()
    seeds = _spawn_seeds(root, SEEDS[: max(0, runs)])
    state = StateRoot(root)
    session = state.sessions / SESSION
    journals = {name: _lines(session / name) for name in ("inbox.jsonl", "deliveries.jsonl")}
    instances = {
        seed: str((read_json(state.run(seed).run_json) or {})["run_instance_id"]) for seed in seeds
    }
    added: dict[str, list[bytes]] = {name: [] for name in journals}
    for number in range(max(0, runs - len(seeds))):
        seed = seeds[number % len(seeds)]
        swap = [
            (seed.encode(), f"{seed}-c{number:05d}".encode()),
            (instances[seed].encode(), new_id().encode()),
        ]
        _copy_tree(state.run(seed).dir, state.runs / f"{seed}-c{number:05d}", swap)
        for name, lines in journals.items():  # the copy's follow-up, if the seed had one
            added[name] += [_swapped(line, swap) for line in lines if swap[1][0] in line]
    for name, lines in added.items():
        if lines:
            with open(session / name, "ab") as handle:
                handle.write(b"\n".join(lines) + b"\n")
    list_runs(state)  # writes index.json, as the first `actors ls` would


def _spawn_seeds(root: Path, templates: tuple[str, ...]) -> list[str]:
    """Real runs, each waited to its end and (when one is owed) to its follow-up marker;
    their ids."""
    import actors
    from runtime.core.process import wait_gone
    from runtime.delivery.followups import FOLLOW_STATUSES
    from runtime.delivery.sessions import register_session
    from runtime.store.layout import StateRoot

    saved = os.environ.get("ACTORS_HOME")
    os.environ["ACTORS_HOME"] = str(root)  # the runners deliver follow-ups to this root
    try:
        state = StateRoot(root).verify()
        register_session(state, SESSION, "file", {}, reach=False)
        home = str(root)
        records = [actors.spawn(template=t, session=SESSION, home=home) for t in templates]
        if templates == SEEDS:  # the last one is killed, once its runner has started
            events = state.run(records[-1]["run"]).events
            started = b"run.runner.start"
            _until(lambda: events.exists() and started in events.read_bytes(), "a start")
            actors.kill(records[-1]["run"], session=SESSION, home=home)
        for record in records:
            status = actors.wait(record["run"], timeout=60, home=home)["status"]
            wait_gone([int(record["pid"] or 0)], timeout=60)
            if status in FOLLOW_STATUSES:
                _until(state.run(record["run"]).followup.exists, "a follow-up marker")
        return [record["run"] for record in records]
    finally:
        if saved is None:
            os.environ.pop("ACTORS_HOME", None)
        else:
            os.environ["ACTORS_HOME"] = saved


def _until(check: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.01)


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines() if path.exists() else []


def _swapped(data: bytes, swap: list[tuple[bytes, bytes]]) -> bytes:
    for old, new in swap:
        data = data.replace(old, new)
    return data


def _copy_tree(src: Path, dst: Path, swap: list[tuple[bytes, bytes]]) -> None:
    """Regular files and directories only (0700 / 0600, as the runtime makes them)."""
    os.mkdir(dst, 0o700)
    for entry in os.scandir(src):
        if entry.name in _SKIP or entry.name.startswith("."):
            continue
        if entry.is_dir(follow_symlinks=False):
            _copy_tree(Path(entry.path), dst / entry.name, swap)
        elif entry.is_file(follow_symlinks=False):
            data = _swapped(Path(entry.path).read_bytes(), swap)
            fd = os.open(dst / entry.name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
