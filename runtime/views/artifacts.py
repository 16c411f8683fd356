"""The artifact manifest of a finished run: each named path with exists / size / sha256."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def manifest(artifacts: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name, spec in artifacts.items():
        path = Path(spec["path"])
        entry = {**spec, "exists": path.exists()}
        if path.is_file():
            entry.update(size=path.stat().st_size, sha256=_sha256(path))
        elif path.is_dir():
            entry.update(size=None, sha256=None, is_dir=True)
        out[name] = entry
    return out


def missing_required(entries: dict[str, dict[str, Any]]) -> list[str]:
    return [name for name, e in entries.items() if e.get("required") and not e["exists"]]
