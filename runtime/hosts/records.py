"""What this state root knows of its hosts: one record per host (`actors host add`) and
one placement per run it placed there, all files 0600 under `hosts/<name>/`."""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, NotRequired, TypedDict, cast

from runtime.core.errors import BadInput, Conflict, NotFound, StateDamaged
from runtime.core.ids import now_iso
from runtime.store.layout import HostPaths, StateRoot, check_id
from runtime.store.reads import read_json
from runtime.store.writes import ensure_dir, write_json_atomic

if TYPE_CHECKING:
    from runtime.hosts.address import RemoteRef
    from runtime.runs.ownership import Principal


class HostRecord(TypedDict):
    name: str
    url: str
    user: str
    address: str
    port: int
    actors: str
    """The remote `actors` command (an absolute path after `--install`)."""
    version: str
    """The remote actors's version when last checked."""
    session: str
    """The session this root's runs belong to on the remote: their follow-ups wait in
    its inbox there until the link has them durable here."""
    added_at: str


class Placement(TypedDict):
    run: str
    host: str
    session: str
    """The local session that owns the run (and gets its follow-ups)."""
    placed_at: str
    state: str
    """`placed`, then `ended` once its terminal follow-up is here or it was stopped."""
    what: NotRequired[str]
    """The recipe or template, for `ls`."""
    status: NotRequired[str]
    """Once ended: the run's final status there, or `lost` (the host never started it)."""
    ended_at: NotRequired[str]
    unread: NotRequired[str]
    """Why the host's word on the run could not be read (its `host spawn` exited 0 with
    an answer that is not one): the run may be going there, so it stays placed (its end
    comes home, a kill stops or forgets it), shown as `unknown` until its end is here."""


_URL = re.compile(
    r"ssh://(?:(?P<user>[A-Za-z_][A-Za-z0-9_.-]{0,31})@)?"
    r"(?P<host>[A-Za-z0-9_.~%+-]+|\[[0-9A-Fa-f:.]+\])(?::(?P<port>[0-9]{1,5}))?/?"
)
"""A host is a name, an IPv4 or a bracketed IPv6 address, in printable ASCII only: a
control or invisible character would be stored, handed to ssh and shown to a terminal,
and a shell or ssh metacharacter has no place in a host name."""


def parse_url(url: str) -> tuple[str, str, int]:
    """`ssh://[user@]host[:port]` -> (user, host, port); one line naming the fault."""
    hint = "use ssh://[user@]host[:port], e.g. ssh://build@10.0.0.7:2222"
    userinfo = url.removeprefix("ssh://").partition("/")[0].rpartition("@")[0]
    if ":" in userinfo:  # a password: never echoed, never kept
        raise BadInput(
            "an ssh:// host address carries no password (ssh logs in with your keys)",
            hint=f"drop ':PASSWORD' from it; {hint}",
        )
    found = _URL.fullmatch(url)
    if found is None or found["host"].startswith("-"):
        raise BadInput(f"{url[:80]!r} is not an ssh:// host address", hint=hint)
    port = int(found["port"] or 22)
    if not 0 < port < 65536:
        raise BadInput(f"port {port} of {url[:80]!r} is out of range", hint=hint)
    return found["user"] or "", found["host"].strip("[]"), port


def host_paths(root: StateRoot, name: str) -> HostPaths:
    return root.host(check_id(name, "host name"))


def load_host(root: StateRoot, name: str) -> HostRecord:
    paths = host_paths(root, name)
    found = read_json(paths.record)
    if found is None:
        raise NotFound(f"no host {name!r}", hint="add it: actors host add NAME ssh://[user@]host")
    if not isinstance(found, dict) or not {"name", "address", "actors", "session"} <= found.keys():
        raise StateDamaged(f"host record {paths.record} is damaged", path=paths.record)
    return cast("HostRecord", found)


def save_host(root: StateRoot, record: HostRecord) -> None:
    paths = host_paths(root, record["name"])
    ensure_dir(root.hosts)
    ensure_dir(paths.dir)
    write_json_atomic(paths.record, record)


def create_host(root: StateRoot, record: HostRecord) -> bool:
    """`host add`'s record, written only if the host has none: False when one exists (a
    second `host add` of the name finished first), never overwritten (its session owns
    the runs placed there)."""
    from runtime.store.writes import publish_json_once

    paths = host_paths(root, record["name"])
    ensure_dir(root.hosts)
    ensure_dir(paths.dir)
    return publish_json_once(paths.record, record)


def list_hosts(root: StateRoot) -> list[HostRecord]:
    if not root.hosts.is_dir():
        return []
    return [
        load_host(root, d.name)
        for d in sorted(root.hosts.iterdir())
        if d.is_dir() and not d.name.startswith(".") and (d / "host.json").exists()
    ]


@contextlib.contextmanager
def host_held(root: StateRoot, name: str) -> Iterator[HostPaths]:
    """The host's placing lock, held while it is still recorded (NotFound once `host
    rm` took it away): what a placement and `host rm` take, so neither sees the other
    half done (a run placed on a host just removed, its files made again by the write)."""
    from runtime.store.appends import locked

    paths = host_paths(root, name)
    if not paths.record.exists():
        load_host(root, name)  # its one line: no such host
    with locked(paths.placing_lock):
        if not paths.record.exists():  # removed while this waited for the lock
            load_host(root, name)
        yield paths


def place(root: StateRoot, host: str, run_id: str, session: str, *, what: str = "") -> Placement:
    """Written (fsynced) before the run is started there: the link accepts follow-ups
    only of placed runs. Never on a host `host rm` is removing (host_held), and never
    over another placement of the id (two spawns `--as` one id at once: the later is
    refused here, before anything is sent, and cannot unplace the first's run)."""
    record: Placement = {
        "run": check_id(run_id),
        "host": host,
        "session": session,
        "placed_at": now_iso(),
        "state": "placed",
        "what": what,
    }
    from runtime.store.writes import publish_json_once

    with host_held(root, host) as paths:
        ensure_dir(paths.placements)
        if not publish_json_once(paths.placement(run_id), record):
            raise Conflict(f"run {run_id} was already placed on {host}", hint="choose another --as")
    return record


def placement(root: StateRoot, host: str, run_id: str) -> Placement | None:
    """The placement of `run_id` on `host`, None when there is none; StateDamaged (one
    line) for a file there that is not one, so no reader trips over a missing field
    (`ls` and the link skip it, a verb on its address says so)."""
    path = host_paths(root, host).placement(run_id)
    found = read_json(path)
    if found is None:
        return None
    texts = ("run", "session", "placed_at", "state")
    if (
        not isinstance(found, dict)
        or found.get("run") != run_id
        or not all(isinstance(found.get(k), str) for k in texts)
        or not all(
            isinstance(found.get(k, ""), str) for k in ("what", "status", "ended_at", "unread")
        )
    ):
        raise StateDamaged(
            f"placement {path} is damaged",
            hint=f"look at it; `rm {path}` forgets the run here (it goes on on {host})",
            path=path,
        )
    return cast("Placement", found)


def owned_placement(
    root: StateRoot, ref: RemoteRef, principal: Principal | None, *, force: bool, action: str
) -> Placement:
    """The placement of `ref` (NotFound when it was not placed from here). With a
    `principal` (a verb that acts on the run), refused unless it controls the run or
    forces it: the ownership rule of every run (runtime.runs.ownership), the owner being
    the session that placed it."""
    from runtime.runs.ownership import check_owner

    placed = placement(root, ref.host, ref.run)
    if placed is None:
        raise NotFound(
            f"no run {ref.run} placed on host {ref.host} from here",
            hint=f"actors ls shows the runs placed on hosts; {ref.host}'s own are its business",
        )
    if principal is not None:
        owner = placed["session"]
        check_owner(root, principal, owner, target=str(ref), action=action, force=force)
    return placed


def placements(root: StateRoot, host: str) -> list[Placement]:
    folder = host_paths(root, host).placements
    if not folder.is_dir():
        return []
    found = []
    for entry in sorted(folder.iterdir()):
        if entry.suffix == ".json":
            with contextlib.suppress(StateDamaged, BadInput):
                record = placement(root, host, entry.stem)
                if record is not None:
                    found.append(record)
    return found


def outstanding(root: StateRoot, host: str) -> list[Placement]:
    """Placed runs whose end is not known here yet."""
    return [p for p in placements(root, host) if p.get("state") == "placed"]


def end_placement(root: StateRoot, host: str, run_id: str, status: str) -> None:
    record = placement(root, host, run_id)
    if record is None or record.get("state") == "ended":
        return
    record.update({"state": "ended", "status": status, "ended_at": now_iso()})
    paths = host_paths(root, host)
    write_json_atomic(paths.placement(run_id), record)
    if paths.doorbells.is_dir():  # a run's step waits on it (runtime.hosts.step)
        from runtime.messaging.doorbells import ring

        ring(paths.doorbells)


def mark_unread(root: StateRoot, host: str, run_id: str, why: str) -> None:
    """The host answered for `run_id` with what cannot be read: the placement is kept
    (never dropped as if the run were gone) and says why, so `ls` shows it `unknown`."""
    record = placement(root, host, run_id)
    if record is None or record.get("state") == "ended":
        return
    record["unread"] = why
    write_json_atomic(host_paths(root, host).placement(run_id), record)


LOST = "lost"
"""A placement's status when its host does not know the run: it was placed here, but the
placer died before the host started it (nothing there will ever send its end)."""


def end_if_unknown(root: StateRoot, host: str, run_id: str, stderr: str) -> bool:
    """A stop the host answered with its not-found line for `run_id` (`actors: no run
    ID;`, runtime.views.status) ends the placement as `lost`: else it stays `placed` for
    ever (the link reconnects for it, `host rm` refuses, `ls` shows it out)."""
    said = f"actors: no run {run_id};"
    if not any(line.startswith(said) for line in stderr.splitlines()):
        return False
    end_placement(root, host, run_id, LOST)
    return True


def forget_host(root: StateRoot, name: str, still_out: Callable[[list[Placement]], None]) -> None:
    """`host rm`: the host's records go (its runs there are untouched). Under the host's
    placing lock, `still_out` is shown the runs placed there that are out (it raises to
    refuse), then the host is renamed out of the way, so a reader sees the host or
    nothing, and no spawn places a run on it meanwhile; files its link or ssh master
    remove while they go are not an error."""
    import shutil

    from runtime.core.ids import new_id

    gone = root.hosts / f".removed-{name}-{new_id()}"
    with host_held(root, name) as paths:
        still_out(outstanding(root, name))
        os.rename(paths.dir, gone)
    # a run's step waiting for a run placed there wakes, and finds it gone (not a wait
    # for ever on a doorbell no link will ring)
    from runtime.messaging.doorbells import ring

    ring(gone / "doorbells")

    def vanished(func: object, path: str, exc: object) -> None:
        if not isinstance(sys.exc_info()[1], FileNotFoundError):
            raise  # what rmtree is handling: anything but a file already gone

    shutil.rmtree(gone, onerror=vanished)
