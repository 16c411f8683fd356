"""A run's command on a host: a recipe node that names a host (`"host": "{hosts}"`, so a
swarm's workers spread over hosts with `-v hosts=a,b`) runs its command there as a
remote run of this run, started through the same path as `spawn --host`.

The runner starts `actors host step NAME` in the command's place (a process boundary:
the runner sits below this room), the command's words a JSON request on its stdin, never
in a command line. The step places the remote run through `spawn --host`'s one path
(runtime.hosts.spawning: the request on the ssh channel's stdin), each word one value
there, every part of a word that is one of this run's secrets a value marked secret, so
the host masks it in what the worker writes. The step places the remote run, owned by
this run (`run:<id>`, so its follow-ups come home over the host's link into this run's
inbox, once), then sleeps on the host's doorbell until the link has brought the run's
end home: no channel of its own is held to the host and nothing polls it. Its exit
status is the remote run's. Stopped (SIGTERM: a cancel, a `control.stop`, a node's
timeout), it kills the remote run on its host first.

A kill gives no step time to do that (SIGKILL), so the run's end does it: once any of a
run's commands went to a host (`placed-on-hosts` in its directory), its runner's end, or
the fold of a runner that died, starts `actors host reap RUN`, which kills on its host
every run placed by the run that is still out (`reap`, once the run has ended). A dropped link kills
nothing: the step waits on, the link reconnects, and the end comes home late.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import select
import signal
import sys
from typing import IO

from runtime.core.errors import ActorsError, BadInput, Conflict
from runtime.core.faults import pause_point
from runtime.core.ids import short_suffix
from runtime.core.terminal import one_line
from runtime.hosts.host import Host
from runtime.hosts.records import (
    end_if_unknown,
    end_placement,
    host_held,
    list_hosts,
    outstanding,
    placement,
)
from runtime.store.layout import StateRoot

EXIT_OF = {"done": 0, "killed": 137, "cancelled": 143}
"""A remote run's end as this command's exit status, when the host did not give its code."""


def _parent(root: StateRoot) -> str:
    from runtime.runs.ownership import current_principal

    principal = current_principal(root).id
    if not principal.startswith("run:"):
        raise BadInput(
            "`actors host step` runs a run's command on a host, from inside that run",
            hint='name the host on the recipe node ("host": "NAME") or use spawn --host',
        )
    return principal[4:]


MAX_STEP_BYTES = 1 << 20
"""The longest request (the command's words) a step reads on its stdin."""


def read_step(data: bytes) -> list[str]:
    """The command's words from the runner's request on stdin (one line otherwise)."""
    from runtime.core.bounded_json import Undecodable, decode

    try:
        found = decode(data, max_bytes=MAX_STEP_BYTES)
    except Undecodable:
        found = None
    argv = found.get("argv") if isinstance(found, dict) else None
    if not isinstance(argv, list) or not argv or not all(isinstance(w, str) for w in argv):
        raise BadInput(
            "`actors host step` reads the command's words on stdin, as the runner sends them",
            hint='name the host on the recipe node ("host": "NAME") or use spawn --host',
        )
    return argv


def _secret_texts(root: StateRoot, parent: str) -> list[str]:
    """This run's secret values (run.json: named like credentials, or marked secret),
    longest first, so a word holding two overlapping ones is cut at the longer."""
    from runtime.compiler.placeholders import value_text
    from runtime.compiler.redact import MIN_SECRET, is_secret_name
    from runtime.store.reads import read_json

    run = read_json(root.run(parent).run_json)
    run = run if isinstance(run, dict) else {}
    values = run.get("values")
    values = values if isinstance(values, dict) else {}
    names = set(run.get("secret_names") or [])
    texts = {
        value_text(v)
        for k, v in values.items()
        if (k in names or is_secret_name(k)) and len(value_text(v)) >= MIN_SECRET
    }
    return sorted(texts, key=len, reverse=True)


def remote_template(argv: list[str], hidden: list[str]) -> tuple[str, list[str], list[str]]:
    """The template, `-v` values and secret names that run `argv` on the host: each word
    one argument there, cut into placeholders `{wI_J}` at every secret in `hidden`, whose
    parts are values marked secret (the host masks exactly them)."""
    cut = re.compile("(" + "|".join(map(re.escape, hidden)) + ")") if hidden else None
    words, values, secret_names = [], [], []
    for i, word in enumerate(argv):
        parts = [p for p in cut.split(word) if p] if cut is not None else [word]
        names = []
        for j, part in enumerate(parts or [""]):
            name = f"w{i}_{j}"
            names.append(f"{{{name}}}")
            values.append(f"{name}={part}")
            if part in hidden:
                secret_names.append(name)
        words.append("".join(names))
    return " ".join(words), values, secret_names


def run_step(root: StateRoot, name: str, source: IO[bytes]) -> int:
    """Place the command read on `source` (stdin) on host `name` as a run of this run,
    wait for its end here, and exit with its status; killed there first when stopped."""
    from runtime.hosts.spawning import HostRemoved, spawn_remote
    from runtime.messaging.doorbells import doorbell
    from runtime.runs.spawn import SpawnOptions
    from runtime.store.writes import write_bytes_atomic

    parent = _parent(root)  # first: outside a run, nothing waits for a stdin
    host = Host.load(root, name)
    argv = read_step(source.read(MAX_STEP_BYTES + 1))
    run_id = f"{parent[:48]}-{short_suffix()}"
    template, values, secret_names = remote_template(argv, _secret_texts(root, parent))
    request = SpawnOptions(
        template=template,
        as_=f"run:{run_id}",
        values=tuple(values),
        secrets=tuple(secret_names),
    )
    write_bytes_atomic(root.run(parent).placed_on_hosts, b"")  # before: a kill reaps it
    stop_r, stop_w = os.pipe()
    os.set_blocking(stop_w, False)
    signal.set_wakeup_fd(stop_w)
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda *_: None)  # the wakeup fd says it; the loop acts
    pause_point("hosts.step.before_doorbells")
    with contextlib.ExitStack() as stack:
        # open first (an early end still rings), on a host still recorded: under its
        # placing lock, so a `host rm` meanwhile is NotFound here (one line), and its
        # `hosts/<name>/` is never made again by the bell (a ghost); one removed after
        # rings the bell as it goes (records.forget_host)
        with host_held(root, name) as paths:
            bell = stack.enter_context(doorbell(paths.doorbells))
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # its address is not our output
                code = spawn_remote(root, name, request)
        except HostRemoved:  # `host rm` while it was starting there: said below
            code = 0
        if code != 0:
            return code
        while (placed := placement(root, name, run_id)) is not None and placed["state"] != "ended":
            ready, _, _ = select.select([bell, stop_r], [], [])
            if stop_r in ready:
                stop_remote(host, run_id)
                return 143
            with contextlib.suppress(BlockingIOError):
                os.read(bell, 65536)
    if placed is None:
        sys.stderr.write(
            f"actors: host {name} was removed (host rm --force) while run:{name}/{run_id} "
            "was out; it goes on there, unreported\n"
        )
        return 1
    return _report(host, run_id, placed.get("status", ""))


def _report(host: Host, run_id: str, status: str) -> int:
    """The remote run's output as this command's, and its exit status (its code there
    when the host answers, else what its status says)."""
    from runtime.core.bounded_json import decode

    code = EXIT_OF.get(status, 1)
    with contextlib.suppress(ActorsError, OSError, ValueError):
        done = host.run(["result", "--json", f"run:{run_id}"], timeout=60)
        found = decode(done.stdout, max_bytes=1 << 22) if done.returncode == 0 else None
        if isinstance(found, dict):
            if isinstance(found.get("code"), int):
                code = exit_status(found["code"])
            if isinstance(found.get("output"), str):
                sys.stdout.write(found["output"])
    return code


def exit_status(code: int) -> int:
    """The remote run's code as this command's exit status: 0-255 as it is, a signal's
    negative code as a shell says it (-9: 137), anything else (the host's word: 256
    would read as success) 1."""
    if 0 <= code <= 255:
        return code
    return 128 - code if -64 < code < 0 else 1


def stop_remote(host: Host, run_id: str) -> bool:
    """Kill the run on its host (the host's own kill: its whole tree there); its
    placement ends here. A run the host does not know (never started there) ends as
    `lost`. False when the host said no (it had ended: its end comes home)."""
    argv = ["kill", "--session", host.record["session"], f"run:{run_id}"]
    done = host.run(argv, timeout=60)
    if done.returncode != 0:
        end_if_unknown(host.root, host.name, run_id, done.stderr)
        return False
    end_placement(host.root, host.name, run_id, "killed")
    return True


def reap(root: StateRoot, parent: str) -> list[str]:
    """`actors host reap RUN`: `stop_placed`, only once RUN has ended (its result.json).
    Its designed callers, the run's end and the fold of its dead runner, come after that;
    before, anyone could kill a live run's workers through it, under any session (`kill`
    and `cancel` check the caller owns the run, then call `stop_placed` themselves)."""
    from runtime.store.layout import check_id

    if not root.run(check_id(parent, "run id")).result.exists():
        raise Conflict(
            f"run {parent} has not ended: the runs it placed on hosts are still its own",
            hint=f"stop the run itself: actors kill run:{parent}",
        )
    return stop_placed(root, parent)


def stop_placed(root: StateRoot, parent: str) -> list[str]:
    """Kill on its host every run `parent` placed there that is still out. The ones that
    could not be killed (the host unreachable), with why."""
    owner = f"run:{parent}"
    problems = []
    for record in list_hosts(root):
        host = Host(root, record)
        for placed in outstanding(root, record["name"]):
            if placed["session"] != owner:
                continue
            try:
                stop_remote(host, placed["run"])
            except ActorsError as err:
                problems.append(f"run:{host.name}/{placed['run']}: {one_line(err.message, 200)}")
    return problems
