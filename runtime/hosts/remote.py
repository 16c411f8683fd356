"""A run on a host, driven from here: `host add / ls / rm`, and every
verb given a `run:<host>/<id>` address, which is the remote `actors`'s own verb sent
over the host's connection (so a remote run has exactly the remote's semantics: its
kill is the remote's kill, on the remote machine).

Ownership is checked here, against the placement: only the session that placed a run
controls it (unless --force); on the host, every run placed from this root belongs to
this root's one session there.
"""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import sys
from typing import Any, NamedTuple

from runtime.core.errors import BadInput, Conflict, NotFound
from runtime.core.ids import now_iso
from runtime.core.terminal import one_line
from runtime.hosts.address import RemoteRef, message_address, remote_ref
from runtime.hosts.host import Host
from runtime.hosts.outbox import Queued
from runtime.hosts.records import (
    HostRecord,
    Placement,
    create_host,
    end_if_unknown,
    end_placement,
    forget_host,
    host_paths,
    list_hosts,
    outstanding,
    owned_placement,
    parse_url,
    placements,
)
from runtime.hosts.ssh import SSH_FAILED, HostUnreachable, close_master, explain
from runtime.runs.ownership import Principal, current_principal
from runtime.store.layout import StateRoot, check_id

CONTROL_VERBS = frozenset({"kill", "cancel", "message"})
"""Verbs that act on a run: the placing session's, unless --force."""
SESSION_VERBS = frozenset({"kill", "cancel", "message", "status"})
"""Verbs whose remote form takes `--session` (the root's session there)."""
MAX_STDERR = 1 << 20
"""What is read of a host's stderr for a verb (its last lines say why it failed)."""
REMOTE_VERBS = frozenset({"status", "result", "tail", "wait", "inspect"}) | CONTROL_VERBS


STOPS = {"control.kill": "kill", "control.stop": "cancel"}
"""A message that ends a remote run is the host's verb that ends it, so its placement
here ends with it (the owner's own stop sends no follow-up home to end it): `actors
message`, the MCP tools and the dashboard alike (runtime.hosts.verbs)."""


class RemoteCall(NamedTuple):
    """A verb for a remote run as its own command read it (actors.cli._remote_call):
    `force` and `session` are the options given, never text that looks like them."""

    verb: str
    args: list[str]
    """Its arguments, less --session (the host is given its own)."""
    force: bool
    session: str | None


class RemoteMessage(NamedTuple):
    """`actors message run:<host>/<id> ...` as its click command parsed it."""

    address: str
    type: str
    body: Any
    summary: str | None
    reply_to: str | None
    force: bool
    session: str | None
    as_json: bool


# -- hosts ------------------------------------------------------------------------------


def version_of(host: Host) -> str:
    """The remote actors's version (`actors, version X`), or the reason there is none."""
    done = host.run(["--version"], timeout=30)
    if done.returncode == 127:
        raise NotFound(
            f"host {host.name} has no {host.record['actors']!r} on its PATH",
            hint="install actors there, name it with --actors PATH, or use --install",
        )
    if done.returncode != 0 or "version" not in done.stdout:
        raise NotFound(
            f"host {host.name}: {host.record['actors']!r} --version failed: "
            f"{one_line(done.stderr or done.stdout, 200)}",
            hint="check the remote actors with ssh, or use --install",
        )
    first = done.stdout.strip().splitlines()[0]
    return one_line(first.rsplit(" ", 1)[-1], 40)  # what the host says, bounded and inert


def add_host(
    root: StateRoot,
    name: str,
    url: str,
    *,
    version: str,
    actors: str = "actors",
    install: bool = False,
) -> HostRecord:
    """Check the host answers over ssh with a remote actors of `version` (this one's),
    then record it. Nothing is kept when a check fails."""
    import shutil

    from runtime.store.writes import ensure_dir

    check_id(name, "host name")
    user, address, port = parse_url(url)
    paths = host_paths(root, name)
    if paths.record.exists():
        raise Conflict(f"host {name!r} exists", hint=f"remove it first: actors host rm {name}")
    record: HostRecord = {
        "name": name,
        "url": url,
        "user": user,
        "address": address,
        "port": port,
        "actors": actors,
        "version": "",
        "session": f"via-{secrets.token_hex(6)}",
        "added_at": now_iso(),
    }
    created = not paths.dir.exists()
    ensure_dir(root.hosts)
    ensure_dir(paths.dir)
    host = Host(root, record)
    try:
        if install:
            from runtime.hosts.install import install_remote

            record["actors"] = install_remote(host)
        record["version"] = version_of(host)
        if record["version"] != version:
            raise Conflict(
                f"host {name} runs actors {record['version']}, this is {version}",
                hint="both ends speak one protocol: add it with --install to put this "
                "version there",
            )
        if not create_host(root, record):
            raise Conflict(
                f"host {name!r} was added meanwhile",
                hint=f"see it: actors host ls; or: actors host rm {name}",
            )
    except BaseException:
        close_master(host.ssh())
        if created and not paths.record.exists():  # (another add's record stays)
            shutil.rmtree(paths.dir, ignore_errors=True)
        raise
    return record


class HostRow(NamedTuple):
    name: str
    address: str
    reachable: bool
    version: str
    runs: int
    why: str


ASKED_AT_ONCE = 16
"""How many hosts `host ls` asks at the same time (a thread and an ssh each)."""


def host_rows(root: StateRoot) -> list[HostRow]:
    """`host ls`: each host asked for its version now (reachable or the reason not), all
    of them at once (at most ASKED_AT_ONCE), so hosts that cannot be reached cost one
    connect timeout together, not one each; the rows in the hosts' order."""
    from concurrent.futures import ThreadPoolExecutor

    records = list_hosts(root)
    if len(records) < 2:
        return [_host_row(root, record) for record in records]
    with ThreadPoolExecutor(max_workers=min(len(records), ASKED_AT_ONCE)) as pool:
        return list(pool.map(lambda record: _host_row(root, record), records))


def _host_row(root: StateRoot, record: HostRecord) -> HostRow:
    host = Host(root, record)
    spec = f"{record['user'] + '@' if record['user'] else ''}{record['address']}"
    spec += f":{record['port']}" if record["port"] != 22 else ""
    out = len(outstanding(root, record["name"]))
    try:
        return HostRow(record["name"], spec, True, version_of(host), out, "")
    except (HostUnreachable, NotFound) as err:
        return HostRow(record["name"], spec, False, "", out, err.message)


def remove_host(root: StateRoot, name: str, *, force: bool) -> None:
    host = Host.load(root, name)

    def still_out(out: list[Placement]) -> None:
        if out and not force:
            raise Conflict(
                f"host {name} still has {len(out)} run(s) placed from here "
                f"({', '.join(p['run'] for p in out[:3])})",
                hint="wait for them or kill them, or rm --force (they go on there, unreported)",
            )
        close_master(host.ssh())

    forget_host(root, name, still_out)


# -- runs -------------------------------------------------------------------------------


def queue_message(root: StateRoot, call: RemoteMessage, caller: Principal) -> tuple[Host, Queued]:
    """The one path of a message to a remote run (`actors message`, the MCP tools, the
    dashboard): checked as `caller`'s, durable in the host's outbox, then sent; the
    host's link is started to carry it when the host cannot be reached now."""
    from runtime.hosts import outbox

    ref = remote_ref(call.address)
    if ref is None:
        raise BadInput(f"{call.address[:80]!r} is not a remote run's address", hint="run:HOST/ID")
    host = Host.load(root, ref.host)
    placed = owned_placement(root, ref, caller, force=call.force, action="message")
    if placed.get("state") == "ended":
        raise Conflict(
            f"{ref} has ended ({placed.get('status') or 'ended'}); nothing reads its mailbox "
            "any more",
            hint=f"see `actors result {ref}`",
        )
    message = outbox.new_message(
        ref.run,
        caller.id,
        call.type,
        call.body,
        summary=call.summary,
        reply_to=call.reply_to,
        force=call.force,
    )
    now = outbox.send(host, message)
    if now["state"] == "queued":
        from runtime.hosts.link import start_link

        start_link(root, host.name)
    return host, now


def send_message(root: StateRoot, call: RemoteMessage) -> int:
    """`actors message run:<host>/<id>`: durable in the host's outbox here first, then
    sent (runtime.hosts.outbox); a host that cannot be reached now gets it when the link
    returns, and the sender is told so. `control.kill` and `control.stop` are the host's
    kill and cancel (STOPS), as from the MCP tools and the dashboard."""
    from runtime.hosts import outbox

    stop = STOPS.get(call.type)
    if stop is not None:
        flags = ["--json"] if call.as_json else []
        return forward(root, RemoteCall(stop, [*flags, call.address], call.force, call.session))
    host, now = queue_message(root, call, current_principal(root, call.session))
    said = outbox.outcome(host, now)
    if now.get("unrecorded"):  # the host's answer stands; resending would double it
        sys.stderr.write(
            f"actors: warning: host {host.name} answered, but it is not recorded here yet "
            f"({one_line(str(now['unrecorded']), 200)}); do not resend: the next message "
            f"or the host's link records it\n"
        )
    if now["state"] == "refused":
        answer = now.get("answer") or {}
        why = one_line(str(answer.get("error") or "refused"), 400)
        hint = one_line(str(answer.get("hint") or ""), 200)
        sys.stderr.write(
            f"actors: on host {host.name}: {why}" + (f"; {hint}" if hint else "") + "\n"
        )
        code = answer.get("code")
        return code if isinstance(code, int) and 0 < code < 256 else 2
    if call.as_json:
        print(json.dumps(said, indent=2, ensure_ascii=False, default=str))
    elif now["state"] == "queued":
        print(outbox.UNREACHABLE.format(host=host.name))
    else:
        print(" ".join(f"{k}={one_line(str(v), 200)}" for k, v in said.items()))
    return 0


def forward(root: StateRoot, call: RemoteCall | RemoteMessage) -> int:
    """A verb with `run:<host>/<id>` addresses: run as the host's own verb over its
    connection, output streamed (tail -f follows), exit status the remote's. A message
    goes through the host's outbox (send_message)."""
    if isinstance(call, RemoteMessage):
        return send_message(root, call)
    verb, rest, force, session = call.verb, list(call.args), call.force, call.session
    refs: list[RemoteRef] = []
    # a message's address is its first argument: its type and body are text, which may
    # well start with `run:<host>/<id>` (they are never read as addresses)
    at = message_address(rest) if verb == "message" else None
    candidates = ([] if at is None else [at]) if verb == "message" else range(len(rest))
    for index in candidates:
        ref = remote_ref(rest[index])
        if ref is None:
            continue
        refs.append(ref)
        rest[index] = f"run:{ref.run}"
    hosts = {ref.host for ref in refs}
    mine = {f"run:{r.run}" for r in refs}
    local = [
        a
        for i, a in enumerate(rest)
        if not a.startswith("-") and a not in mine and (i == 0 or rest[i - 1] != "--timeout")
    ]
    if len(hosts) != 1 or (verb == "wait" and local):
        raise BadInput(
            f"`actors {verb}` takes runs of one host at a time",
            hint="call it once per host",
        )
    name = refs[0].host
    host = Host.load(root, name)
    caller = current_principal(root, session) if verb in CONTROL_VERBS else None
    for ref in refs:
        owned_placement(root, ref, caller, force=force, action=verb)
    # right after the verb: after the arguments it could land behind a `--` (a body
    # that starts with '-'), where it would be read as more arguments
    mark = ["--session", host.record["session"]] if verb in SESSION_VERBS else []
    code, stderr = _run_shown(host.command([verb, *mark, *rest]), _bound(verb, rest))
    if code is None:
        raise HostUnreachable(
            f"host {name} did not answer `{verb}` within {_bound(verb, rest):.0f}s",
            hint=f"its actors may be stuck: `ssh` to {name} and look; ACTORS_HOST_TIMEOUT "
            "sets the wait",
        )
    if code == SSH_FAILED:
        r = host.record
        raise explain(name, r["address"], r["port"], stderr)
    if stderr:
        sys.stderr.write(host.said(stderr) if code else stderr)
    if verb in ("kill", "cancel"):
        for ref in refs:
            if code == 0:
                end_placement(root, name, ref.run, "killed" if verb == "kill" else "cancelled")
            else:
                end_if_unknown(root, name, ref.run, stderr)
    return code


def _bound(verb: str, args: list[str]) -> float | None:
    """How long the host has to answer `verb`: ACTORS_HOST_TIMEOUT for a verb that
    answers at once, none for `wait` (its own --timeout is the host's) or `tail -f`."""
    from runtime.core import config

    follows = any(a == "--follow" or re.fullmatch(r"-[A-Za-z]*f[A-Za-z]*", a) for a in args)
    if verb == "wait" or (verb == "tail" and follows):
        return None
    return config.seconds(config.HOST_TIMEOUT)


def _run_shown(argv: list[str], timeout: float | None) -> tuple[int | None, str]:
    """The host's verb, its stdout streamed as it comes (tail -f follows): straight to a
    pipe, as locally, but through this CLI's own stream when that is a terminal, so what
    the host's actors prints is made inert here as a local run's output is (a hostile or
    different actors there cannot drive this terminal). Its stderr's last MAX_STDERR
    bytes are returned (read alongside, so neither pipe can stall the other; a pipe, not
    a file: ssh's multiplexed channel handed a file as stderr ended `tail -f` early).
    A host that has not finished within `timeout` is cut: its status is None then."""
    import codecs
    import os
    import select
    import threading
    import time

    from runtime.core.terminal import TerminalStream

    deadline = None if timeout is None else time.monotonic() + timeout

    def left() -> float | None:
        return None if deadline is None else max(0.0, deadline - time.monotonic())

    shown = isinstance(sys.stdout, TerminalStream)
    with subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE if shown else None,
        stderr=subprocess.PIPE,
    ) as proc:
        assert proc.stderr is not None
        # the reader's own copy: ssh's master holds the channel's pipes, so a reader of a
        # host that never answers is left behind, and must not read a reused fd
        err_fd = os.dup(proc.stderr.fileno())
        tail = bytearray()

        def drain() -> None:
            try:
                while chunk := os.read(err_fd, 65536):
                    tail.extend(chunk)
                    del tail[:-MAX_STDERR]
            finally:
                os.close(err_fd)

        reader = threading.Thread(target=drain, daemon=True)
        reader.start()
        if proc.stdout is not None:
            out_fd = proc.stdout.fileno()
            decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
            while select.select([out_fd], [], [], left())[0]:
                chunk = os.read(out_fd, 65536)
                if not chunk:
                    break
                sys.stdout.write(decoder.decode(chunk))
                sys.stdout.flush()
        try:
            proc.wait(timeout=left())
        except subprocess.TimeoutExpired:
            proc.kill()
            return None, bytes(tail).decode(errors="replace")
        reader.join(left())
    code = None if reader.is_alive() else proc.returncode
    return code, bytes(tail).decode(errors="replace")


def placed_rows(root: StateRoot) -> list[dict[str, Any]]:
    """Every run placed on a host from here, for `ls` (its host column): what this root
    knows without asking the host (ls stays local), `placed` until the run's end came
    back over the link."""
    rows = []
    for record in list_hosts(root):
        for placed in placements(root, record["name"]):
            address = str(RemoteRef(record["name"], placed["run"]))
            rows.append(
                {
                    "run": address,
                    "address": address,
                    "host": record["name"],
                    "owner_id": placed["session"],
                    # a run's command placed it (a swarm's worker): listed under that run
                    "parent": placed["session"] if placed["session"].startswith("run:") else None,
                    "status": placed.get("status")
                    or ("unknown" if placed.get("unread") else placed["state"]),
                    "created_at": placed["placed_at"],
                    "command": placed.get("what"),
                }
            )
            if placed.get("unread") and placed["state"] == "placed":
                # the host's word on it was unreadable: said, naming the host (ls)
                rows[-1]["damaged"] = one_line(str(placed["unread"]), 300)
                rows[-1]["damaged_file"] = f"{record['name']}'s answer"
    return rows
