"""`actors spawn --host NAME`: a run placed here first, then started on the host.

The request travels as one JSON object on the ssh channel's stdin, read on the host by
the hidden `actors host spawn`: the remote command line is `actors host spawn` and
nothing else, so no value (a `--secret` least of all) is in any argv, here or there,
where any user of either machine reads it in `ps`; and the request is built from the
options click parsed (actors.cli.runs.spawn_cmd, the one definition of them), never
re-read from raw text. A recipe file given here is read, bounded and validated here
(bad input is one line, and nothing is created there), and its content is sent.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from runtime.core.errors import BadInput, Conflict, NotFound
from runtime.core.faults import pause_point
from runtime.core.ids import is_valid_id, short_suffix
from runtime.core.terminal import one_line
from runtime.hosts.host import Host
from runtime.hosts.records import host_paths, place, placement
from runtime.hosts.ssh import HostAnswer, HostUnreachable
from runtime.store.layout import StateRoot, check_id

if TYPE_CHECKING:
    from runtime.runs.spawn import SpawnOptions

MAX_REQUEST_BYTES = 4 << 20
"""The longest request the host reads (a recipe is at most MAX_RECIPE_BYTES of it)."""


class SpawnWire(TypedDict):
    """What `actors host spawn` reads on the host's stdin: one JSON object."""

    recipe: str | None
    """A recipe of the host's own library (a name), or the sent recipe's name."""
    recipe_raw: dict[str, Any] | None
    """The content of a recipe file read here, or None."""
    template: str | None
    run: str
    values: list[str]
    secrets: list[str]
    group: str | None
    after: list[str]
    session: str


def _sent_recipe(path: str) -> tuple[str, dict[str, Any]]:
    """A recipe file here, read bounded and checked as a spawn would check it: (its
    name, its content). A recipe that imports others is refused: they are not sent."""
    from runtime.compiler.library import MAX_RECIPE_BYTES, recipe_bytes, recipe_problem
    from runtime.core.bounded_json import INPUT_DEPTH, TooDeep, Undecodable, decode

    file = Path(path).expanduser()
    data = recipe_bytes(file)  # NotFound / BadInput (too large, not a regular file)
    try:
        raw = decode(data, max_bytes=MAX_RECIPE_BYTES, max_depth=INPUT_DEPTH)
    except TooDeep:
        raise BadInput(f"recipe {path} is nested too deeply to be a recipe") from None
    except Undecodable as exc:
        raise BadInput(f"recipe {path} is not valid JSON: {one_line(str(exc), 120)}") from None
    if not isinstance(raw, dict):
        raise BadInput(f"recipe {path}: a recipe is a JSON object")
    if raw.get("imports"):
        raise BadInput(
            f"recipe {path} imports other recipes, which are not sent to a host",
            hint="put the recipes in the host's library and spawn it by name there",
        )
    problem = recipe_problem(raw, str(file))
    if problem is not None:
        raise BadInput(f"recipe {path}: {problem}")
    stem = file.stem if is_valid_id(file.stem) and len(file.stem) < 40 else "recipe"
    return stem, raw


def _is_file_ref(recipe: str) -> bool:
    """A RECIPE that names a file (as a local spawn reads it) is this machine's file."""
    return os.sep in recipe or recipe.endswith(".json")


def spawn_remote(
    root: StateRoot, host_name: str, req: SpawnOptions, *, as_json: bool = False
) -> int:
    """Placed here first, then started there under that id; prints its address."""
    from runtime.hosts.address import RemoteRef
    from runtime.runs.ownership import current_principal

    if (req.one_recipe() is None) == (req.template is None):
        raise BadInput("give a recipe (name or file) or --template, not both or neither")
    host = Host.load(root, host_name)
    owner = current_principal(root, req.session).id
    file = req.recipe_file or (req.recipe if req.recipe and _is_file_ref(req.recipe) else None)
    name, raw = _sent_recipe(file) if file is not None else (req.recipe, None)
    if req.as_ is not None:
        run_id = check_id(req.as_.removeprefix("run:"), "run id")
    else:
        label = name if name and is_valid_id(name) and len(name) < 40 else "run"
        run_id = f"{label}-{short_suffix()}"
    if placement(root, host.name, run_id) is not None:
        raise Conflict(
            f"run {run_id} was already placed on {host.name}", hint="choose another --as"
        )
    wire: SpawnWire = {
        "recipe": name,
        "recipe_raw": raw,
        "template": req.template,
        "run": f"run:{run_id}",
        "values": list(req.values),
        "secrets": list(req.secrets),
        "group": req.group,
        "after": list(req.after),
        "session": host.record["session"],
    }
    address = str(RemoteRef(host.name, run_id))
    host.reach()  # unreachable now: nothing placed, nothing sent
    pause_point("hosts.spawn.before_place")
    place(root, host.name, run_id, owner, what=req.template or file or name or "")
    unplace = host_paths(root, host.name).placement(run_id)
    try:
        done = host.run(["host", "spawn"], input=json.dumps(wire), timeout=120)
    except (HostUnreachable, KeyboardInterrupt) as err:
        raise _cut_while_starting(root, host, address, err) from None
    except HostAnswer as err:  # an answer too large to read: its word is unreadable
        raise _unread_start(root, host, run_id, address, err) from None
    except BaseException:
        unplace.unlink(missing_ok=True)
        raise
    if done.returncode != 0:
        unplace.unlink(missing_ok=True)
        sys.stderr.write(host.said(done.stderr))
        return done.returncode
    try:
        started = host.answer("spawn", done.stdout, max_bytes=1 << 20)
    except HostAnswer as err:
        raise _unread_start(root, host, run_id, address, err) from None
    pause_point("hosts.spawn.before_link")
    _start_link_unless_removed(root, host, address)
    if as_json:
        print(
            json.dumps({**started, "run": run_id, "host": host.name, "address": address}, indent=2)
        )
    else:
        print(address)
    return 0


class HostRemoved(NotFound):
    """`host rm` took the host after it had started the run: the run goes on there, and
    nothing here will report it (a swarm's step says so in its own words)."""


def _start_link_unless_removed(root: StateRoot, host: Host, address: str) -> None:
    """The host's link, which carries the run's end home; HostRemoved when `host rm`
    removed the host while the run was starting there (between the host's answer and
    here), not the `no host` of a name never added."""
    from runtime.hosts.link import start_link

    try:
        start_link(root, host.name)
    except NotFound:
        if host_paths(root, host.name).record.exists():
            raise
        raise HostRemoved(
            f"host {host.name} was removed (host rm) while {address} was starting there; "
            "it goes on there, unreported",
            hint=f"add the host again and `actors kill {address}`, or stop it there",
        ) from None


def _cut_while_starting(
    root: StateRoot, host: Host, address: str, err: HostUnreachable | KeyboardInterrupt
) -> HostUnreachable:
    """A spawn whose connection was cut (or Ctrl-C'd) after its request went: the
    request may have reached the host, and the run may be going there. The placement
    stays, so its end comes home (the link, started here), a retry under the same --as
    is refused instead of starting it twice, and a kill of one that never started ends
    it as `lost`. One line, exit 3 (130 for Ctrl-C)."""
    from runtime.hosts.link import start_link

    start_link(root, host.name)
    why = err.message if isinstance(err, HostUnreachable) else "interrupted"
    cut = HostUnreachable(
        f"{why}, while starting {address}: it may have started there",
        hint=f"`actors status {address}` tells once the host answers; its end comes "
        f"home if it did; `actors kill {address}` stops it (or forgets it if it did not)",
    )
    cut.exit_code = 3 if isinstance(err, HostUnreachable) else 130
    return cut


def _unread_start(
    root: StateRoot, host: Host, run_id: str, address: str, err: HostAnswer
) -> HostUnreachable:
    """The host's `host spawn` ended well (exit 0) but what it answered cannot be read
    (not its JSON, or too large): its word is unreadable, not a "no". The run may be
    going there, so its placement stays, marked `unknown` (`ls`), its link started so
    its end comes home; never dropped as if the run were gone (its end would then be
    refused, a retry under the same --as would start it twice, and a swarm's reap would
    leave it running). One line naming the host and the address, exit 3."""
    from runtime.hosts.link import start_link
    from runtime.hosts.records import mark_unread

    mark_unread(root, host.name, run_id, err.message)
    start_link(root, host.name)
    kept = HostUnreachable(
        f"{err.message}; {address} is kept here as unknown: it may have started there",
        hint=f"check the actors on {host.name} (`actors host ls`); its end comes home if "
        f"it started; `actors kill {address}` stops it (or forgets it if it did not)",
    )
    kept.exit_code = 3
    return kept


# -- on the host ------------------------------------------------------------------------


def read_wire(data: bytes) -> SpawnWire:
    """The request from stdin, every field checked for its type (one line otherwise)."""
    from runtime.core.bounded_json import INPUT_DEPTH, Undecodable, decode

    try:
        found = decode(data, max_bytes=MAX_REQUEST_BYTES, max_depth=INPUT_DEPTH + 2)
    except Undecodable as exc:
        raise BadInput(f"host spawn: the request is not JSON: {one_line(str(exc), 120)}") from None
    fields: dict[str, tuple[type, ...]] = {
        "recipe": (str, type(None)),
        "recipe_raw": (dict, type(None)),
        "template": (str, type(None)),
        "run": (str,),
        "values": (list,),
        "secrets": (list,),
        "group": (str, type(None)),
        "after": (list,),
        "session": (str,),
    }
    if not isinstance(found, dict) or any(
        not isinstance(found.get(k), kinds) for k, kinds in fields.items()
    ):
        raise BadInput("host spawn: the request is not a spawn request of this version")
    for key in ("values", "secrets", "after"):
        if not all(isinstance(item, str) for item in found[key]):
            raise BadInput(f"host spawn: {key} are not all text")
    return found  # type: ignore[return-value]


def sent_recipe_path(root: StateRoot, wire: SpawnWire) -> str | None:
    """A sent recipe kept on the host (0600, content-addressed under the coordinator's
    session there), so the run's recorded recipe file exists as long as the run does."""
    import hashlib

    from runtime.store.layout import session_paths
    from runtime.store.writes import ensure_dir, write_json_atomic

    raw = wire["recipe_raw"]
    if raw is None:
        return None
    name = wire["recipe"] or "recipe"
    name = name if is_valid_id(name) else "recipe"
    canonical = json.dumps(raw, sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(canonical.encode()).hexdigest()[:24]
    folder = session_paths(root, check_id(wire["session"], "session id")).dir / "recipes"
    ensure_dir(folder.parent)
    ensure_dir(folder)
    ensure_dir(folder / digest)
    path = folder / digest / f"{name}.json"
    write_json_atomic(path, raw)
    return str(path)
