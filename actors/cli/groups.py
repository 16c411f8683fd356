"""`actors group`: named groups with a parallel limit (runtime.runner.slots), and
`actors group run`, which runs one command in a slot of one."""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

import click

from actors.cli._format import emit_json, table
from actors.cli._options import json_option
from runtime.core.terminal import cell
from runtime.store.layout import StateRoot


@click.group("group")
def group_group() -> None:
    """Named groups with a parallel limit: at most N of their members run at once.

    \b
    Examples:
      actors group set agents --parallel 4
      actors spawn build --group agents          # queued while 4 run
      actors group run agents -- claude -p "..."  # one command in a slot
      actors group ls
    """


@group_group.command("set")
@click.argument("name")
@click.option("--parallel", type=int, required=True, metavar="N", help="How many run at once.")
@json_option
def set_cmd(name: str, parallel: int, as_json: bool) -> None:
    """Create group NAME or change its limit (its queue looks again at once)."""
    from runtime.runner.slots import describe, set_limit

    paths = set_limit(StateRoot.from_env(), name, parallel)
    if as_json:
        emit_json(describe(paths))
    else:
        click.echo(f"group {name}: parallel {parallel}")


@group_group.command("ls")
@json_option
def ls_cmd(as_json: bool) -> None:
    """Each group: its limit, what runs in it and what waits, first come first."""
    from runtime.core.errors import ActorsError
    from runtime.runner.slots import describe, names

    root = StateRoot.from_env()
    groups: list[dict[str, Any]] = []
    for name in names(root):
        try:
            groups.append(describe(root.group(name)))
        except ActorsError as exc:  # one damaged group never hides the others
            groups.append({"group": name, "damaged": exc.message})
    if as_json:
        emit_json(groups)
        return
    if not groups:
        click.echo("no groups; create one with `actors group set NAME --parallel N`")
        return
    rows = [
        [
            cell(g["group"]),
            f"{len(g['running'])}/{g['parallel']}",
            str(len(g["queued"])),
            cell(", ".join(str(label) for label in g["running"]))[:60],
        ]
        if "damaged" not in g
        else [cell(g["group"]), "-", "-", cell(f"(damaged: {g['damaged']})")[:60]]
        for g in groups
    ]
    click.echo(table(rows, ["GROUP", "RUNNING", "QUEUED", "MEMBERS"]))


@group_group.command("rm")
@click.argument("name")
@click.option(
    "--force", is_flag=True, help="Remove it even with members (queued runs end skipped)."
)
def rm_cmd(name: str, force: bool) -> None:
    """Forget group NAME (refused while something runs or waits in it)."""
    from runtime.runner.slots import remove

    remove(StateRoot.from_env(), name, force=force)
    click.echo(f"group {name} removed")


@group_group.command(
    "run", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False}
)
@click.argument("name")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run_cmd(name: str, command: tuple[str, ...]) -> None:
    """Run COMMAND in a slot of group NAME: wait (first come, first served, no polling)
    until one is free, run it, give the slot back; exit with its status.

    \b
    Example (a swarm worker's agent step):
      actors group run agents -- claude -p "implement the next item"
    """
    words = list(command)
    if words[:1] == ["--"]:  # click keeps the separator when options are not parsed
        words = words[1:]
    sys.exit(run_in_slot(StateRoot.from_env(), name, words))


def run_in_slot(root: StateRoot, name: str, command: list[str]) -> int:
    """Wait for a slot, run `command` as a child (stdio inherited, stop signals passed
    on), give the slot back when it ends: its exit status, 128+N for signal N, or 127
    when it cannot start. The slot is this process's: if it dies, the kernel frees it."""
    import shutil
    import subprocess

    from runtime.core.errors import BadInput
    from runtime.runner.slots import wait_for_slot

    if not command:
        raise BadInput("give the command to run after --", hint=f"actors group run {name} -- CMD")
    if shutil.which(command[0]) is None:
        raise BadInput(
            f"cannot start {command[0]!r}: not found on PATH", hint="check the command's name"
        )
    from runtime.core import config

    who = os.environ.get(config.RUN_ID.name) or f"pid {os.getpid()}"
    label = f"{who}: {command[0]}"
    slot = wait_for_slot(root, name, label)
    try:
        try:
            child = subprocess.Popen(command)
        except OSError as exc:
            click.echo(f"error: cannot start {command[0]!r}: {exc.strerror}", err=True)
            return 127

        def forward(signum: int, frame: object) -> None:
            child.send_signal(signum)

        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, forward)
        code = child.wait()
        return 128 - code if code < 0 else code
    finally:
        slot.release()
