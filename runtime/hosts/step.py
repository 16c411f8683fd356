"""A run's command on a host: a recipe node that names a host (`"host": "{hosts}"`, so a
swarm's workers spread over hosts with `-v hosts=a,b`) runs its command there as a
remote run of this run, started through the same path as `spawn --host`.

The runner starts `actors host step NAME -- ARGV` in the command's place (a process
boundary: the runner sits below this room). The step places the remote run, owned by
this run (`run:<id>`, so its follow-ups come home over the host's link into this run's
inbox, once), then sleeps on the host's doorbell until the link has brought the run's
end home: no channel of its own is held to the host and nothing polls it. Its exit
status is the remote run's. Stopped (SIGTERM: a cancel, a `control.stop`, a node's
timeout), it kills the remote run on its host first.

A kill gives no step time to do that (SIGKILL), so the run's end does it: once any of a
run's commands went to a host (`placed-on-hosts` in its directory), its runner's end, or
the fold of a runner that died, starts `actors host reap RUN`, which kills on its host
every run placed by the run that is still out (`stop_placed`). A dropped link kills
nothing: the step waits on, the link reconnects, and the end comes home late.
"""

from __future__ import annotations

import contextlib
import io
import os
import secrets
import select
import signal
import string
import sys

from runtime.core.errors import ActorsError, BadInput
from runtime.core.terminal import one_line
from runtime.hosts.host import Host
from runtime.hosts.records import end_placement, list_hosts, outstanding, placement
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


def run_step(root: StateRoot, name: str, argv: list[str]) -> int:
    """Place `argv` on host `name` as a run of this run, wait for its end here, and exit
    with its status; killed there first when this is stopped."""
    from runtime.hosts.remote import spawn_remote
    from runtime.messaging.doorbells import doorbell
    from runtime.store.writes import ensure_dir, write_bytes_atomic

    if not argv:
        raise BadInput("give the command after --", hint=f"actors host step {name} -- CMD")
    parent = _parent(root)
    host = Host.load(root, name)
    suffix = "".join(secrets.choice(string.ascii_lowercase) for _ in range(6))
    run_id = f"{parent[:48]}-{suffix}"
    write_bytes_atomic(root.run(parent).placed_on_hosts, b"")  # before: a kill reaps it
    stop_r, stop_w = os.pipe()
    os.set_blocking(stop_w, False)
    signal.set_wakeup_fd(stop_w)
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda *_: None)  # the wakeup fd says it; the loop acts
    ensure_dir(host.paths.doorbells)
    with doorbell(host.paths.doorbells) as bell:  # open first: an early end still rings
        # each word one placeholder, its value one argument there, whatever it holds
        template = " ".join(f"{{a{i}}}" for i in range(len(argv)))
        values = [item for i, word in enumerate(argv) for item in ("-v", f"a{i}={word}")]
        with contextlib.redirect_stdout(io.StringIO()):  # its address is not our output
            code = spawn_remote(
                root, ["--host", name, "--as", f"run:{run_id}", "-t", template, *values]
            )
        if code != 0:
            return code
        while (placed := placement(root, name, run_id)) is not None and placed["state"] != "ended":
            ready, _, _ = select.select([bell, stop_r], [], [])
            if stop_r in ready:
                stop_remote(host, run_id)
                return 143
            with contextlib.suppress(BlockingIOError):
                os.read(bell, 65536)
    status = placed.get("status", "") if placed is not None else ""
    return _report(host, run_id, status)


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
                code = found["code"]
            if isinstance(found.get("output"), str):
                sys.stdout.write(found["output"])
    return code


def stop_remote(host: Host, run_id: str) -> bool:
    """Kill the run on its host (the host's own kill: its whole tree there); its
    placement ends here. False when the host said no (it had ended: its end comes home)."""
    argv = ["kill", "--session", host.record["session"], f"run:{run_id}"]
    done = host.run(argv, timeout=60)
    if done.returncode != 0:
        return False
    end_placement(host.root, host.name, run_id, "killed")
    return True


def stop_placed(root: StateRoot, parent: str) -> list[str]:
    """`actors host reap RUN`: kill on its host every run RUN placed there that is still
    out. The ones that could not be killed (the host unreachable), with why."""
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
