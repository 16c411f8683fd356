"""The operator's numbers, as typed records: runs by status, spawn and follow-up latency,
delivery receipts, inbox backlogs (what `/metrics` and `actors metrics` print; the text
format is actors.dashboard.metrics's job).

It has to stay cheap with 10,000 runs, so each fact comes from the cheapest file that
holds it:
- statuses and recipes from the run index (`list_runs`: one stat per finished run, no
  run.json read);
- spawn latency (run.json's `created_at` -> the runner's own `run.runner.start` event)
  from the head of each run's events.jsonl. A finished run's head never changes, so it
  is kept in cache/metrics.json (a rebuildable cache, as index.json is) and read once;
- follow-up latency (result.json's `ended_at`, cached by the index -> the first
  `delivered` or `accepted` receipt of the delivery `<run instance>:terminal`), receipts
  and pending deliveries from each session's deliveries.jsonl, and unread follow-ups from
  its inbox.jsonl: those lines are the facts themselves. Their fold is kept for the
  process, so a long-lived dashboard reads only the lines appended since its last scrape;
- unclaimed messages from the inboxes of live runs and their branches. A finished run's
  inbox is not a backlog: nobody will ever claim what waits there.
A run whose files are damaged is counted as `damaged` and gives no samples; it never
stops the tally.
"""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runtime.core.bounded_json import Undecodable, decode
from runtime.core.errors import ActorsError
from runtime.core.ids import is_valid_id, parse_iso
from runtime.store import safe
from runtime.store.layout import RunPaths, SessionPaths, StateRoot
from runtime.store.reads import read_bytes, read_json, read_jsonl
from runtime.store.writes import ensure_dir, write_json_atomic
from runtime.views.counts import FINAL_COUNTS
from runtime.views.status import ACTIVE, TERMINAL

if TYPE_CHECKING:
    from runtime.store.records import ListedRun

STATUSES = (*ACTIVE, *TERMINAL, "damaged")
"""Every status a run is counted under (`damaged`: its run.json cannot be read)."""
RECIPES_SHOWN = 20
"""The most recipes counted by name; the rest are counted together as `(other)`, so the
number of series stays bounded however many ad-hoc recipe files are run."""
OTHER_RECIPE, TEMPLATE_RECIPE = "(other)", "(template)"
"""Labels no library recipe can take (its name is an id); a recipe file named so is
counted with them."""
HEAD_BYTES = 4096
"""How much of events.jsonl holds the runner's start event (its first or second line)."""
DELIVERED = ("delivered", "accepted")
"""Receipt states that end a follow-up's trip (runtime.delivery.engine.FINAL, minus the
final failure)."""
_FINAL = (*DELIVERED, "failed-final", "moved")
_START = b'"run.runner.start"'
CACHE_VERSION = 1
HEAD_PROBE = 256
"""The first bytes of a session journal that tell it from one made again in its place."""


@dataclass
class Backlog:
    """Waiting messages of one kind of inbox: the total, the fullest inbox, how many."""

    waiting: int = 0
    fullest: int = 0
    inboxes: int = 0

    def add(self, count: int) -> None:
        self.waiting += count
        self.fullest = max(self.fullest, count)
        self.inboxes += 1


@dataclass
class Tally:
    """Everything `/metrics` reports, gathered in one pass over the state root."""

    runs: Counter[str] = field(default_factory=Counter)
    """Status -> runs."""
    by_recipe: Counter[tuple[str, str]] = field(default_factory=Counter)
    """(recipe, status) -> runs, at most RECIPES_SHOWN recipes plus `(other)`."""
    spawn_s: list[float] = field(default_factory=list)
    """Seconds from spawn requested to runner started, one per run that started."""
    followup_s: dict[str, list[float]] = field(default_factory=dict)
    """Harness -> seconds from run end to its terminal follow-up delivered."""
    receipts: Counter[tuple[str, str]] = field(default_factory=Counter)
    """(receipt status, harness) -> receipts journaled."""
    pending_deliveries: int = 0
    """Deliveries not yet delivered, accepted or finally failed, over all sessions."""
    backlogs: dict[str, Backlog] = field(default_factory=dict)
    """Inbox kind (`session`, `run`, `branch`) -> what waits there."""
    steps: Counter[str] = field(default_factory=Counter)
    """Counter (`completed`, `failed`, `timed_out`, `cancelled`, `attempts`, `retries`:
    runtime.views.counts) -> its sum over the finished runs, from their listing."""


@dataclass(frozen=True)
class _Head:
    """What a run's events.jsonl head says: which start of the run, when it was ready."""

    instance: str | None
    spawn_s: float | None


def gather(root: StateRoot) -> Tally:
    """One tally of the state root. A damaged file is skipped, never raised; the only
    writes are the caches (index.json, cache/metrics.json). One gather at a time per
    process: a server may call it from worker threads, and the session folds are shared."""
    with _GATHERING:
        return _gather(root)


def _gather(root: StateRoot) -> Tally:
    from runtime.views.index import list_runs

    tally = Tally(backlogs={kind: Backlog() for kind in ("session", "run", "branch")})
    listed = list_runs(root)
    heads = _Heads(root)
    ended: dict[str, float] = {}
    for run in listed:
        status = run["status"] or "damaged"
        tally.runs[status] += 1
        head = heads.of(run, status)
        if head.spawn_s is not None:
            tally.spawn_s.append(head.spawn_s)
        end = _epoch(run["ended_at"])
        if head.instance and end is not None:
            ended[f"{head.instance}:terminal"] = end
        if status in ACTIVE:
            _run_backlog(RunPaths(root.runs / run["run"]), tally)
        for key in FINAL_COUNTS:
            tally.steps[key] += run.get(key) or 0  # type: ignore[operator]
    heads.save()
    tally.by_recipe = _by_recipe(listed)
    names = [name for name in safe.subdirs(root.sessions) if is_valid_id(name)]
    for name in names:
        _session(SessionPaths(root.sessions / name), ended, tally)
    for gone in set(_SESSIONS) - {str(root.sessions / name) for name in names}:
        if gone.startswith(f"{root.sessions}/"):
            del _SESSIONS[gone]  # a forgotten session's fold
    return tally


def _by_recipe(listed: list[ListedRun]) -> Counter[tuple[str, str]]:
    def label(run: ListedRun) -> str:
        if run["recipe"]:
            return run["recipe"]
        return f"tool:{run['tool']}" if run["tool"] else TEMPLATE_RECIPE

    labels = [label(run) for run in listed]
    shown = {name for name, _ in Counter(labels).most_common(RECIPES_SHOWN)}
    return Counter(
        (name if name in shown else OTHER_RECIPE, run["status"] or "damaged")
        for name, run in zip(labels, listed, strict=True)
    )


class _Heads:
    """Finished runs' heads, kept in cache/metrics.json (rebuildable, as index.json is):
    a scrape reads the events of the runs it has not yet seen finished, and of live ones.
    Keyed by run id and checked against `created_at`, so a new run reusing an archived
    run's id is read afresh. Writing it is best-effort."""

    def __init__(self, root: StateRoot) -> None:
        self.root = root
        try:
            found = read_json(root.metrics_cache)
        except ActorsError:
            found = None
        if not isinstance(found, dict) or found.get("version") != CACHE_VERSION:
            found = {}
        runs = found.get("runs")
        self.known: dict[str, Any] = runs if isinstance(runs, dict) else {}
        self.fresh: dict[str, list[Any]] = {}

    def of(self, run: ListedRun, status: str) -> _Head:
        created = run["created_at"] or ""
        entry = self.known.get(run["run"])
        if entry is not None and _usable(entry, created):
            head = _Head(entry[1], entry[2])
        else:
            head = _read_head(Path(run["state_dir"]), created)
        if status in TERMINAL:  # nothing in its head can change any more
            self.fresh[run["run"]] = [created, head.instance, head.spawn_s]
        return head

    def save(self) -> None:
        if self.fresh == self.known:
            return
        with contextlib.suppress(ActorsError, OSError):  # the next scrape reads them again
            ensure_dir(self.root.cache)
            data = {"version": CACHE_VERSION, "runs": self.fresh}
            write_json_atomic(self.root.metrics_cache, data, fsync=False)


def _usable(entry: Any, created: str) -> bool:
    """A cached head of the shape `_Heads` writes, for this very run."""
    if not isinstance(entry, list) or len(entry) != 3 or entry[0] != created:
        return False
    spawn_s = entry[2]
    number = isinstance(spawn_s, int | float) and not isinstance(spawn_s, bool)
    return isinstance(entry[1], str | None) and (spawn_s is None or number)


def _read_head(run_dir: Path, created: str) -> _Head:
    """The run's instance and spawn latency, from the head of its events.jsonl."""
    instance, ready = None, None
    try:
        data = read_bytes(RunPaths(run_dir).events, limit=HEAD_BYTES)
    except (ActorsError, OSError):
        data = b""
    for number, line in enumerate(data.split(b"\n")[:-1]):  # whole lines only
        if number and _START not in line:
            continue  # parsed: the first line (its instance) and the start event's
        try:
            record = decode(line)
        except Undecodable:
            continue
        if not isinstance(record, dict):
            continue
        if instance is None and isinstance(record.get("run_instance_id"), str):
            instance = record["run_instance_id"]
        if record.get("event") == "run.runner.start":
            ready = _epoch(record.get("ts"))
            break
    start = _epoch(created)
    spawn_s = max(0.0, ready - start) if ready is not None and start is not None else None
    return _Head(instance, spawn_s)


def _epoch(value: object) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return parse_iso(value)
    except ValueError:
        return None


def _run_backlog(paths: RunPaths, tally: Tally) -> None:
    """Unclaimed messages in a live run's inbox and in each of its branches' inboxes."""
    from runtime.messaging.boxes import branch_mailbox, run_mailbox

    try:
        tally.backlogs["run"].add(_queued(run_mailbox(paths).entries()))
        for branch in safe.subdirs(paths.branches):
            if paths.branch_inbox(branch).exists():
                tally.backlogs["branch"].add(_queued(branch_mailbox(paths, branch).entries()))
    except (ActorsError, OSError):
        pass  # a run that ended or was archived meanwhile, or a damaged inbox


def _queued(entries: list[Any]) -> int:
    return sum(1 for entry in entries if entry.get("state") == "queued")


def _session(paths: SessionPaths, ended: dict[str, float], tally: Tally) -> None:
    """Receipts, pending deliveries, follow-up latency and unread follow-ups of a session."""
    journals = _SESSIONS.setdefault(str(paths.dir), _SessionFold(paths))
    try:
        journals.refresh()
    except (ActorsError, OSError):
        return  # unreadable now: left out of this scrape
    tally.receipts.update(journals.receipts)
    for ident, (at, harness) in journals.delivered.items():
        if ident in ended:
            tally.followup_s.setdefault(harness, []).append(max(0.0, at - ended[ident]))
    tally.pending_deliveries += sum(1 for now in journals.states.values() if now not in _FINAL)
    tally.backlogs["session"].add(sum(1 for now in journals.unread.values() if now == "unread"))


class _SessionFold:
    """A session's deliveries.jsonl and inbox.jsonl folded as far as read. Kept for the
    process: a scrape reads only the lines appended since the last one (a journal
    replaced since is read again from its start), so a long-lived dashboard pays for new
    deliveries only."""

    def __init__(self, paths: SessionPaths) -> None:
        self.paths = paths
        self.read_to: dict[Path, tuple[int, tuple[int, int] | None, bytes]] = {}
        self.receipts: Counter[tuple[str, str]] = Counter()
        """(status, harness) -> receipt lines."""
        self.states: dict[str, str] = {}
        """Delivery id -> its latest state."""
        self.delivered: dict[str, tuple[float, str]] = {}
        """Delivery id -> when and through which harness it was first delivered."""
        self.unread: dict[str, str] = {}
        """Inbox entry id -> its state (`unread`, `read`)."""

    def _new_lines(self, path: Path) -> tuple[list[dict[str, Any]], bool]:
        """Records appended since the last call, and whether the fold must start over: the
        journal was compacted (read_jsonl's identity) or deleted and made again, which
        may reuse the inode number, so its first bytes are compared too."""
        offset, identity, head = self.read_to.get(path, (0, None, b""))
        try:
            first = read_bytes(path, limit=HEAD_PROBE)
        except FileNotFoundError:
            first = b""
        again = not first.startswith(head)  # not the journal read last time
        if again:
            offset, identity = 0, None
        chunk = read_jsonl(path, offset=offset, identity=identity)
        self.read_to[path] = (chunk.next_offset, chunk.identity, first)
        return chunk.records, chunk.reset or again

    def refresh(self) -> None:
        records, reset = self._new_lines(self.paths.deliveries)
        if reset:
            self.receipts, self.states, self.delivered = Counter(), {}, {}
        for record in records:
            ident, harness, status = record.get("id"), record.get("harness"), record.get("status")
            now = record.get("state")
            if not isinstance(ident, str) or not isinstance(now, str):
                continue
            if isinstance(harness, str) and isinstance(status, str):
                self.receipts[(status, harness)] += 1
                at = _epoch(record.get("ts"))
                if now in DELIVERED and ident not in self.delivered and at is not None:
                    self.delivered[ident] = (at, harness)
            self.states[ident] = now
        records, reset = self._new_lines(self.paths.inbox)
        if reset:
            self.unread = {}
        for record in records:  # the fold of SessionInbox.entries, kept up to date
            ident, now = record.get("id"), record.get("state")
            if not isinstance(ident, str) or not isinstance(now, str):
                continue
            if isinstance(record.get("envelope"), dict) or ident in self.unread:
                self.unread[ident] = now


_SESSIONS: dict[str, _SessionFold] = {}
"""Session directory -> its journals' fold, kept for the process."""
_GATHERING = threading.Lock()
