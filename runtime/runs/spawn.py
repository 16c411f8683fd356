"""Start a detached run: validate everything, claim the id atomically, start the runner.

Nothing is written until the recipe, values and id are known to be good. The state
directory is assembled in `<root>/tmp/` and renamed into `runs/<id>` in one step, which
fails if the id is taken, so a bad or clashing spawn leaves the state root as it was and
two spawns can never share or wipe a directory. The runner is started with posix_spawn
in a new session (it leads its own process group) and is never waited on by the caller.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from runtime.compiler.library import RecipeSource, compile_source, find_recipe, inline_recipe
from runtime.compiler.placeholders import (
    INJECTED,
    REPEAT_VARS,
    MissingValues,
    missing_values,
    references,
    substitute_word,
)
from runtime.compiler.redact import check_declared_secrets
from runtime.compiler.values import apply_args
from runtime.core import config
from runtime.core.bounded_json import INPUT_DEPTH, too_deep
from runtime.core.errors import BadInput, Conflict
from runtime.core.ids import (
    is_valid_id,
    is_valid_name,
    new_id,
    now_iso,
    short_suffix,
)
from runtime.core.process import capture
from runtime.runs.launch import claim, runner_argv, start_runner
from runtime.runs.ownership import current_principal
from runtime.store.layout import RunPaths, StateRoot, check_id, parse_run_ref, session_paths
from runtime.store.writes import write_json_atomic

if TYPE_CHECKING:
    from runtime.store.records import RunRecord


class SpawnOptions(NamedTuple):
    """`actors spawn`'s options as its command parsed them (values still KEY=VALUE
    text): the one record of what was asked, handed as it is to a start here
    (actors.cli._lifecycle.start_run, which makes it a SpawnRequest) or on a host
    (runtime.hosts.spawning.spawn_remote, which sends it there)."""

    recipe: str | None = None
    """RECIPE: a name, or a path to a file."""
    recipe_file: str | None = None
    """--recipe FILE."""
    template: str | None = None
    as_: str | None = None
    values: Sequence[str] = ()
    secrets: Sequence[str] = ()
    group: str | None = None
    after: Sequence[str] = ()
    session: str | None = None

    def one_recipe(self) -> str | None:
        """The recipe, named once: RECIPE or --recipe FILE (BadInput for both)."""
        if self.recipe and self.recipe_file:
            raise BadInput("give the recipe once: either RECIPE or --recipe FILE")
        return self.recipe or self.recipe_file


class SpawnRequest:
    """What the caller asked for; exactly one of `recipe` and `template`.

    A plain class, not a dataclass: `dataclasses` (and the `inspect` it imports) would be
    a tenth of a cached spawn's start-up."""

    __slots__ = (
        "after",
        "cwd",
        "group",
        "recipe",
        "restart_of",
        "run_id",
        "secret_names",
        "session",
        "template",
        "values",
        "waiter",
    )

    def __init__(
        self,
        recipe: str | None = None,
        template: str | None = None,
        run_id: str | None = None,
        values: dict[str, Any] | None = None,
        session: str | None = None,
        secret_names: list[str] | None = None,
        waiter: bool = False,
        group: str | None = None,
        after: list[str] | None = None,
        cwd: str | None = None,
        restart_of: str | None = None,
    ) -> None:
        self.recipe, self.template, self.run_id = recipe, template, run_id
        self.group = group
        """The group whose parallel limit the run waits under (runtime.runner.slots);
        None: the recipe's `group`, if any."""
        self.after: list[str] = [] if after is None else after
        """Runs that must end `done` before this one starts (runtime.runner.gate)."""
        self.cwd = cwd
        """The run's directory (paths in values resolve against it); None: ours."""
        self.restart_of = restart_of
        # The caller blocks on the result itself: it is recorded as the run's waiter, and
        # no follow-up is owed while it is alive at the run's end.
        self.waiter = waiter
        self.values: dict[str, Any] = {} if values is None else values
        self.session = session
        self.secret_names: list[str] = [] if secret_names is None else secret_names

    def _fields(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SpawnRequest) and self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]  # mutable, like the dataclass it replaced

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"SpawnRequest({shown})"


def _walk_leaves(
    node: dict[str, Any], values: dict[str, Any], in_repeat: bool = False
) -> list[tuple[list[str], bool, dict[str, Any]]]:
    """Every command's words, whether it runs inside a `repeat` node, and the values it
    will see (an imported recipe's own defaults and values included)."""
    in_repeat = in_repeat or node.get("repeat") is not None
    values = {**(node.get("scope_defaults") or {}), **values, **(node.get("scope") or {})}
    words: list[tuple[list[str], bool, dict[str, Any]]] = []
    if node.get("recover"):
        words.append((node["recover"], in_repeat, values))
    if node["kind"] == "leaf":
        words.append((node["words"], in_repeat, values))
    for child in node.get("children", []):
        words.extend(_walk_leaves(child, values, in_repeat))
    return words


def _check_text(values: dict[str, Any], root: dict[str, Any]) -> None:
    """Every value and template word must be UTF-8 text without NUL: a NUL cannot be part of
    a command argument, and a lone surrogate (from a `\\udcff` escape or undecodable
    command-line bytes) cannot be written to run.json. Nor can a value nest deeper than
    input may (runtime.core.bounded_json), or hold NaN or Infinity: every reader of
    run.json would find it damaged."""

    def walk(item: Any, where: str) -> None:
        if isinstance(item, float) and item - item != 0.0:
            raise BadInput(f"{where} holds {item}, which is not a JSON number")
        if isinstance(item, str):
            if "\x00" in item:
                raise BadInput(f"{where} contains a NUL character", hint="remove it")
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                raise BadInput(
                    f"{where} is not valid UTF-8 text (a lone surrogate)",
                    hint="pass UTF-8 text only",
                ) from None
        elif isinstance(item, dict):
            for key, value in item.items():
                walk(key, where)
                walk(value, f"{where}.{key}" if where.startswith("value") else where)
        elif isinstance(item, list):
            for value in item:
                walk(value, where)

    for name, value in values.items():
        if too_deep(value, INPUT_DEPTH):
            raise BadInput(
                f"value {name} is nested more than {INPUT_DEPTH} levels deep",
                hint="flatten it, or pass a file path",
            )
        walk(value, f"value {name}")
    if too_deep(root, INPUT_DEPTH):
        raise BadInput(f"the template is nested more than {INPUT_DEPTH} levels deep")
    walk(root, "the template")


def _check_hosts(root: StateRoot, node: dict[str, Any], values: dict[str, Any]) -> None:
    """Every host a node names (`"host": "{hosts}"`) must be one of this root's (`actors
    host add`), before anything starts: a swarm is not half started on hosts that exist.
    A name that depends on what only the run knows (`{index}`...) is checked by the
    command on its way to the host."""
    values = {**(node.get("scope_defaults") or {}), **values, **(node.get("scope") or {})}
    if node.get("host"):
        try:
            rendered = substitute_word(node["host"], values)
        except BadInput:
            rendered = ""
        for name in filter(None, (n.strip() for n in rendered.split(","))):
            label = node.get("label") or node["id"]
            if not is_valid_id(name) or not root.host(name).record.exists():
                raise BadInput(
                    f"node {label} names host {name[:80]!r}, which is not a host of this "
                    "machine",
                    hint="see `actors host ls`; add it with `actors host add NAME "
                    "ssh://[user@]host`",
                )
    for child in node.get("children", []):
        _check_hosts(root, child, values)


def _check_repeat_refs(words: list[str], in_repeat: bool) -> None:
    if in_repeat:
        return
    for ref in references(words):
        uses = ref.name in REPEAT_VARS or (not ref.name and ref.expr)
        if uses:
            raise BadInput(
                f"{{{ref.expr or ref.name}}} is only defined inside a repeat node",
                hint='add "repeat": N to the node, or pass the value with -v',
            )


def _pick_run_id(req: SpawnRequest, source: RecipeSource, compiled: dict[str, Any]) -> str:
    if req.run_id:
        return parse_run_ref(req.run_id)
    if compiled.get("run_id"):
        return check_id(compiled["run_id"], "recipe run_id")
    base = source.name or "run"
    base = "".join(c if c.isalnum() or c in "._-" else "-" for c in base)[:40].lstrip("._-")
    return f"{base or 'run'}-{short_suffix()}"


def _merge_values(
    req: SpawnRequest, source: RecipeSource, compiled: dict[str, Any], injected: dict[str, Any]
) -> dict[str, Any]:
    for origin, names in (
        ("-v", req.values),
        ("recipe values", compiled["values"]),
        ("recipe defaults", compiled["defaults"]),
    ):
        for name in names:
            if not is_valid_name(name):
                raise BadInput(f"invalid value name {name!r}", hint="use letters, digits and '_'")
            if name in INJECTED:
                raise BadInput(f"{name} is set by the runtime and cannot be given ({origin})")
    return {
        **compiled["defaults"],
        **compiled["values"],
        **_given(req, source, compiled),
        **injected,
    }


def _given(req: SpawnRequest, source: RecipeSource, compiled: dict[str, Any]) -> dict[str, Any]:
    """The caller's values, each for a name the recipe or template uses (a typo is
    refused with a did-you-mean) and converted to its type by the one converter, the
    same step `actors run` and `tool:` messages take."""
    if not req.values:
        return {}
    from runtime.compiler.params import convert_given, graph_params, parameters

    params = graph_params(parameters(source.raw), compiled["root"])
    owner = f"recipe {source.name}" if source.name else "the template"
    given = {name: [value] for name, value in req.values.items()}
    return convert_given(owner, params, given, cwd=req.cwd)


def _resolve_artifacts(
    compiled: dict[str, Any], values: dict[str, Any], cwd: Path
) -> dict[str, Any]:
    resolved = {}
    for name, spec in compiled["artifacts"].items():
        path = Path(substitute_word(spec["path"], values)).expanduser()
        resolved[name] = {**spec, "path": str(path if path.is_absolute() else cwd / path)}
    return resolved


def spawn(req: SpawnRequest, root: StateRoot | None = None) -> RunRecord:
    """Start a run and return its run.json record (the runner is already running).

    Everything that can be refused (the recipe, the id, the values) is checked before
    the state directory exists, so bad input changes nothing.
    """
    config.check_values()  # the runner inherits our environment: refuse a bad value here
    root = root or StateRoot.from_env()
    principal = current_principal(root, req.session)
    session_paths(root, principal.id)  # its follow-ups' directory: refused unless ours
    if (req.recipe is None) == (req.template is None):
        raise BadInput("give a recipe (name or file) or --template, not both or neither")
    source = (
        find_recipe(req.recipe) if req.recipe is not None else inline_recipe(req.template or "")
    )
    if req.run_id:
        parse_run_ref(req.run_id)
    recipe = compile_source(source, root)
    compiled = recipe.data
    paths = _free_run_paths(root, req, source, compiled)
    values = _checked_values(req, source, compiled, paths)
    _check_hosts(root, compiled["root"], values)
    check_declared_secrets(values, req.secret_names)  # too short to mask: refused
    group, after = _waits(root, req, compiled, values)
    if compiled.get("precheck"):
        from runtime.runs.precheck import precheck

        precheck(source.name or "run", compiled["precheck"], values)
    cwd = Path(req.cwd) if req.cwd is not None else Path.cwd()
    record = _run_record(req, source, compiled, paths, values, principal.id, cwd)
    if group is not None or after:
        record.update({"group": group, "after": after, "queue_order": new_id()})
    if req.restart_of is not None:
        record["restart_of"] = req.restart_of
    record["parent"] = principal.id if principal.via_run_token else None
    record["cgroup"] = _cgroup_path(root, record)
    _add_origin(record, req, source)
    if req.waiter:
        record["waiter"] = capture(os.getpid())
    token = claim(root, paths, record)
    pid = start_runner(paths, root, token)
    identity = capture(pid, argv=runner_argv(paths), cwd=str(cwd))
    if identity is not None and str(cwd) != os.getcwd():
        identity["cwd"] = None  # it moves there as it starts; its start time pins it
    record.update({"pid": pid, "argv": runner_argv(paths), "process_identity": identity})
    # No journal append here: the runner may already hold (or, stopped, keep holding)
    # events.jsonl's lock; `run.start` was written before the runner existed (claim).
    write_json_atomic(paths.run_json, record)
    recipe.remember()  # fill the compile cache now that the spawn succeeded
    return record


def _waits(
    root: StateRoot, req: SpawnRequest, compiled: dict[str, Any], values: dict[str, Any]
) -> tuple[str | None, list[str]]:
    """The run's group (given, else the recipe's, its placeholders filled) and the runs it
    comes after, each proven to exist now: a typo is refused before anything is written."""
    group = req.group
    if group is None and compiled.get("group"):
        group = substitute_word(compiled["group"], values)
    if group is not None:
        from runtime.runner.slots import limit

        limit(root.group(group))  # NotFound (with the `group set` to run) if never set
    after: list[str] = []
    for ref in req.after:
        from runtime.views.status import find_run

        paths, _ = find_run(root, parse_run_ref(ref))
        if paths.run_id not in after:
            after.append(paths.run_id)
    return group, after


def _cgroup_path(root: StateRoot, record: RunRecord) -> str | None:
    """The cgroup the runner will move into (runtime.core.cgroups), None where none can
    be made (the kill falls back to the process-group and identity proof)."""
    from runtime.core import cgroups

    path = cgroups.path_for(root.path, record["run"], record["run_instance_id"])
    return None if path is None else str(path)


def _free_run_paths(
    root: StateRoot, req: SpawnRequest, source: RecipeSource, compiled: dict[str, Any]
) -> RunPaths:
    """The new run's paths: the requested id (Conflict when taken) or a generated one
    (drawn again when it happens to exist)."""
    run_id = _pick_run_id(req, source, compiled)
    generated = not req.run_id and not compiled.get("run_id")
    for _ in range(20):
        if not (generated and root.run(run_id).dir.exists()):
            break
        run_id = _pick_run_id(req, source, compiled)
    paths = root.run(run_id)
    if paths.dir.exists():
        raise Conflict(
            f"run id {run_id} is already in use",
            hint="choose another --as, or archive/prune the old run first",
        )
    return paths


def _checked_values(
    req: SpawnRequest, source: RecipeSource, compiled: dict[str, Any], paths: RunPaths
) -> dict[str, Any]:
    """The run's values: injected ones, the caller's converted to their declared types,
    and every placeholder of every leaf proven to have one (BadInput otherwise)."""
    run_id = paths.run_id
    injected = {
        "run_id": run_id,
        "state_dir": str(paths.dir),
        "actor_address": f"run:{run_id}",
        "default_room": f"room:{run_id}",
        "communication_file": str(paths.communication),
    }
    if source.file is not None:
        injected["recipe_dir"] = str(source.file.parent)
    values = apply_args(
        compiled.get("args") or {},
        _merge_values(req, source, compiled, injected),
        req.cwd if req.cwd is not None else os.getcwd(),
    )
    _check_text(values, compiled["root"])
    missing: dict[str, None] = {}
    for words, in_repeat, seen in _walk_leaves(compiled["root"], values):
        if not any(name in values for name in REPEAT_VARS):
            _check_repeat_refs(words, in_repeat)
        missing.update(dict.fromkeys(missing_values(words, seen)))
    if missing:
        raise MissingValues(list(missing))
    return values


def _run_record(
    req: SpawnRequest,
    source: RecipeSource,
    compiled: dict[str, Any],
    paths: RunPaths,
    values: dict[str, Any],
    owner: str,
    cwd: Path,
) -> RunRecord:
    """run.json as written before the runner starts (pid and identity filled in after)."""
    run_id = paths.run_id
    return {
        "schema": "actors.run/1",
        "run": run_id,
        "run_instance_id": new_id(),
        "address": f"run:{run_id}",
        "state_dir": str(paths.dir),
        "created_at": now_iso(),
        "cwd": str(cwd),
        "owner_id": owner,
        "owner_user": os.environ.get("USER") or str(os.getuid()),
        "parent": None,
        "launch_source": "spawn",
        "recipe": source.name,
        "recipe_file": str(source.file) if source.file else None,
        "recipe_dir": str(source.file.parent) if source.file else None,
        "description": compiled["description"],
        "async": compiled["async"],
        "template": compiled["root"],
        "values": values,
        "secret_names": sorted(set(req.secret_names)),
        "artifacts": _resolve_artifacts(compiled, values, cwd),
        "mailbox": compiled["mailbox"],
        "retire_when": compiled["retire_when"],
        "pid": None,
        "argv": None,
        "process_identity": None,
    }


def _add_origin(record: RunRecord, req: SpawnRequest, source: RecipeSource) -> None:
    """Where the recipe came from; an inline template or an ad-hoc file keeps the recipe
    as given and the names of the values set, so a run that worked can become a tool."""
    if source.file is None:
        origin = "template"
    else:
        from runtime.compiler.library import search_dirs

        roots = {d.resolve() for d in search_dirs() if d.is_dir()}
        origin = "library" if source.file.parent.resolve() in roots else "file"
    record["origin"] = origin
    record["given_values"] = sorted(req.values)  # what `actors restart` gives again
    if origin != "library":
        record["recipe_raw"] = source.raw


__all__ = ["INJECTED", "SpawnRequest", "spawn"]
