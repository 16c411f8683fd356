"""Where state lives: the state root, its sub-directories and each run's files.

The root is `$ACTORS_HOME`, else `${XDG_STATE_HOME:-~/.local/state}/actors`. Run ids are
validated before they become path components, so no id can name anything outside `runs/`.
"""

from __future__ import annotations

from pathlib import Path

from runtime.core import config
from runtime.core.errors import BadInput
from runtime.core.ids import ID_PATTERN, is_valid_id
from runtime.store.safe import register_root
from runtime.store.trust import trusted_dir

RUN_JSON = "run.json"
INBOX = "inbox.jsonl"
DOORBELLS = "doorbells"
"""A directory of wake-up FIFOs; named here because walkers skip it (`inspect --view files`)."""
FIFO_COMMITS = "fifo-commits"
"""Beside an inbox: one empty file per entry a live sender is about to write to the
run's control.fifo (runtime.messaging.mailbox, `commit_fifo`)."""
GUARDIANS = "guardians"
"""Beside an owner's `doorbells/`: the FIFOs of the processes watching the owner's runs
(runtime.runner.guardian), rung when a runner of the owner starts; walkers skip it too."""
FOLLOWERS = "followers"
"""Beside a run's `doorbells/`: the FIFOs of `actors tail -f` readers, rung by the runner
when it has written output or events; walkers skip it too."""
MAIN_ROOM = "main"
"""The name of a run's one room: its directory under `rooms/` and its communication.json entry."""
_STDOUT, _STDERR = "stdout.log", "stderr.log"


def default_root() -> Path:
    """The state root chosen by the environment (not created here; see runtime.core.config)."""
    return Path(config.state_root())


def rotated(log: Path) -> Path:
    """The previous file of a rotated run log (`stdout.log` -> `stdout.log.1`)."""
    return log.with_name(log.name + ".1")


def check_id(value: str, what: str = "run id") -> str:
    """Return `value` if it is a safe id, else raise a BadInput naming the rule."""
    if not is_valid_id(value):
        shown = value if len(value) <= 80 else value[:77] + "..."
        raise BadInput(
            f"invalid {what} {shown!r}",
            hint=f"use 1-64 characters matching {ID_PATTERN} (no '/', no leading '.')",
        )
    return value


def parse_run_ref(ref: str) -> str:
    """`run:ID` or a bare id -> the id (validated)."""
    if ref.startswith("run:"):
        ref = ref[4:]
    elif ":" in ref:
        raise BadInput(f"{ref!r} is not a run address", hint="use run:ID or the bare id")
    return check_id(ref)


class _Place:
    """A directory of the state tree, by its path: the base of the layout records.

    A slotted class rather than a NamedTuple: every command imports this module, and a
    NamedTuple class costs ~0.15 ms to create (its `__new__` is compiled from source).
    Records compare and hash by their path, as a tuple would.
    """

    __slots__ = ("_at",)

    def __init__(self, at: Path) -> None:
        self._at = at

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._at == self._at

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._at))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._at!r})"


class StateRoot(_Place):
    """The directory tree every actors process shares."""

    __slots__ = ()

    def __init__(self, at: Path) -> None:
        super().__init__(at)
        register_root(at)  # nothing under it is reached through a link (runtime.store.safe)

    @property
    def path(self) -> Path:
        return self._at

    @classmethod
    def from_env(cls) -> StateRoot:
        """The root the environment names, checked as trusted (`verify`)."""
        return cls(default_root()).verify()

    def verify(self) -> StateRoot:
        """Refuse a root that is not ours, or whose shared directories someone else could
        have written (StrictModes, as ssh does for ~/.ssh): the root itself (never a
        link, as spawn has always required) and each of its top directories, one stat
        each. Missing ones are fine: we create them 0700. Returns self."""
        trusted_dir(self._at, root=self._at)
        for name in _TOP_DIRS:
            trusted_dir(self._at / name, root=self._at)
        return self

    @property
    def runs(self) -> Path:
        return self.path / "runs"

    @property
    def archive(self) -> Path:
        return self.path / "archive"

    @property
    def preserved(self) -> Path:
        return self.path / "preserved"

    @property
    def sessions(self) -> Path:
        return self.path / "sessions"

    @property
    def tmp(self) -> Path:
        return self.path / "tmp"

    @property
    def cache(self) -> Path:
        return self.path / "cache"

    @property
    def recipe_cache(self) -> Path:
        return self.cache / "recipes"

    @property
    def index_file(self) -> Path:
        return self.path / "index.json"

    @property
    def index_lock(self) -> Path:
        return self.path / ".index.lock"

    @property
    def metrics_cache(self) -> Path:
        return self.cache / "metrics.json"

    @property
    def guardians(self) -> Path:
        """Doorbells of the processes watching every run of the root (`actors watch`),
        rung when any runner starts."""
        return self.path / GUARDIANS

    @property
    def groups(self) -> Path:
        """Named groups with a parallel limit (runtime.runner.slots)."""
        return self.path / "groups"

    def group(self, name: str) -> GroupPaths:
        """A group's files; its name is an id, so it cannot name anything outside."""
        return GroupPaths(self.groups / check_id(name, "group name"))

    @property
    def hosts(self) -> Path:
        """Other machines this root places runs on (runtime.hosts)."""
        return self.path / "hosts"

    def host(self, name: str) -> HostPaths:
        """A host's files; its name is an id, so it cannot name anything outside."""
        paths = HostPaths(self.hosts / check_id(name, "host name"))
        refuse_symlinks(self.hosts, paths.dir, root=self._at)
        return paths

    @property
    def harness_processes(self) -> Path:
        """`<pid>-<start ticks>` -> its session now; `caller.key` (actors.mcp_session)."""
        return self.path / "harness-processes"

    @property
    def installs(self) -> Path:
        """What `actors install` wrote into harness configs, so uninstall removes only that."""
        return self.path / "installs.json"

    @property
    def installs_lock(self) -> Path:
        """Held by one install or uninstall at a time, from reading the configs and
        installs.json to writing them back: two at once would each write back the records
        they read, and one's would be lost."""
        return self.path / ".installs.lock"

    def spawn_stage(self, stage_id: str) -> Path:
        """Where a spawn assembles a run directory before renaming it into `runs/`."""
        return self.tmp / f"spawn-{stage_id}"

    def prune_stage(self, run_id: str, pid: int) -> Path:
        """Where prune moves a run before deleting it (no half run is ever left in runs/)."""
        return self.tmp / f"prune-{run_id}-{pid}"

    def archived(self, run_id: str, stamp: str | None = None) -> Path:
        """A run's place in `archive/`; `stamp` tells apart a second archive of the same id."""
        return self.archive / (run_id if stamp is None else f"{run_id}-{stamp}")

    def run(self, run_id: str) -> RunPaths:
        """A run's paths; refused when the run directory (or runs/) is a planted symlink,
        so no reader or writer is ever led outside the state root through it."""
        paths = RunPaths(self.runs / check_id(run_id))
        refuse_symlinks(self.runs, paths.dir, root=self._at)
        return paths


_TOP_DIRS = ("runs", "sessions", "archive", "preserved", "tmp", "cache")
"""The root's shared directories, checked once whenever the root is opened (`verify`)."""


def refuse_symlinks(*paths: Path, root: Path | None = None) -> None:
    """State directories are never links (one planted there would lead readers and
    writers outside the state root), and are trusted only if ours (`trusted_dir`)."""
    for path in paths:
        trusted_dir(path, root=root)


class _NamedDir(_Place):
    """A directory named after what it holds (`groups/<name>/`, `hosts/<name>/`)."""

    __slots__ = ()

    @property
    def dir(self) -> Path:
        return self._at

    @property
    def name(self) -> str:
        return self._at.name


class GroupPaths(_NamedDir):
    """The files of one group (`groups/<name>/`): its limit, its slots, its queue."""

    __slots__ = ()

    @property
    def record(self) -> Path:
        """`group.json`: {"parallel": N}."""
        return self.dir / "group.json"

    def slot(self, index: int) -> Path:
        """`slot-<i>.lock`: a holder keeps an exclusive flock on it for its life."""
        return self.dir / f"slot-{index}.lock"

    def live(self, index: int) -> Path:
        """`slot-<i>.live`: also flocked by slot i's holder for its life, for watchers
        without a pidfd (a shared lock here never competes with a taker of the slot)."""
        return self.dir / f"slot-{index}.live"

    def holder(self, index: int) -> Path:
        """`slot-<i>.holder`: who holds slot i (its process identity and label)."""
        return self.dir / f"slot-{index}.holder"

    @property
    def queue(self) -> Path:
        """One `<id>.json` per waiter, first come first served by name."""
        return self.dir / "queue"

    @property
    def doorbells(self) -> Path:
        """Rung when a slot is given back, the queue's head leaves or the limit changes."""
        return self.dir / DOORBELLS


class HostPaths(_NamedDir):
    """`hosts/<name>/`: one other machine (runtime.hosts)."""

    __slots__ = ()

    @property
    def record(self) -> Path:
        """What `actors host add` checked: where, which remote actors, its version."""
        return self._at / "host.json"

    @property
    def placements(self) -> Path:
        """One file per run placed on the host: `<run id>.json`, written before the run
        exists there, so a follow-up is accepted only for a run this root placed."""
        return self._at / "runs"

    def placement(self, run_id: str) -> Path:
        return self.placements / f"{check_id(run_id)}.json"

    @property
    def control_socket(self) -> Path:
        """The ssh ControlMaster's socket: the host's one multiplexed connection."""
        return self._at / "ssh.sock"

    @property
    def link_lock(self) -> Path:
        """Held (flock) by the host's one link process (runtime.hosts.link)."""
        return self._at / "link.lock"

    @property
    def link_log(self) -> Path:
        return self._at / "link.log"

    @property
    def doorbells(self) -> Path:
        """Rung when a placement ends here: what a run's command on the host
        (`actors host step`) waits on instead of asking the host."""
        return self._at / "doorbells"

    @property
    def outbox(self) -> Path:
        """Messages to runs on the host, durable here until the host accepted them."""
        return self._at / "outbox.jsonl"

    @property
    def outbox_lock(self) -> Path:
        """Held (flock) by the one process sending the host's outbox."""
        return self._at / "outbox.lock"

    @property
    def placing_lock(self) -> Path:
        """Held (flock) while a run is placed on the host and while `host rm` checks
        nothing is out there and removes it: no run is placed on a removed host."""
        return self._at / "placing.lock"


class RunPaths(_Place):
    """The files of one run's state directory."""

    __slots__ = ()

    @property
    def dir(self) -> Path:
        return self._at

    @property
    def run_id(self) -> str:
        return self.dir.name

    @property
    def run_json(self) -> Path:
        return self.dir / RUN_JSON

    @property
    def progress(self) -> Path:
        return self.dir / "progress.json"

    @property
    def events(self) -> Path:
        return self.dir / "events.jsonl"

    @property
    def inbox(self) -> Path:
        return self.dir / INBOX

    @property
    def wake(self) -> Path:
        return self.dir / "wake.jsonl"

    @property
    def outbox(self) -> Path:
        return self.dir / "outbox.jsonl"

    @property
    def stdout(self) -> Path:
        return self.dir / _STDOUT

    @property
    def stderr(self) -> Path:
        return self.dir / _STDERR

    @property
    def runner_log(self) -> Path:
        return self.dir / "runner.log"

    @property
    def result(self) -> Path:
        return self.dir / "result.json"

    @property
    def followup(self) -> Path:
        """The marker that the run's terminal follow-up is durable (or was not due)."""
        return self.dir / "followup.json"

    @property
    def liveness(self) -> Path:
        """Exclusively flocked by the runner for all its life: a watcher without a pidfd
        learns of its death when a shared lock on it is granted (runtime.core.platform)."""
        return self.dir / ".runner.lock"

    @property
    def stop_request(self) -> Path:
        """`kill` / `cancel`'s intent, written atomically before any signal (no journal
        lock needed), so a watcher that sees the runner die knows the stop was asked for."""
        return self.dir / "stop.json"

    @property
    def fold_lock(self) -> Path:
        """Held by whoever submits the run's terminal follow-up or folds its dead runner
        (runner, reconcile, guardians), so racing watchers submit it once."""
        return self.dir / ".fold.lock"

    @property
    def control_fifo(self) -> Path:
        return self.dir / "control.fifo"

    @property
    def communication(self) -> Path:
        return self.dir / "communication.json"

    @property
    def token(self) -> Path:
        return self.dir / "token"

    @property
    def placed_on_hosts(self) -> Path:
        """Present once a command of the run started a run on a host (`actors host
        step`): the run's end then stops what of those is still out there."""
        return self.dir / "placed-on-hosts"

    @property
    def captures(self) -> Path:
        return self.dir / "captures"

    @property
    def branches(self) -> Path:
        return self.dir / "branches"

    @property
    def doorbells(self) -> Path:
        return self.dir / DOORBELLS

    @property
    def guardians(self) -> Path:
        """Doorbells of the processes watching the runs this run spawned."""
        return self.dir / GUARDIANS

    @property
    def followers(self) -> Path:
        """Doorbells of the readers following this run's output (`tail -f`)."""
        return self.dir / FOLLOWERS

    @property
    def room(self) -> Path:
        """The run's room timeline directory (`room:<run>`)."""
        return self.dir / "rooms" / MAIN_ROOM

    @property
    def room_timeline(self) -> Path:
        return self.room / "messages.jsonl"

    @property
    def room_doorbells(self) -> Path:
        return self.room / DOORBELLS

    def branch_dir(self, branch: str) -> Path:
        return self.branches / branch

    def branch_inbox(self, branch: str) -> Path:
        return self.branch_dir(branch) / INBOX

    def branch_doorbells(self, branch: str) -> Path:
        return self.branch_dir(branch) / DOORBELLS

    def capture(self, command_id: str) -> CapturePaths:
        """One command's own output files (`captures/command-NNN/`)."""
        return CapturePaths(self.captures / command_id)

    def node_output(self, node_id: str) -> Path:
        """The joined output of a parallel group."""
        return self.captures / f"node-{node_id}.out"


class CapturePaths(_Place):
    """The output files of one command, under its run's `captures/`."""

    __slots__ = ()

    @property
    def dir(self) -> Path:
        return self._at

    @property
    def stdout(self) -> Path:
        return self.dir / _STDOUT

    @property
    def stderr(self) -> Path:
        return self.dir / _STDERR

    @property
    def both(self) -> Path:
        """stdout then stderr, for a node whose `output` is `both`."""
        return self.dir / "both.log"

    @property
    def host_step(self) -> Path:
        """A command on a host: its words, the stdin of `actors host step` (0600), so
        none of them is in a command line (runtime.runner.command.on_host)."""
        return self.dir / "host-step.json"


class SessionPaths(_Place):
    """The files of one coordinator session's directory (`sessions/<key>/`)."""

    __slots__ = ()

    @property
    def dir(self) -> Path:
        return self._at

    @property
    def record(self) -> Path:
        return self.dir / "session.json"

    @property
    def inbox(self) -> Path:
        return self.dir / INBOX

    @property
    def inbox_lock(self) -> Path:
        """Held while appending to or draining the inbox (one copy per delivery id)."""
        return self.dir / ".inbox.lock"

    @property
    def deliver_lock(self) -> Path:
        """Held by the one process working the session's deliveries."""
        return self.dir / ".deliver.lock"

    @property
    def record_lock(self) -> Path:
        """Held around each read-modify-write of session.json (runtime.delivery.sessions
        `update_session`); the innermost lock: taken after `.deliver.lock` and
        `.inbox.lock`, never before them."""
        return self.dir / ".session.lock"

    @property
    def deliveries(self) -> Path:
        return self.dir / "deliveries.jsonl"

    @property
    def wake(self) -> Path:
        return self.dir / "wake"

    @property
    def wakes(self) -> Path:
        """Rings a harness hook recorded (the Claude Code FileChanged hook)."""
        return self.dir / "wakes.jsonl"

    @property
    def stop_blocks(self) -> Path:
        """How many times in a row the Stop hook of a headless Claude continued its turn."""
        return self.dir / "stop_blocks"

    @property
    def doorbells(self) -> Path:
        return self.dir / DOORBELLS

    @property
    def guardians(self) -> Path:
        """Doorbells of the processes watching the session's runs."""
        return self.dir / GUARDIANS

    @property
    def bodies(self) -> Path:
        return self.dir / "bodies"

    def body(self, delivery_id: str) -> Path:
        """An envelope as Markdown, for adapters that point the harness at a file. The
        id becomes a file name, so one that could name another place (a `/`, a leading
        `.`, a control character: a host's forged key) is refused."""
        if (
            not delivery_id
            or len(delivery_id) > 200
            or delivery_id.startswith(".")
            or any(c in delivery_id for c in "/\\")
            or not delivery_id.isprintable()
        ):
            raise BadInput(
                f"invalid delivery id {delivery_id[:80]!r}",
                hint="a delivery id is a file name: no '/', no leading '.', printable",
            )
        return self.bodies / f"{delivery_id}.md"

    @property
    def gemini_chain(self) -> Path:
        return self.dir / "gemini-chain.json"


def session_key(owner: str) -> str:
    """Directory name for an owner id (`user:alice` -> `user-alice`)."""
    key = owner.replace(":", "-", 1) if owner.startswith(("user:", "run:")) else owner
    if not is_valid_id(key):
        raise BadInput(f"invalid session id {owner!r}", hint="use letters, digits, '._-'")
    return key


def session_paths(root: StateRoot, owner: str) -> SessionPaths:
    """A session's paths; refused when its directory (or sessions/) is a planted symlink."""
    paths = SessionPaths(root.sessions / session_key(owner))
    refuse_symlinks(root.sessions, paths.dir, root=root.path)
    return paths
