"""A second outside probe of hosts over SSH: a damaged outbox, what a host says of a
run's end, a connection cut after the host started a run, a remote verb that hangs, two
`host add` of one name at once, and answers too large to hold. Each was found breaking
a promise of docs/hosts.md; the hosts are the real sshd hosts of tests/hosts/netns.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.store.layout import StateRoot
from tests.conftest import cli, make_fifo, read_fifo_line
from tests.hosts.netns import SshHost
from tests.hosts.test_attack_hosts import _fake_host

# -- what this root keeps of a host --------------------------------------------------------


def test_a_damaged_outbox_is_skipped_not_a_traceback(home: StateRoot) -> None:
    """Lines of the host's outbox that are not a whole message (a field missing, one of
    the wrong type, a list, a torn tail) are skipped: `message` still queues its own and
    says so in one line (exit 0), never an internal error."""
    from runtime.hosts.host import Host
    from runtime.hosts.outbox import pending
    from runtime.hosts.records import place

    _fake_host(home)
    place(home, "evil", "run-x", "coord")
    home.host("evil").outbox.write_text(
        '{"key":"k1","run":"run-x"}\n'
        "[1,2]\n"
        '{"key":"k2","run":"run-x","state":"queued"}\n'
        '{"key":"k3","run":7,"state":"queued","type":"note","body":1,"summary":null,'
        '"reply_to":null,"force":false,"sender":"coord","queued_at":""}\n'
        '{"key":"k4","run":"run-x","state":"queued","type":"note","body":1,"summ'
    )
    done = cli("message", "run:evil/run-x", "note", "hi", "--session", "coord")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("queued for evil (unreachable)"), done.stdout
    assert "internal error" not in done.stderr
    [mine] = pending(Host.load(home, "evil"))
    assert mine["body"] == "hi"


@pytest.mark.parametrize(
    "url",
    [
        "ssh://build:hunter2secret@10.0.0.7",
        "ssh://:hunter2secret@h:22",
        "ssh://a:hunter2secret@[::1]",
    ],
)
def test_a_password_in_a_host_address_is_refused_unechoed(home: StateRoot, url: str) -> None:
    """`ssh://user:PASSWORD@host` is refused (ssh logs in with keys) in one line that
    does not repeat the password, and nothing is kept."""
    done = cli("host", "add", "h1", url)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "carries no password" in done.stderr
    assert "hunter2secret" not in done.stderr + done.stdout
    assert not home.hosts.exists() or not any(home.hosts.iterdir())


def test_a_session_that_succeeded_the_placer_controls_its_remote_run(
    home: StateRoot, tmp_path: Path
) -> None:
    """After Claude Code's /clear the new session id is the same principal as the old
    (runtime.delivery.succession): it may kill the old id's runs, local and placed on a
    host alike, without --force; a stranger may not."""
    from runtime.hosts.records import place
    from runtime.hosts.verbs import remote_json
    from tests.actors.test_succession import NEW, OLD, OTHER, session_start

    _fake_host(home)
    session_start(OLD, "startup", tmp_path)
    place(home, "evil", "run-old", OLD)
    session_start(NEW, "clear", tmp_path)
    stranger = cli("kill", "run:evil/run-old", "--session", OTHER)
    refusal = f"run:evil/run-old belongs to {OLD}, not {OTHER}; refusing to kill it"
    assert stranger.returncode == 2 and refusal in stranger.stderr, stranger.stderr
    successor = cli("kill", "run:evil/run-old", "--session", NEW)
    # past the owner's check, to the host (which nothing answers here): one line, exit 3
    assert successor.returncode == 3, successor.stderr
    assert "cannot be reached" in successor.stderr and "belongs to" not in successor.stderr
    from runtime.hosts.ssh import HostUnreachable
    from runtime.runs.ownership import Principal

    with pytest.raises(HostUnreachable):
        remote_json(home, "run:evil/run-old", "kill", principal=Principal(NEW))


@pytest.mark.parametrize(
    "damaged",
    [
        {"run": "run-q"},
        {"run": "run-q", "session": "coord", "state": "placed", "placed_at": 5},
        {"run": "run-q", "session": "coord", "state": "ended", "placed_at": "", "status": {}},
        {"run": "other", "session": "coord", "state": "placed", "placed_at": ""},
        ["run-q"],
    ],
)
def test_a_damaged_placement_is_one_line_and_hides_no_other_run(
    home: StateRoot, damaged: object
) -> None:
    """A placement file that is not one (a field missing or of the wrong type, another
    run's record, not an object): `ls` lists the other runs, a verb on its address says
    it is damaged in one line, never an internal error."""
    from runtime.hosts.records import place

    _fake_host(home)
    place(home, "evil", "run-ok", "coord")
    path = home.host("evil").placement("run-q")
    path.write_text(json.dumps(damaged))
    path.chmod(0o600)
    listed = cli("ls", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [r["run"] for r in json.loads(listed.stdout)] == ["run:evil/run-ok"]
    for verb in ("kill", "status", "message"):
        args = ["note", "hi"] if verb == "message" else []
        done = cli(verb, "run:evil/run-q", *args, "--session", "coord")
        assert done.returncode == 2, done.stderr
        assert done.stderr.count("\n") == 1 and "is damaged" in done.stderr, done.stderr


@pytest.mark.parametrize(
    ("said", "kind", "shown"),
    [
        ("\x1b]0;pwned\x07done" + "A" * 5000, "run.done", "done"),
        ({"x": [1] * 10}, "run.failed", "failed"),
        ("placed", "run.done", "done"),
        (None, "run.exited", "exited"),
        ("killed", "run.failed", "killed"),
    ],
)
def test_a_runs_end_as_the_host_says_it_is_a_status(
    home: StateRoot, said: object, kind: str, shown: str
) -> None:
    """The status a host sends with a run's terminal follow-up becomes the placement's
    status here (`ls`, the dashboard, a step's exit status): only a run's final status
    is taken, anything else (huge, control characters, not text, `placed`) is the one
    its follow-up's type says."""
    from runtime.hosts.host import Host
    from runtime.hosts.link import accept
    from runtime.hosts.records import end_placement, placement

    _fake_host(home)
    place_and_end = accept  # the link's own path: accept, then end the placement
    from runtime.hosts.records import place

    place(home, "evil", "run-y", "coord")
    envelope = {"from": "run:run-y", "type": kind, "body": {"status": said}}
    accepted = place_and_end(Host.load(home, "evil"), {"id": "e1", "envelope": envelope})
    assert accepted.ended is not None
    end_placement(home, "evil", *accepted.ended)
    found = placement(home, "evil", "run-y")
    assert found is not None and found["state"] == "ended" and found["status"] == shown
    [row] = json.loads(cli("ls", "--json").stdout)
    assert row["status"] == shown


@pytest.mark.parametrize("run_id", ["test", "t", "result", "done"])
def test_a_followup_names_its_run_by_address_and_leaves_the_runs_words(
    home: StateRoot, run_id: str
) -> None:
    """`--as test` and a run whose result reads `make test ok`: the follow-up that comes
    home names the run `run:<host>/test` where the host's words name it (its headline,
    its next step), and the run's own quoted words are as it wrote them."""
    from runtime.delivery.sessions import SessionInbox
    from runtime.hosts.host import Host
    from runtime.hosts.link import accept
    from runtime.hosts.records import place
    from runtime.store.layout import session_paths

    _fake_host(home)
    place(home, "evil", run_id, "coord")
    said = f'"make {run_id} ok: actors result {run_id}, run:{run_id} done"'
    envelope = {
        "from": f"run:{run_id}",
        "type": "run.done",
        "summary": f"Run {run_id} done: {said}; next: actors result {run_id}",
        "body": {"status": "done", "next": f"actors result {run_id}  (inspect only if)"},
    }
    accept(Host.load(home, "evil"), {"id": "e1", "envelope": envelope})
    [entry] = SessionInbox(session_paths(home, "coord")).unread()
    address = f"run:evil/{run_id}"
    assert entry["envelope"]["summary"] == (
        f"Run {address} done: {said}; next: actors result {address}"
    )
    assert entry["envelope"]["body"]["next"] == f"actors result {address}  (inspect only if)"


# -- a hostile or broken remote `actors`, over a real sshd host ------------------------------

PROBE = """#!/bin/sh
# the host's actors, except where {mode} names a verb to answer otherwise
mode=$(cat {mode})
verb=$1
[ "$1" = host ] && verb="host-$2"
case "$mode:$verb" in
  cut:host-spawn)
    actors "$@" >/dev/null
    # the run is started there: now the connection dies before its answer comes back
    p=$$
    while [ "$(cat /proc/$p/comm)" != sshd ]; do p=$(cut -d' ' -f4 /proc/$p/stat); done
    kill -KILL "$p"; exit 0 ;;
  gate:host-spawn)
    actors "$@"
    echo $$ > {hung}; read go < {gate}; exit 0 ;;
  garbage:host-spawn)
    actors "$@" >/dev/null
    # the run is started there, and the answer is no JSON (exit status 0 all the same)
    echo 'spawned, probably {{'; exit 0 ;;
  code256:result) printf '{{"code": 256, "status": "failed", "output": "x"}}\n'; exit 0 ;;
  hang:status|hang:result|hang:kill) echo $$ > {hung}; exec sleep 31999 ;;
  gate:--version) echo $$ > {hung}; read go < {gate}; exec actors "$@" ;;
  huge:--version|huge:status) echo 'actors, version 0'; exec head -c 400000000 /dev/zero ;;
esac
exec actors "$@"
"""


def _probe_script(tmp_path: Path) -> tuple[Path, Path, Path]:
    """The script (visible inside the hosts' namespaces), its mode file and a FIFO it
    writes to once it hangs."""
    mode = tmp_path / "mode"
    mode.write_text("pass")
    hung = make_fifo(tmp_path / "hung")
    gate = make_fifo(tmp_path / "gate-version")
    script = tmp_path / "probe-actors"
    script.write_text(PROBE.format(mode=mode, hung=hung, gate=gate))
    script.chmod(0o755)
    tmp_path.chmod(0o755)
    return script, mode, hung


def _release(gate: Path) -> None:
    """The script waiting on `gate` goes on (nothing when none waits there)."""
    import contextlib
    import os

    with contextlib.suppress(OSError):
        fd = os.open(gate, os.O_WRONLY | os.O_NONBLOCK)
        os.write(fd, b"go\n")
        os.close(fd)


@pytest.fixture
def probe_host(
    ssh_home: StateRoot, ssh_hosts: list[SshHost], tmp_path: Path
) -> tuple[SshHost, Path, Path]:
    host = ssh_hosts[0]
    script, mode, hung = _probe_script(tmp_path)
    added = cli("host", "add", host.name, host.url, "--actors", str(script))
    assert added.returncode == 0, added.stderr
    return host, mode, hung


def test_a_spawn_cut_after_the_host_started_it_is_neither_lost_nor_doubled(
    probe_host: tuple[SshHost, Path, Path], ssh_home: StateRoot, tmp_path: Path
) -> None:
    """The connection dies after the host started the run, before its answer came back:
    the sender cannot know whether it started, so the placement stays (the run's end
    comes home over the link, once), the one line says so, and a retry under the same
    --as is refused instead of starting it twice."""
    host, mode, _ = probe_host
    mode.write_text("cut")
    gate, ready = make_fifo(tmp_path / "gate"), make_fifo(tmp_path / "ready")
    template = f"sh -c 'echo up > {ready}; cat {gate}'"
    args = ["spawn", "--host", host.name, "--as", "run-cut", "-t", template]
    done = cli(*args, "--session", "coord")
    assert done.returncode == 3, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1 and "run:alpha/run-cut" in done.stderr, done.stderr
    assert read_fifo_line(ready) == "up"  # it runs there
    mode.write_text("pass")
    again = cli(*args, "--session", "coord")
    assert again.returncode == 2 and "already placed" in again.stderr, again.stderr
    with open(gate, "w") as w:
        w.write("released\n")
    assert cli("inbox", "wait", "--session", "coord", "--timeout", "60").returncode == 0
    [envelope] = json.loads(cli("inbox", "read", "--session", "coord", "--json").stdout)
    assert envelope["from"] == "run:alpha/run-cut" and envelope["type"] == "run.done"
    assert "released" in cli("result", "run:alpha/run-cut").stdout


def test_a_spawn_answered_with_garbage_keeps_the_run_placed_as_unknown(
    probe_host: tuple[SshHost, Path, Path], ssh_home: StateRoot, tmp_path: Path
) -> None:
    """The host's `host spawn` started the run and exited 0, but its answer is no JSON:
    the host's word is unreadable, not a "no". The placement is kept (never dropped as
    if the run were gone), `ls` shows the run `unknown` naming the host, the sender is
    told in one line naming the host and the address, a retry under the same --as is
    refused (not started twice), and the run's end comes home once."""
    from runtime.hosts.records import placement

    host, mode, _ = probe_host
    mode.write_text("garbage")
    gate, ready = make_fifo(tmp_path / "gate"), make_fifo(tmp_path / "ready")
    template = f"sh -c 'echo up > {ready}; cat {gate}'"
    args = ["spawn", "--host", host.name, "--as", "run-garbled", "-t", template]
    done = cli(*args, "--session", "coord")
    assert read_fifo_line(ready) == "up"  # it runs there
    try:
        found = placement(ssh_home, host.name, "run-garbled")
        assert found is not None and found["state"] == "placed", found
        assert done.returncode == 3, done.stdout + done.stderr
        assert done.stderr.count("\n") == 1, done.stderr
        assert "host alpha's actors answered spawn" in done.stderr, done.stderr
        assert "run:alpha/run-garbled is kept here as unknown" in done.stderr, done.stderr
        [row] = json.loads(cli("ls", "--json").stdout)
        assert row["run"] == "run:alpha/run-garbled" and row["status"] == "unknown", row
        assert "host alpha" in row["damaged"], row
        assert "unknown (damaged: alpha's answer)" in cli("ls").stdout
        mode.write_text("pass")
        again = cli(*args, "--session", "coord")
        assert again.returncode == 2 and "already placed" in again.stderr, again.stderr
    finally:
        with open(gate, "w") as w:  # it is at its `cat` (it wrote `up` just before)
            w.write("released\n")
    assert cli("inbox", "wait", "--session", "coord", "--timeout", "60").returncode == 0
    [envelope] = json.loads(cli("inbox", "read", "--session", "coord", "--json").stdout)
    assert envelope["from"] == "run:alpha/run-garbled" and envelope["type"] == "run.done"
    [row] = json.loads(cli("ls", "--json").stdout)
    assert row["status"] == "done" and not row.get("damaged"), row


def test_a_spawn_interrupted_after_the_host_started_it_is_not_lost(
    probe_host: tuple[SshHost, Path, Path], ssh_home: StateRoot, tmp_path: Path
) -> None:
    """Ctrl-C while `spawn --host` waits for the host's answer, the run started there:
    the placement stays (its end comes home), one line says it may have started, and
    the sender's exit status is an interrupt's (130)."""
    import signal

    host, mode, hung = probe_host
    mode.write_text("gate")
    argv = ["spawn", "--host", host.name, "--as", "run-int", "-t", "echo interrupted-run"]
    call = subprocess.Popen(
        [sys.executable, "-m", "actors", *argv, "--session", "coord"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        read_fifo_line(hung)  # started there; its answer held back
        call.send_signal(signal.SIGINT)
        out, err = call.communicate(timeout=30)
    finally:
        call.kill()
        _release(tmp_path / "gate-version")
    assert call.returncode == 130, out + err
    assert err.count("\n") == 1 and "interrupted, while starting run:alpha/run-int" in err, err
    assert cli("inbox", "wait", "--session", "coord", "--timeout", "60").returncode == 0
    [envelope] = json.loads(cli("inbox", "read", "--session", "coord", "--json").stdout)
    assert envelope["from"] == "run:alpha/run-int" and envelope["type"] == "run.done"


@pytest.mark.parametrize("verb", ["status", "result", "kill", "status-on-a-terminal"])
def test_a_remote_verb_that_hangs_times_out_in_one_line(
    probe_host: tuple[SshHost, Path, Path],
    ssh_home: StateRoot,
    verb: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The host's actors answers nothing (stuck, or hostile): a verb that answers at once
    locally is given ACTORS_HOST_TIMEOUT, then says so in one line (exit 3), not hang,
    its output a pipe or this terminal; a kill not answered leaves the run placed."""
    import os

    from runtime.hosts.records import place, placement
    from tests.actors.test_grammar import _in_pty

    host, mode, hung = probe_host
    place(ssh_home, host.name, "run-h", "coord")
    mode.write_text("hang")
    monkeypatch.setenv("ACTORS_HOST_TIMEOUT", "2")
    argv = [sys.executable, "-m", "actors", verb.split("-")[0], "--session", "coord"]
    argv.append(f"run:{host.name}/run-h")
    if verb == "status-on-a-terminal":
        # the script blocks on its FIFO until read below: hung all the same
        err, _, code = _in_pty(argv, dict(os.environ))
        stuck = read_fifo_line(hung)
    else:
        call = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        stuck = read_fifo_line(hung)  # the host's actors is hanging now
        try:
            out, err = call.communicate(timeout=20)
        finally:
            call.kill()
        code = call.returncode
        assert out == ""
    host.ns_run("kill", "-KILL", stuck)
    assert code == 3, err
    assert err.strip().count("\n") == 0 and "Traceback" not in err, err
    assert f"host alpha did not answer `{verb.split('-')[0]}` within 2s" in err, err
    found = placement(ssh_home, host.name, "run-h")
    assert found is not None and found["state"] == "placed"


MEMORY_LIMIT = 1 << 30
"""The address space the command is given: ample for actors (a few hundred MB with
ssh's), not for a host's answer of 400 MB held whole (three copies of it, at least)."""


def _limited() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


@pytest.mark.parametrize("path", ["host add", "status for a model"])
def test_an_answer_too_large_to_hold_is_refused_in_one_line(
    ssh_home: StateRoot, ssh_hosts: list[SshHost], tmp_path: Path, path: str
) -> None:
    """A host's actors that answers 400 MB (a version line, then zeros): what is read of
    an answer is bounded (docs/hosts.md), so the command says so in one line and its
    memory stays small, instead of holding it all (or dying of it). `status for a model`
    is the path the MCP tools and the dashboard take (runtime.hosts.verbs)."""
    from runtime.hosts.records import place

    host = ssh_hosts[1]
    script, mode, _ = _probe_script(tmp_path)
    if path == "host add":
        mode.write_text("huge")
        argv = ["-m", "actors", "host", "add", host.name, host.url, "--actors", str(script)]
    else:
        added = cli("host", "add", host.name, host.url, "--actors", str(script))
        assert added.returncode == 0, added.stderr
        place(ssh_home, host.name, "run-big", "coord")
        mode.write_text("huge")
        call = f"""
import sys
from runtime.core.errors import ActorsError
from runtime.hosts.verbs import remote_json
from runtime.runs.ownership import Principal
from runtime.store.layout import StateRoot
try:
    remote_json(
        StateRoot.from_env(), "run:{host.name}/run-big", "status", principal=Principal("coord")
    )
except ActorsError as err:
    sys.exit(f"actors: {{err}}")
"""
        argv = ["-c", call]
    done = subprocess.run(
        [sys.executable, *argv],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_limited,
        check=False,
    )
    assert done.returncode == (2 if path == "host add" else 1), done.stderr[-2000:]
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert f"host {host.name}'s actors answered with more than" in done.stderr, done.stderr


def test_two_adds_of_one_host_at_once_keep_the_first_record(
    ssh_home: StateRoot, ssh_hosts: list[SshHost], tmp_path: Path
) -> None:
    """A second `host add` of a name that another add finished while this one checked
    the host: refused in one line (exit 2), the first record kept whole (its session
    owns the runs placed there), not overwritten nor removed with the loser's leftovers."""
    host = ssh_hosts[0]
    script, mode, hung = _probe_script(tmp_path)
    mode.write_text("gate")
    slow = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "actors",
            "host",
            "add",
            host.name,
            host.url,
            "--actors",
            str(script),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        read_fifo_line(hung)  # the slow add is checking the host's version now
        fast = cli("host", "add", host.name, host.url)
        assert fast.returncode == 0, fast.stderr
        first = json.loads(ssh_home.host(host.name).record.read_text())
        _release(tmp_path / "gate-version")
        out, err = slow.communicate(timeout=60)
    finally:
        slow.kill()
    assert slow.returncode == 2, out + err
    assert err.count("\n") == 1 and f"host '{host.name}' was added meanwhile" in err, err
    assert json.loads(ssh_home.host(host.name).record.read_text()) == first
    assert cli("host", "ls").stdout.count(host.name) == 1


def test_a_host_removed_while_a_swarms_worker_is_out_ends_the_worker_not_the_wait(
    ssh_home: StateRoot, ssh_hosts: list[SshHost], tmp_path: Path
) -> None:
    """`host rm --force` while a swarm's worker is out there: the worker's step, asleep
    on the host's doorbell, wakes and fails with the reason, so the swarm ends (it does
    not wait for ever for an end no link will carry home); the worker goes on there."""
    from tests.hosts.test_host_swarm import swarm
    from tests.hosts.test_hosts import add

    host = ssh_hosts[0]
    add(host)
    gate, ready = make_fifo(tmp_path / "gate"), make_fifo(tmp_path / "ready")
    run = swarm("workers=1", "hosts=alpha", f"cmd=echo up > {ready}; cat {gate}")
    try:
        assert read_fifo_line(ready) == "up"
        removed = cli("host", "rm", host.name, "--force")
        assert removed.returncode == 0, removed.stderr
        waited = cli("wait", f"run:{run}", "--timeout", "30")
        assert waited.returncode not in (0, 75), waited.stdout + waited.stderr
        said = cli("result", f"run:{run}").stdout + cli("status", f"run:{run}").stdout
        assert "host alpha was removed" in said, said
        assert any(f"cat {gate}" in p for p in host.processes())  # it goes on there
    finally:
        _release(gate)


def test_without_actors_ssh_config_ssh_reads_your_own(
    ssh_hosts: list[SshHost], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ACTORS_SSH_CONFIG unset (as for anyone who never heard of it): ssh reads the
    user's own ~/.ssh/config, never `-F unset`. The user's home gets a ~/.ssh/config
    (an overlay on it, in a private mount namespace: nothing of the real home changes),
    naming this session's key and the hosts' keys."""
    import shutil

    from runtime.hosts.ssh import ssh_argv
    from runtime.store.layout import StateRoot

    monkeypatch.delenv("ACTORS_SSH_CONFIG", raising=False)
    monkeypatch.setenv("ACTORS_HOME", str(tmp_path / "state"))
    argv = ssh_argv(StateRoot.from_env().host("alpha"), "", "h", 22)
    assert "-F" not in argv
    if not shutil.which("unshare"):
        pytest.skip("no unshare(1)")
    host = ssh_hosts[0]
    key = host.base.parent / "id_ed25519"
    dot_ssh = tmp_path / "dot-ssh"
    dot_ssh.mkdir(mode=0o700)
    (dot_ssh / "known_hosts").write_text((host.base / "known_hosts").read_text())
    (dot_ssh / "config").write_text(
        f"Host *\n  IdentityFile {key}\n  IdentitiesOnly yes\n"
        f"  UserKnownHostsFile {dot_ssh / 'known_hosts'}\n  GlobalKnownHostsFile /dev/null\n"
    )
    (dot_ssh / "config").chmod(0o600)
    home = Path.home()
    upper, work = tmp_path / "upper", tmp_path / "work"
    upper.mkdir()
    work.mkdir()
    script = (
        f"mount -t overlay overlay -o lowerdir={home},upperdir={upper},workdir={work} {home}"
        f" && mkdir -p -m 0700 {home}/.ssh && cp -p {dot_ssh}/config {home}/.ssh/ && "
        f'exec "$0" -m actors host add {host.name} {host.url}'
    )
    done = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, sys.executable],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"host {host.name}: {host.address} actors "), done.stdout
    subprocess.run(
        ["ssh", "-o", f"ControlPath={tmp_path / 'state' / 'hosts' / host.name / 'ssh.sock'}",
         "-O", "exit", "x"],
        capture_output=True, timeout=10, check=False,
    )  # fmt: skip


def _before_placing(argv: list[str], barrier: Path) -> subprocess.Popen[str]:
    """`actors ARGV` (a spawn --host) that stops just before it places its run
    (ACTORS_PAUSE_AT), its pid and the point written to `barrier`; SIGCONT goes on."""
    from tests.hosts.test_host_leftovers import _paused_at

    return _paused_at("hosts.spawn.before_place", barrier, argv)


def test_host_rm_while_a_spawn_places_a_run_there_leaves_no_ghost(
    ssh_home: StateRoot, ssh_hosts: list[SshHost], tmp_path: Path
) -> None:
    """`host rm` (no --force: nothing is out yet) while a `spawn --host` is about to place
    its run there: the spawn finds the host gone (one line, exit 2), nothing starts on
    the host, and no `hosts/<name>/` is made again by its write (a ghost whose placement
    a later `host add` of the name would count as out for ever)."""
    import os
    import signal

    from tests.hosts.test_hosts import add

    host = ssh_hosts[1]
    add(host)
    barrier = make_fifo(tmp_path / "barrier")
    argv = ["spawn", "--host", host.name, "--as", "ghost-run", "-t", "echo ghost-ran"]
    with _before_placing([*argv, "--session", "coord"], barrier) as spawning:
        pid, point = read_fifo_line(barrier, timeout=60).split()
        assert point == "hosts.spawn.before_place"
        removed = cli("host", "rm", host.name)
        assert removed.returncode == 0, removed.stderr
        os.kill(int(pid), signal.SIGCONT)
        out, err = spawning.communicate(timeout=60)
    assert spawning.returncode == 2, out + err
    assert err.count("\n") == 1 and f"no host '{host.name}'" in err, err
    assert not ssh_home.host(host.name).dir.exists()
    assert not any("ghost-ran" in p or "ghost-run" in p for p in host.processes())
    assert not (host.state / "runs" / "ghost-run").exists()


def test_two_spawns_as_one_id_at_once_lose_neither_run(
    ssh_home: StateRoot, ssh_hosts: list[SshHost], tmp_path: Path
) -> None:
    """Two `spawn --host --as X` at once, both past the check that X is not placed yet:
    the later to place is refused in one line before anything reaches the host, and
    cannot take the first's placement with it; the first's run comes home once."""
    import os
    import signal

    from tests.hosts.test_hosts import add

    host = ssh_hosts[1]
    add(host)
    barrier = make_fifo(tmp_path / "barrier")
    argv = ["spawn", "--host", host.name, "--as", "twin", "--session", "coord", "-t"]
    with _before_placing([*argv, "echo second"], barrier) as late:
        pid, _ = read_fifo_line(barrier, timeout=60).split()
        first = cli(*argv, "echo first")
        assert first.returncode == 0, first.stderr
        os.kill(int(pid), signal.SIGCONT)
        out, err = late.communicate(timeout=60)
    assert late.returncode == 2, out + err
    assert err.count("\n") == 1 and "already placed" in err, err
    assert cli("inbox", "wait", "--session", "coord", "--timeout", "60").returncode == 0
    [envelope] = json.loads(cli("inbox", "read", "--session", "coord", "--json").stdout)
    assert envelope["from"] == "run:beta/twin" and envelope["type"] == "run.done"
    assert "first" in cli("result", "run:beta/twin").stdout


def test_host_rm_with_a_stuck_master_connection_is_not_a_traceback(
    ssh_home: StateRoot, ssh_hosts: list[SshHost]
) -> None:
    """The host's ssh master stopped (SIGSTOP: as stuck as a master gets): `host rm`
    gives up on closing it after its 10 s and removes the host, never an internal
    error."""
    import os
    import re
    import signal

    from tests.hosts.test_hosts import add

    host = ssh_hosts[0]
    add(host)
    socket = ssh_home.host(host.name).control_socket
    checked = subprocess.run(
        ["ssh", "-o", f"ControlPath={socket}", "-O", "check", "x"],
        capture_output=True, text=True, timeout=10, check=False,
    )  # fmt: skip
    found = re.search(r"pid=(\d+)", checked.stderr)
    assert found is not None, checked.stderr
    master = int(found[1])
    os.kill(master, signal.SIGSTOP)
    try:
        removed = cli("host", "rm", host.name)
    finally:
        os.kill(master, signal.SIGCONT)
        os.kill(master, signal.SIGTERM)  # its socket went with the host: nothing reaches it
    assert removed.returncode == 0, removed.stderr
    assert "internal error" not in removed.stderr
    assert not ssh_home.host(host.name).dir.exists()


def test_a_workers_code_from_its_host_never_reads_as_success(
    probe_host: tuple[SshHost, Path, Path], ssh_home: StateRoot
) -> None:
    """A swarm's worker failed there, and the host's `result` says code 256 (which, as
    an exit status, is 0): the worker's step is not a success, nor is the swarm."""
    _, mode, _ = probe_host
    mode.write_text("code256")
    done = cli("spawn", "swarm", "-v", "workers=1", "-v", "hosts=alpha", "-v", "cmd=exit 3",
               "--session", "coord", "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    run = json.loads(done.stdout)["run"]
    waited = cli("wait", f"run:{run}", "--timeout", "60")
    assert waited.returncode not in (0, 75), waited.stdout + waited.stderr
    status = json.loads(cli("status", f"run:{run}", "--json").stdout)
    assert status["status"] == "failed", status
