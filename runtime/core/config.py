"""Every environment setting actors reads, in one table, and the accessors that read them.

Why one module: the `ACTORS_*` names used to be spelt, parsed and defaulted in a dozen
files, some at import, so a typo in a value surfaced as a ValueError deep in whichever
command happened to parse it first (an internal error, exit 1), and nobody could list
the settings. Here each is a `Setting` record (name, kind, default, meaning, scope);
docs/configuration.md is rendered from the same records (tests/runtime/test_config.py
compares them), and code that sets a name in a child's environment takes it from here.

The accessors read `os.environ` at each call, never at import of this module: tests and
`actors doctor` change the environment within one process. A module that wants a value
fixed for the life of its process (the journal cap, the claim lease, the runner's grace,
the fault points) calls the accessor once at its own import. A bad value raises
`BadInput`, one line naming the variable, what is wrong and the fix; `check()` runs
first in every CLI invocation (but `actors hook`, which must never block its harness),
so a bad setting stops the command before it writes.

Only `os` and runtime.core.errors are imported: every CLI start
loads this module.
"""

from __future__ import annotations

import os

from runtime.core.errors import BadInput

USER = "user setting"
RUN = "run context"
TEST = "test hook"


class Setting:
    """One environment variable: how it is parsed, what unset means, who sets it.

    A plain slotted class, not a NamedTuple: every CLI call builds this table, and a
    NamedTuple class costs ~0.15 ms to create (its `__new__` is compiled from source).
    """

    __slots__ = ("default", "kind", "meaning", "name", "scope")

    def __init__(self, name: str, kind: str, default: str, meaning: str, scope: str) -> None:
        self.name = name
        self.kind = kind
        """`path`, `seconds` (0 to MAX_SECONDS, about 24 days), `bytes` (an integer > 0), `id`,
        `token`, `text`, `names` (comma list) or `flag` (any non-empty value)."""
        self.default = default
        """What unset (or empty) means; parsed for seconds and bytes, `unset` for none."""
        self.meaning = meaning
        self.scope = scope
        """USER: set by whoever runs actors. RUN: set by actors (or a run's own script) in
        a run's processes. TEST: fault hooks for tests/reliability, never set in use."""

    def __repr__(self) -> str:
        return f"Setting({self.name!r})"


HOME = Setting(
    "ACTORS_HOME",
    "path",
    "${XDG_STATE_HOME:-~/.local/state}/actors",
    "The state root: every run, session and inbox lives under it (made absolute).",
    USER,
)
XDG_STATE_HOME = Setting(
    "XDG_STATE_HOME",
    "path",
    "~/.local/state",
    "Where the default state root goes when `ACTORS_HOME` is unset.",
    USER,
)
XDG_CONFIG_HOME = Setting(
    "XDG_CONFIG_HOME",
    "path",
    "~/.config",
    "Your own recipes and tools live in `$XDG_CONFIG_HOME/actors/recipes/`; "
    "`actors install opencode --user` edits `$XDG_CONFIG_HOME/opencode/opencode.json`.",
    USER,
)
SESSION = Setting(
    "ACTORS_SESSION",
    "id",
    "user:<login>",
    "The session you act as (`--session` wins); the SessionStart hooks export it. "
    "Removed from a run's processes, which act through the run token.",
    USER,
)
SSH_CONFIG = Setting(
    "ACTORS_SSH_CONFIG",
    "path",
    "unset",
    "An ssh config file (`ssh -F`) for every connection to a host (`actors host`); unset, "
    "ssh reads your own (~/.ssh/config, your keys and agent).",
    USER,
)
HOST_TIMEOUT = Setting(
    "ACTORS_HOST_TIMEOUT",
    "seconds",
    "60",
    "How long a verb on a remote run that answers at once (`status`, `result`, `inspect`, "
    "`kill`, `cancel`, `tail` without `-f`) waits for the host's answer before it says, in "
    "one line, that the host did not answer (exit 3); `wait` and `tail -f` wait on.",
    USER,
)
JOURNAL_CAP_BYTES = Setting(
    "ACTORS_JOURNAL_CAP_BYTES",
    "bytes",
    "4194304",
    "Size past which an append-only journal (events, outbox, inboxes) is compacted.",
    USER,
)
LOG_CAP_BYTES = Setting(
    "ACTORS_LOG_CAP_BYTES",
    "bytes",
    "67108864",
    "Size at which a run's `stdout.log` / `stderr.log` rotates to one previous file "
    "(`stdout.log.1`), and how much of a command's capture is kept once no later step "
    "reads it (docs/state-files.md).",
    USER,
)
LEASE_S = Setting(
    "ACTORS_LEASE_S",
    "seconds",
    "300",
    "How long a `recv` claim is exclusive while its holder lives.",
    USER,
)
KILL_GRACE = Setting(
    "ACTORS_KILL_GRACE",
    "seconds",
    "5",
    "The runner's wait between SIGTERM and SIGKILL when a run is cancelled or killed.",
    USER,
)
DELIVERY_BUDGET = Setting(
    "ACTORS_DELIVERY_BUDGET",
    "seconds",
    "30",
    "How long a finishing runner keeps retrying its follow-up deliveries.",
    USER,
)
RETRY_BASE = Setting(
    "ACTORS_RETRY_BASE",
    "seconds",
    "0.5",
    "First step of the delivery retry backoff (doubling, capped, with jitter).",
    USER,
)
PROCESSED_TIMEOUT = Setting(
    "ACTORS_PROCESSED_TIMEOUT",
    "seconds",
    "3",
    "How long an adapter watches for the turn a delivery started to finish, unless the "
    "session sets `processed_timeout` (`actors doctor delivery` sets 60 when unset).",
    USER,
)
HOOK_LOCK_WAIT = Setting(
    "ACTORS_HOOK_LOCK_WAIT",
    "seconds",
    "5",
    "How long a hook waits for the session's locks before leaving follow-ups to the "
    "next boundary, or for more of its input on stdin before giving up (exit 0).",
    USER,
)
STOP_WAIT = Setting(
    "ACTORS_STOP_WAIT",
    "seconds",
    "600",
    "How long the Stop hook of a headless `claude -p` holds its finished turn open while "
    "the session's runs are live, to hand their follow-ups to the model (0: never holds).",
    USER,
)
DEBUG = Setting(
    "ACTORS_DEBUG",
    "flag",
    "unset",
    "Show the traceback of an internal error instead of one line.",
    USER,
)
NO_COLOR = Setting(
    "NO_COLOR",
    "flag",
    "unset",
    "Set to anything non-empty to turn colour off (https://no-color.org). Colour is only "
    "ever written to a terminal, never to a pipe or a file, and never with `--json`.",
    USER,
)
RUN_ID = Setting(
    "ACTORS_RUN_ID",
    "id",
    "unset",
    "The run a process belongs to; set by the runner for every command it starts.",
    RUN,
)
RUN_TOKEN = Setting(
    "ACTORS_RUN_TOKEN",
    "token",
    "unset",
    "The run's capability secret, checked against its `token` file before a process "
    "acts as `run:<id>`.",
    RUN,
)
STATE_DIR = Setting(
    "ACTORS_STATE_DIR",
    "path",
    "unset",
    "The run's directory (`$ACTORS_HOME/runs/<id>`), for a run's scripts.",
    RUN,
)
ADDRESS = Setting(
    "ACTORS_ADDRESS",
    "text",
    "unset",
    "The run's address, `run:<id>`.",
    RUN,
)
RUN_INSTANCE = Setting(
    "ACTORS_RUN_INSTANCE",
    "text",
    "unset",
    "The run's instance id (it differs between two runs that reuse one id).",
    RUN,
)
BRANCH = Setting(
    "ACTORS_BRANCH",
    "id",
    "unset",
    "Set by a run's script to `recv` and `emit` as the branch worker `branch:<run>/<b>`.",
    RUN,
)
HARNESS_CAPABILITIES = ("CLAUDE_CODE_MESSAGING_SOCKET", "CLAUDE_CODE_MESSAGING_TOKEN")
"""What a harness exports to the processes it starts that lets them act in its session
(Claude Code's messaging socket and its token: a frame sent there is a user turn). A
spawn from inside the session records them for follow-ups (adapters.claude_code); a
run's own processes never get them: what a run says reaches the session only as a
follow-up, fenced."""

RUNNER_STATE = Setting(
    "ACTORS_RUNNER_STATE", "text", "unset", "A parked runner's own (never set it).", RUN
)
CGROUP = Setting(
    "ACTORS_CGROUP",
    "text",
    "auto",
    "Where each run's cgroup (v2) is made, so `kill` reaches every process it started: "
    "`auto` (under the highest cgroup you own), a cgroup directory you own, or `off` "
    "(process groups and identity proofs only; docs/reliability.md).",
    USER,
)
PORTABLE = Setting(
    "ACTORS_PORTABLE",
    "flag",
    "unset",
    "Use only the portable POSIX paths, as on macOS: no pidfd (SIGCHLD instead), no memfd, "
    "no inotify, no cgroups. CI runs the core tiers once more with it set.",
    USER,
)
PAUSE_AT = Setting(
    "ACTORS_PAUSE_AT",
    "names",
    "unset",
    "Fault points (comma list) where a process reports to the barrier and stops itself.",
    TEST,
)
PAUSE_FIFO = Setting(
    "ACTORS_PAUSE_FIFO",
    "path",
    "unset",
    "The barrier a paused process writes `<pid> <point>` to (a FIFO or a file).",
    TEST,
)
LOCK_BOUND = Setting(
    "ACTORS_LOCK_BOUND",
    "seconds",
    "unset",
    "Longest wait for any state lock, then a one-line failure naming it (the test suite "
    "sets it: a lock held by a process a test paused fails that test, never hangs it).",
    TEST,
)
FAIL_AT = Setting(
    "ACTORS_FAIL_AT",
    "names",
    "unset",
    "Fault points (comma list) that raise ENOSPC every time they are reached.",
    TEST,
)

SETTINGS = (
    HOME,
    XDG_STATE_HOME,
    XDG_CONFIG_HOME,
    SESSION,
    SSH_CONFIG,
    HOST_TIMEOUT,
    JOURNAL_CAP_BYTES,
    LOG_CAP_BYTES,
    LEASE_S,
    KILL_GRACE,
    DELIVERY_BUDGET,
    RETRY_BASE,
    PROCESSED_TIMEOUT,
    HOOK_LOCK_WAIT,
    STOP_WAIT,
    DEBUG,
    NO_COLOR,
    RUN_ID,
    RUN_TOKEN,
    STATE_DIR,
    ADDRESS,
    RUN_INSTANCE,
    BRANCH,
    RUNNER_STATE,
    CGROUP,
    PORTABLE,
    PAUSE_AT,
    PAUSE_FIFO,
    LOCK_BOUND,
    FAIL_AT,
)
"""The table, in the order docs/configuration.md lists it."""


def text(setting: Setting) -> str:
    """The raw value, "" when unset."""
    return os.environ.get(setting.name, "")


def flag(setting: Setting) -> bool:
    """Set to anything non-empty (even `0`): how ACTORS_DEBUG has always been read."""
    return bool(text(setting))


def path(setting: Setting) -> str:
    """A path with `~` expanded; the default when unset or empty, and "" for a setting
    whose default is none (`unset`: never a file named `unset`)."""
    raw = text(setting) or setting.default
    return "" if raw == "unset" and not text(setting) else os.path.expanduser(raw)


def names(setting: Setting) -> frozenset[str]:
    """A comma list, blanks dropped."""
    return frozenset(p.strip() for p in text(setting).split(",") if p.strip())


def _bad(setting: Setting, value: str, problem: str, fix: str) -> BadInput:
    shown = value if len(value) <= 60 else value[:57] + "..."
    return BadInput(f"{setting.name}={shown!r} {problem}", hint=f"{fix} or unset it")


MAX_SECONDS = 2_147_483
"""The longest wait anything takes, in seconds (about 24.8 days): every wait ends in a
poll(2), which takes at most 2**31 - 1 milliseconds; a longer one (or an infinite one)
would fail there, in the middle of a command or a runner, not where it was given."""

SECONDS_RULE = f"a number of seconds from 0 to {MAX_SECONDS} (about 24 days)"
"""How a refusal names the domain of every seconds value, option or setting alike."""


def parse_seconds(raw: str) -> float | None:
    """`raw` as seconds (fractions allowed) within 0..MAX_SECONDS; None when it is not
    (not a number, NaN, infinite, negative or longer): the one rule for every `--timeout`
    and `--grace` and every seconds setting."""
    try:
        value = float(raw)
    except ValueError:
        return None
    return value if 0 <= value <= MAX_SECONDS else None  # NaN fails both comparisons


def seconds(setting: Setting) -> float:
    """A number of seconds within 0..MAX_SECONDS; the default when unset or empty."""
    raw = text(setting)
    value = parse_seconds(raw or setting.default)
    if value is None:
        raise _bad(setting, raw, f"is not {SECONDS_RULE}", f"set it to e.g. {setting.default}")
    return value


def byte_count(setting: Setting) -> int:
    """A whole number of bytes > 0; the default when unset or empty."""
    raw = text(setting)
    try:
        value = int(raw or setting.default)
    except ValueError:
        value = 0
    if value <= 0:
        raise _bad(
            setting,
            raw,
            "is not a positive whole number of bytes",
            f"set it to e.g. {setting.default}",
        )
    return value


def branch() -> str | None:
    """ACTORS_BRANCH, validated: it becomes a path component of the branch inbox."""
    from runtime.core.ids import is_valid_id

    value = text(BRANCH) or None
    if value is not None and not is_valid_id(value):
        raise BadInput(
            f"invalid ACTORS_BRANCH {value[:80]!r}", hint="use a branch id like front or back"
        )
    return value


def run_token() -> str:
    """ACTORS_RUN_TOKEN, "" when unset; a value no token could be (not URL-safe base64
    characters) is refused here, before it is compared with a run's token file. The
    value is never shown: it may be a real token with a stray character."""
    value = text(RUN_TOKEN)
    if value and not (
        value.isascii() and len(value) <= 256 and all(c.isalnum() or c in "-_" for c in value)
    ):
        raise BadInput(
            f"{RUN_TOKEN.name} is not a run token (only letters, digits, '-' and '_')",
            hint="run the command inside the run that was given the token, or unset it",
        )
    return value


def state_root() -> str:
    """The absolute state root: $ACTORS_HOME, else ${XDG_STATE_HOME:-~/.local/state}/actors.

    Not created here, but refused when it (or the nearest part of it that exists) is not
    a directory: every command would otherwise fail on its first mkdir or open."""
    explicit, xdg = text(HOME), text(XDG_STATE_HOME)
    chosen: Setting | None
    if explicit:
        chosen, path = HOME, os.path.expanduser(explicit)
    else:
        chosen = XDG_STATE_HOME if xdg else None
        path = os.path.join(os.path.expanduser(xdg or XDG_STATE_HOME.default), "actors")
    if not os.path.isabs(path):
        path = os.path.join(os.getcwd(), path)
    existing = path
    while not os.path.lexists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        named = f"{chosen.name}={text(chosen)!r}" if chosen else f"the state root {path!r}"
        raise BadInput(
            f"{named}: {existing} is not a directory",
            hint=f"point {(chosen or HOME).name} at a directory (it is created if missing)",
        )
    return path


def check() -> None:
    """Validate every user setting that is set: the CLI calls this before any command,
    so a bad value stops it before anything is written."""
    state_root()
    check_values()


def check_values() -> None:
    """Validate the numbers (timings, the journal cap): `spawn` calls this too, since
    its detached runner reads them from the environment it inherits, where a bad value
    could only fail unseen."""
    for setting in SETTINGS:
        if setting.scope == USER and setting.kind == "seconds":
            seconds(setting)
        elif setting.scope == USER and setting.kind == "bytes":
            byte_count(setting)


def render_markdown() -> str:
    """The table of docs/configuration.md (the test compares the two)."""
    rows = ["| Variable | Type | Default | Meaning | Scope |", "|---|---|---|---|---|"]
    for s in SETTINGS:
        default = s.default if s.default == "unset" else f"`{s.default}`"
        rows.append(f"| `{s.name}` | {s.kind} | {default} | {s.meaning} | {s.scope} |")
    return "\n".join(rows) + "\n"
