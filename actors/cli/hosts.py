"""`actors host add / ls / rm`, the two halves of a host's link (hidden: `host serve`
runs on the host, `host link` here), and what a host runs for `spawn --host` and a
message (hidden: `host spawn`, `host deliver`, each reading its request on stdin). A run
on a host is addressed `run:<host>/<id>`; those verbs are sent to the host by
actors.cli.__init__ before any parsing here."""

from __future__ import annotations

import sys

import click

from actors.cli._format import emit_json
from actors.cli._options import json_option
from runtime.store.layout import StateRoot


def _root() -> StateRoot:
    return StateRoot.from_env()


@click.group("host")
def host_group() -> None:
    """Other machines to run on, over your own ssh (docs/hosts.md)."""


@host_group.command("add")
@click.argument("name")
@click.argument("url", metavar="ssh://[user@]host[:port]")
@click.option(
    "--actors",
    "actors_cmd",
    default="actors",
    show_default=True,
    metavar="PATH",
    help="The actors command on the host.",
)
@click.option("--install", is_flag=True, help="Put this version of actors on the host first.")
@json_option
def host_add(name: str, url: str, actors_cmd: str, install: bool, as_json: bool) -> None:
    """Record host NAME once it answers over ssh with this version of actors."""
    from actors._version import __version__
    from runtime.hosts.remote import add_host

    record = add_host(_root(), name, url, version=__version__, actors=actors_cmd, install=install)
    if as_json:
        emit_json(dict(record))
    else:
        click.echo(f"host {name}: {record['address']} actors {record['version']}")


@host_group.command("ls")
@json_option
def host_ls(as_json: bool) -> None:
    """Each host: reachable now, its actors version, runs placed there still out."""
    from runtime.core.terminal import cell
    from runtime.hosts.remote import host_rows

    rows = host_rows(_root())
    if as_json:
        emit_json([row._asdict() for row in rows])
        return
    if not rows:
        click.echo("no hosts (add one: actors host add NAME ssh://[user@]host)")
        return
    click.echo(f"{'HOST':<16} {'ADDRESS':<28} {'REACHABLE':<10} {'VERSION':<10} RUNS")
    for row in rows:
        reach = "yes" if row.reachable else "no"
        click.echo(
            f"{cell(row.name):<16} {cell(row.address):<28} {reach:<10} "
            f"{cell(row.version or '-'):<10} {row.runs}"
            + (f"  ({cell(row.why)})" if row.why else "")
        )


@host_group.command("rm")
@click.argument("name")
@click.option("--force", is_flag=True, help="Even with runs still out there (not reported).")
def host_rm(name: str, force: bool) -> None:
    """Forget host NAME (its runs there are left alone)."""
    from runtime.hosts.remote import remove_host

    remove_host(_root(), name, force=force)
    click.echo(f"host {name} removed")


@host_group.command("serve", hidden=True)
@click.option("--session", required=True)
def host_serve(session: str) -> None:
    """On a host: stream SESSION's follow-ups to the coordinator's `host link`."""
    from runtime.hosts.link import serve
    from runtime.store.layout import check_id

    serve(_root(), check_id(session, "session id"), sys.stdout)


@host_group.command("link", hidden=True)
@click.argument("name")
def host_link(name: str) -> None:
    """Here: relay host NAME's follow-ups while runs placed there are out."""
    from runtime.hosts.link import relay

    relay(_root(), name)


@host_group.command("step", hidden=True)
@click.argument("name")
def host_step(name: str) -> None:
    """A run's command on host NAME (a recipe node's `host`): started by the runner, the
    command's words a JSON request on stdin (never in a command line)."""
    from runtime.hosts.step import run_step

    sys.exit(run_step(_root(), name, sys.stdin.buffer))


@host_group.command("reap", hidden=True)
@click.argument("run")
def host_reap(run: str) -> None:
    """Kill on their hosts the runs RUN placed there that are still out (its end: refused
    while RUN has not ended)."""
    from runtime.hosts.step import reap
    from runtime.store.layout import parse_run_ref

    for problem in reap(_root(), parse_run_ref(run)):
        click.echo(f"actors: could not stop {problem}", err=True)


@host_group.command("spawn", hidden=True)
def host_spawn() -> None:
    """On a host: start the run a coordinator's `spawn --host` sent as one JSON request
    on stdin (no value of it is ever in a command line), and answer as `spawn --json`."""
    from actors.cli._lifecycle import spawn
    from runtime.hosts.spawning import MAX_REQUEST_BYTES, read_wire, sent_recipe_path

    root = _root()
    wire = read_wire(sys.stdin.buffer.read(MAX_REQUEST_BYTES + 1))
    sent = sent_recipe_path(root, wire)
    spawn(
        recipe=sent or wire["recipe"],
        template=wire["template"],
        as_=wire["run"],
        values=wire["values"],
        secrets=wire["secrets"],
        session=wire["session"],
        group=wire["group"],
        after=wire["after"],
        as_json=True,
    )


@host_group.command("deliver", hidden=True)
@click.option("--session", required=True)
def host_deliver(session: str) -> None:
    """On a host: deliver the coordinator's queued messages (JSON lines on stdin) to the
    runs of SESSION, each key once, one answer line each."""
    from runtime.hosts.outbox import receive
    from runtime.store.layout import check_id

    receive(_root(), check_id(session, "session id"), sys.stdin.buffer, sys.stdout)
