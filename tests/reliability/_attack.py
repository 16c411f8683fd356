"""Helpers shared by the test_attack_* files (issue 17, hardening).

Only the CLI, the public API and plain files: internal modules are being renamed.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.conftest import cli, make_fifo, read_fifo_line, write_recipe

NOBODY = 65534


def gated_run(tmp_path: Path, name: str, script: str, **spawn: Any) -> tuple[dict[str, Any], Path]:
    """A live run whose command says `ready` on a FIFO, then blocks until the test writes
    a line into its `go` FIFO, then runs `script` (sh). Returns (spawned, go FIFO)."""
    import actors

    ready = make_fifo(tmp_path / f"{name}.ready")
    go = make_fifo(tmp_path / f"{name}.go")
    recipe = write_recipe(
        tmp_path,
        name,
        {
            "mailbox": {"accepts": ["job.go"]},
            "template": 'sh -c \'echo ready > "$1"; read x < "$2"; ' + script + "' g {r} {g}",
        },
    )
    spawned = actors.spawn(str(recipe), values={"r": str(ready), "g": str(go)}, **spawn)
    assert read_fifo_line(ready) == "ready"
    return spawned, go


def release(go: Path) -> None:
    """Let a gated run go on (blocks until its command opens the FIFO)."""
    fd = os.open(go, os.O_WRONLY)
    try:
        os.write(fd, b"go\n")
    finally:
        os.close(fd)


class Canary:
    """A file and a directory outside the state root, with known content, mode and mtime:
    whatever a followed symlink would read, write, truncate, chmod or delete."""

    def __init__(self, base: Path) -> None:
        self.dir = base / "canary-dir"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.file = base / "canary-file"
        self.file.write_bytes(b"CANARY-CONTENT\n")
        os.chmod(self.file, 0o644)
        os.chmod(self.dir, 0o755)
        inner = self.dir / "inner.json"
        inner.write_text('{"canary": true}\n')
        os.chmod(inner, 0o644)
        old = time.time() - 40 * 86400  # 40 days old: what a sweep would delete
        for path in (inner, self.file):
            os.utime(path, (old, old))
        self.before = self.state()

    def state(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for path in [self.file, self.dir, *sorted(self.dir.rglob("*"))]:
            try:
                st = path.lstat()
            except FileNotFoundError:
                out[str(path)] = "missing"
                continue
            content = path.read_bytes() if stat.S_ISREG(st.st_mode) else None
            out[str(path)] = (stat.S_IMODE(st.st_mode), int(st.st_mtime), content)
        return out

    def untouched(self) -> bool:
        return self.state() == self.before

    def diff(self) -> dict[str, Any]:
        now = self.state()
        keys = set(now) | set(self.before)
        return {
            k: (self.before.get(k), now.get(k)) for k in keys if self.before.get(k) != now.get(k)
        }


def plant(link: Path, target: Path) -> None:
    """Replace whatever is at `link` by a symlink to `target`."""
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.is_file() or link.is_fifo():
        link.unlink()
    elif link.is_dir():
        import shutil

        shutil.rmtree(link)
    os.symlink(target, link)


def clean_or_refused(args: list[str], proc: subprocess.CompletedProcess[str]) -> str | None:
    """None when the command exited 0 or refused cleanly (exit 2, one `actors:` line, no
    traceback); else a description of what went wrong."""
    text = f"actors {' '.join(args)} -> {proc.returncode}\nstdout={proc.stdout[-400:]!r}\nstderr={proc.stderr[-800:]!r}"
    if "Traceback" in proc.stderr or "internal error" in proc.stderr:
        return text
    if proc.returncode == 0:
        return None
    if proc.returncode == 2:
        lines = proc.stderr.strip().splitlines()
        if len(lines) == 1 and lines[0].startswith("actors: "):
            return None
    return text


def rss_kb(pid: int, field: str = "VmHWM") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise LookupError(field)


def run_json(root: Path, run_id: str) -> dict[str, Any]:
    return json.loads((root / "runs" / run_id / "run.json").read_text())


def python_cli(*args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    return cli(*args, **kw)


PY = sys.executable


def wrong_modes(root: Path) -> dict[str, str]:
    """Every file not 0600 and directory not 0700 under `root` (links aside), with its mode."""
    wrong = {}
    for path in [root, *root.rglob("*")]:
        st = path.lstat()
        if stat.S_ISLNK(st.st_mode):
            continue
        want = 0o700 if stat.S_ISDIR(st.st_mode) else 0o600
        if stat.S_IMODE(st.st_mode) != want:
            wrong[str(path.relative_to(root))] = oct(stat.S_IMODE(st.st_mode))
    return wrong
