"""The CLI's command table: each verb once, with where its click command lives, its line
in `actors --help` and, for the hot verbs, how the hand parser reads their plain calls.

The lazy click group (actors.cli._lazy) takes its command map and summaries from here,
and the hand parser (actors.cli._fast) its option specs, so adding a verb is one row.
Click itself is not imported: the hand-parsed path reads this table on every call. What
cannot be derived from it without importing click (the click decorators themselves) is
held equal to it by tests/actors/test_command_table.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

_NONE: Mapping[str, str] = MappingProxyType({})


class FastSpec:
    """How actors.cli._fast reads a plain call of one command, and what it then runs.

    The names are the click parameters' names: the parsed values are handed to `body`
    as keywords, the same keywords its click command passes. A plain slotted class, not
    a NamedTuple: the hand-parsed path builds this table on every call, and a NamedTuple
    class costs ~0.15 ms to create.
    """

    __slots__ = (
        "body",
        "choices",
        "click_only",
        "defaults",
        "flags",
        "multiple",
        "options",
        "positionals",
        "required",
        "seconds",
    )

    def __init__(
        self,
        body: str,
        positionals: tuple[str, ...] = (),
        required: int = 0,
        flags: Mapping[str, str] = _NONE,
        options: Mapping[str, str] = _NONE,
        multiple: tuple[str, ...] = (),
        choices: Mapping[str, tuple[str, ...]] = MappingProxyType({}),
        defaults: Mapping[str, str] = _NONE,
        seconds: tuple[str, ...] = (),
        click_only: tuple[str, ...] = (),
    ) -> None:
        self.body = body
        """"module:attr" of the click-free function both paths call."""
        self.positionals = positionals
        self.required = required
        """How many of `positionals` must be given."""
        self.flags = flags
        """Option string -> name, for options that take no value."""
        self.options = options
        """Option string -> name, for options that take one value."""
        self.multiple = multiple
        """Names of options that may repeat (collected in a list)."""
        self.choices = choices
        self.defaults = defaults
        """Name -> value when the option is absent (click's default)."""
        self.seconds = seconds
        """Names of options click reads as seconds (actors.cli._options.SECONDS; the same
        rule in _fast._seconds)."""
        self.click_only = click_only
        """Option strings the hand parser leaves to click on purpose."""


class Command:
    """One top-level `actors` verb."""

    __slots__ = ("fast", "name", "summary", "target")

    def __init__(self, name: str, target: str, summary: str, fast: FastSpec | None = None) -> None:
        self.name = name
        self.target = target
        """"module:attr" of the click command, imported only when the verb is run."""
        self.summary = summary
        """Its line in `actors --help` (and the click command's short help)."""
        self.fast = fast
        """Set for the verbs the hand parser serves without click."""

    def __repr__(self) -> str:
        return f"Command({self.name!r})"


MESSAGE_ARGS = FastSpec(
    body="actors.cli._messaging:message",
    positionals=("address", "type", "body"),
    required=2,
    flags={
        "--body-json": "body_json",
        "--force": "force",
        "--no-fsync": "no_fsync",
        "--json": "as_json",
    },
    options={"--summary": "summary", "--reply-to": "reply_to", "--session": "session"},
)

EMIT_ARGS = FastSpec(
    body="actors.cli._messaging:emit",
    positionals=("type", "body"),
    required=1,
    flags={"--body-json": "body_json", "--print": "show", "--json": "as_json"},
    options={"--to": "to", "--summary": "summary", "--level": "level", "--deliver": "delivery"},
    choices={"level": ("info", "warning", "error"), "delivery": ("log", "notify", "followup")},
    defaults={"to": "coordinator", "level": "info", "delivery": "log"},
)

KILL_ARGS = FastSpec(
    body="actors.cli._lifecycle:kill",
    positionals=("run",),
    required=1,
    flags={"--force": "force", "--json": "as_json"},
    options={"--session": "session"},
)

CANCEL_ARGS = FastSpec(
    body="actors.cli._lifecycle:cancel",
    positionals=KILL_ARGS.positionals,
    required=KILL_ARGS.required,
    flags=KILL_ARGS.flags,
    options={"--session": "session", "--grace": "grace"},
    defaults={"grace": "5"},
    seconds=("grace",),
)

SPAWN_ARGS = FastSpec(
    body="actors.cli._lifecycle:spawn",
    positionals=("recipe",),
    flags={"--json": "as_json"},
    options={
        "--recipe": "recipe_file",
        "-t": "template",
        "--template": "template",
        "--as": "as_",
        "--session": "session",
        "-v": "values",
        "--value": "values",
        "--secret": "secrets",
        "--group": "group",
        "--after": "after",
    },
    multiple=("values", "secrets", "after"),
    # --wait draws a progress line, and --host sends the parsed options to a host
    # (runtime.hosts.spawning): both are click's command's job
    click_only=("--wait", "--host"),
)

LS_ARGS = FastSpec(
    body="actors.cli._views:list_view",
    flags={"--mine": "mine", "--tree": "tree", "--json": "as_json"},
    options={"--status": "statuses", "--session": "session"},
    multiple=("statuses",),
)

STATUS_ARGS = FastSpec(
    body="actors.cli._views:status_view",
    positionals=("run",),
    flags={"--line": "line", "--json": "as_json", "--stdin": "stdin"},
    options={"--session": "session", "--then": "then"},
)

INBOX_WAIT_ARGS = FastSpec(
    body="actors.cli._inbox_wait:inbox_wait",
    flags={"--json": "as_json"},
    options={"--session": "session", "--timeout": "timeout"},
    seconds=("timeout",),
)

_RUNS = "actors.cli.runs"

TABLE: tuple[Command, ...] = (
    Command(
        "spawn",
        f"{_RUNS}:spawn_cmd",
        "Start a detached run from a recipe or an inline template.",
        SPAWN_ARGS,
    ),
    Command("ls", f"{_RUNS}:ls_cmd", "List runs (compact table; --json for machines).", LS_ARGS),
    Command(
        "status",
        f"{_RUNS}:status_cmd",
        "Show one run's status; --line: this session's active work.",
        STATUS_ARGS,
    ),
    Command(
        "tail", "actors.cli.output:tail_cmd", "Print the end of a run's output; -f follows it."
    ),
    Command("result", "actors.cli.output:result_cmd", "Print a finished run's result."),
    Command("wait", f"{_RUNS}:wait_cmd", "Block until runs finish; exit with the worst exit code."),
    Command(
        "cancel",
        f"{_RUNS}:cancel_cmd",
        "Stop a run gracefully (SIGTERM, grace period, SIGKILL).",
        CANCEL_ARGS,
    ),
    Command(
        "kill", f"{_RUNS}:kill_cmd", "Kill a run and every process it started, at once.", KILL_ARGS
    ),
    Command(
        "restart",
        f"{_RUNS}:restart_cmd",
        "Start a finished run again with the same recipe and values.",
    ),
    Command(
        "host",
        "actors.cli.hosts:host_group",
        "Add, list and remove other machines to run on, over ssh.",
    ),
    Command(
        "group",
        "actors.cli.groups:group_group",
        "Cap how many runs and commands run at once (parallel groups).",
    ),
    Command(
        "archive",
        "actors.cli.retention:archive_cmd",
        "Move a finished run out of runs/ into archive/.",
    ),
    Command("prune", "actors.cli.retention:prune_cmd", "Delete finished runs' state."),
    Command(
        "message",
        "actors.cli.messages:message_cmd",
        "Send a typed message to a run, branch, room or tool.",
        MESSAGE_ARGS,
    ),
    Command(
        "recv",
        "actors.cli.messages:recv_cmd",
        "Inside a run: wait for the next message and print it.",
    ),
    Command(
        "emit",
        "actors.cli.messages:emit_cmd",
        "Inside a run: send an actor message to the coordinator or room.",
        EMIT_ARGS,
    ),
    Command(
        "inspect",
        "actors.cli.messages:inspect_cmd",
        "Read a run, branch, room or session on purpose (views; --json).",
    ),
    Command(
        "session",
        "actors.cli.delivery:session_group",
        "Register and manage coordinator sessions (follow-up targets).",
    ),
    Command(
        "inbox", "actors.cli.delivery:inbox_group", "Read the follow-ups delivered to a session."
    ),
    Command("flush", "actors.cli.delivery:flush_cmd", "Deliver held and waiting follow-ups now."),
    Command(
        "reconcile",
        "actors.cli.delivery:reconcile_cmd",
        "Finish dead runners' runs and deliver owed follow-ups.",
    ),
    Command(
        "watch",
        "actors.cli.delivery:watch_cmd",
        "Observe all runs and deliver follow-ups live (optional).",
    ),
    Command(
        "doctor",
        "actors.cli.delivery:doctor_group",
        "Live diagnostics (doctor delivery: D0-D8 levels).",
    ),
    Command(
        "metrics",
        "actors.cli.metrics:metrics_cmd",
        "Print the metrics in the Prometheus text format (as /metrics serves).",
    ),
    Command(
        "dashboard",
        "actors.cli.dashboard:dashboard_cmd",
        "Serve a live local web view of runs, rooms and sessions (Ctrl-C stops it).",
    ),
    Command("mcp", "actors.cli.mcp:mcp_cmd", "Serve the coordinator tools over MCP (stdio)."),
    Command(
        "hook", "actors.cli.hook_commands:hook_group", "Harness hook commands (run by Claude Code)."
    ),
    Command(
        "install",
        "actors.cli.install:install_cmd",
        "Write the harness configuration (MCP server, hooks).",
    ),
    Command(
        "uninstall",
        "actors.cli.install:uninstall_cmd",
        "Remove what `actors install` wrote, restoring the original files.",
    ),
    Command(
        "recipes",
        "actors.cli.recipes:recipes_group",
        "List, show and check recipes (project, user, shipped).",
    ),
    Command(
        "tools", "actors.cli.tools:tools_group", "List tools and their parameters; register one."
    ),
    Command(
        "run", "actors.cli.tools:run_cmd", "Run a tool: sync in the foreground, async detached."
    ),
    Command(
        "completion",
        "actors.cli.completion:completion_cmd",
        "Print the shell completion script (bash, zsh, fish).",
    ),
)

BY_NAME: Mapping[str, Command] = MappingProxyType({c.name: c for c in TABLE})

COMMANDS: Mapping[str, str] = MappingProxyType({c.name: c.target for c in TABLE})
"""Verb -> "module:attr" of its click command."""

FAST: Mapping[str, FastSpec] = MappingProxyType({c.name: c.fast for c in TABLE if c.fast})
FAST_SUBCOMMANDS: Mapping[tuple[str, str], FastSpec] = MappingProxyType(
    {("inbox", "wait"): INBOX_WAIT_ARGS}
)
"""Subcommands the hand parser serves too: `inbox wait`, which an agent re-arms after
every wake."""
"""The verbs the hand parser serves, with their specs."""
