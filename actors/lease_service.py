"""The `leases` recipe's program (`python3 -P -m actors.lease_service`): a long-lived run that hands out expiring leases on paths, so swarm
workers do not edit the same files at once.

Requests are typed messages to the run (`lease.acquire`, `lease.renew`, `lease.release`,
body `{"paths": [...], "ttl": SECONDS}`, or `"path"` for one). The holder is the
message's `from`, which the runtime authenticates (a run token, a session), so no client
can take over, renew or release another's lease by naming it. A path conflicts with a
lease on the same path or on a directory above or below it (`src` covers `src/a.py`). An
acquire is all or nothing; the same holder acquiring again renews.

Every decision (`lease.granted`, `lease.denied`, `lease.released`, `lease.expired`) is
posted to the run's room (`room:<run>`, the audit timeline anyone may read) and, when the
requester is a run or a branch actor, to its inbox, where it waits with
`actors recv --type lease.granted --type lease.denied`. A lease ends at its expiry
without any message from its holder: the service wakes at the earliest expiry (its
`recv` timeout), drops the lease and says `lease.expired`. The table is rewritten
atomically to `<state_dir>/leases/leases.json` after every change, before the answer
is sent (the `leases` artifact).
"""

from __future__ import annotations

import json
import os
import posixpath
import sys
import time
from pathlib import Path
from typing import Any

import actors  # its public API: this program is a client of actors like any other

REQUESTS = ("lease.acquire", "lease.renew", "lease.release")
MAX_TTL = 24 * 3600.0


class Refusal(Exception):
    """A request that cannot be read; answered with lease.denied and its reason."""


def normalise(path: object) -> str:
    """One spelling per path: `./src//a.py` and `src/a.py` are the same lease, and so
    are `/lib/`, `//lib` and `/src/../lib` (POSIX keeps a leading `//` as it is; it
    names the same directory here)."""
    if not isinstance(path, str) or not path.strip() or "\0" in path:
        raise Refusal(f"a path must be non-empty text, got {json.dumps(path)}")
    clean = posixpath.normpath(path.strip())
    if clean.startswith("//"):
        clean = "/" + clean.lstrip("/")
    if clean.startswith("../") or clean == "..":
        raise Refusal(f"path {path!r} leaves the tree; use paths inside the repository")
    return clean


def overlaps(a: str, b: str) -> bool:
    """Same path, or one is a directory above the other (`.` is the whole tree, `/` every
    absolute path)."""
    return a == b or "." in (a, b) or _below(a, b) or _below(b, a)


def _below(path: str, top: str) -> bool:
    """`path` lies under the directory `top` (both normalised)."""
    return path.startswith(top if top.endswith("/") else top + "/")


class Leases:
    def __init__(self, table_file: Path, default_ttl: float) -> None:
        self.file = table_file
        self.default_ttl = default_ttl
        self.table: dict[str, dict[str, Any]] = {}  # path -> {holder, expires, granted}

    def request(self, body: Any) -> tuple[list[str], float]:
        if isinstance(body, str):  # `actors message run:L lease.acquire src/a.py`
            body = {"path": body}
        if not isinstance(body, dict):
            raise Refusal('the body must be {"paths": [...], "ttl": SECONDS}')
        given = body.get("paths", [body["path"]] if "path" in body else None)
        if not isinstance(given, list) or not given:
            raise Refusal('name the paths: {"paths": ["src/a.py"]} or {"path": "src/a.py"}')
        ttl = body.get("ttl", self.default_ttl)
        if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not 0 < ttl <= MAX_TTL:
            raise Refusal(f"ttl must be seconds in (0, {MAX_TTL:g}], got {json.dumps(ttl)}")
        return sorted({normalise(p) for p in given}), float(ttl)

    def acquire(self, holder: str, paths: list[str], ttl: float, *, renew: bool) -> dict[str, Any]:
        now = time.time()
        conflicts = [
            {"path": path, "held": held, "holder": lease["holder"], "expires": lease["expires"]}
            for path in paths
            for held, lease in self.table.items()
            if overlaps(path, held) and lease["holder"] != holder
        ]
        missing = [p for p in paths if renew and self.table.get(p, {}).get("holder") != holder]
        if conflicts or missing:
            reason = "held by another holder" if conflicts else "not held by you (acquire it first)"
            return {"ok": False, "paths": paths, "reason": reason, "conflicts": conflicts}
        for path in paths:
            granted = self.table.get(path, {}).get("granted", now)
            self.table[path] = {"holder": holder, "expires": now + ttl, "granted": granted}
        return {"ok": True, "paths": paths, "ttl": ttl, "expires": now + ttl}

    def release(self, holder: str, paths: list[str]) -> dict[str, Any]:
        mine = [p for p in paths if self.table.get(p, {}).get("holder") == holder]
        for path in mine:
            del self.table[path]
        return {"paths": mine, "not_held": [p for p in paths if p not in mine]}

    def expire(self) -> dict[str, list[str]]:
        """Drop every lease past its expiry; the paths each holder lost."""
        now = time.time()
        lost: dict[str, list[str]] = {}
        for path, lease in list(self.table.items()):
            if lease["expires"] <= now:
                lost.setdefault(lease["holder"], []).append(path)
                del self.table[path]
        return lost

    def next_expiry(self) -> float | None:
        if not self.table:
            return None
        soonest = min(float(lease["expires"]) for lease in self.table.values())
        return max(0.0, soonest - time.time())

    def save(self) -> None:
        """Whole-file replace through a private temporary file (0600, never a symlink)."""
        text = json.dumps({"leases": self.table}, indent=2, sort_keys=True) + "\n"
        temporary = self.file.with_name(f".{self.file.name}.{os.getpid()}.tmp")
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
        with os.fdopen(os.open(temporary, flags, 0o600), "w") as out:
            out.write(text)
        os.replace(temporary, self.file)


def tell(kind: str, holder: str, body: dict[str, Any], summary: str) -> None:
    """Post the decision to the room, and to the holder's inbox when it has one."""
    body = {**body, "holder": holder}
    actors.emit(kind, body, to="room", summary=summary)
    if holder.startswith(("run:", "branch:")):
        try:
            actors.message(holder, kind, body, summary=summary, force=True)
        except Exception as exc:  # a finished or pruned client: the room still has it
            print(f"leases: cannot reply to {holder}: {exc}", file=sys.stderr, flush=True)


def handle(leases: Leases, envelope: Any) -> None:
    kind, holder = envelope["type"], envelope["from"]
    request = envelope.get("id")
    try:
        paths, ttl = leases.request(envelope.get("body"))
    except Refusal as exc:
        tell(
            "lease.denied", holder, {"ok": False, "reason": str(exc), "request": request}, str(exc)
        )
        return
    if kind == "lease.release":
        done = leases.release(holder, paths)
        leases.save()  # the table first: whoever reads an answer finds it there
        tell(
            "lease.released",
            holder,
            {**done, "request": request},
            f"released {len(done['paths'])} path(s)",
        )
        return
    decision = leases.acquire(holder, paths, ttl, renew=kind == "lease.renew")
    leases.save()
    decision["request"] = request
    if decision["ok"]:
        tell("lease.granted", holder, decision, f"{holder} holds {', '.join(paths)} for {ttl:g}s")
    else:
        who = ", ".join(sorted({c["holder"] for c in decision["conflicts"]})) or holder
        tell("lease.denied", holder, decision, f"{', '.join(paths)}: {decision['reason']} ({who})")


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m actors.lease_service STATE_DIR DEFAULT_TTL_SECONDS", file=sys.stderr)
        return 2
    try:
        default_ttl = float(argv[1])
    except ValueError:
        default_ttl = -1.0
    if not 0 < default_ttl <= MAX_TTL:
        print(f"leases: ttl must be seconds in (0, {MAX_TTL:g}], got {argv[1]!r}", file=sys.stderr)
        return 2
    directory = Path(argv[0]) / "leases"
    directory.mkdir(mode=0o700, exist_ok=True)
    leases = Leases(directory / "leases.json", default_ttl)
    leases.save()
    while True:
        envelope = actors.recv(REQUESTS, timeout=leases.next_expiry())
        lost = leases.expire()
        if lost:
            leases.save()
        for holder, paths in lost.items():
            tell(
                "lease.expired",
                holder,
                {"paths": paths},
                f"{holder} lost {', '.join(paths)}: expired",
            )
        if envelope is not None:
            handle(leases, envelope)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
