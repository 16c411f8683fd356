"""The shipped `leases` recipe: a real lease-service run and real client runs and sessions
contending for paths; replies read where clients read them (a run's `actors recv`, the
service's room)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import actors
from runtime.store.layout import StateRoot
from tests.conftest import cli, finished, wait_for_change

# A client run: acquire PATH from the service, print the reply; with a third argument it
# then waits for `client.release` from the test, releases and prints that reply too.
CLIENT = (
    'sh -c \'actors message run:$1 lease.acquire "$2" --force >/dev/null'
    " && actors recv --type lease.granted --type lease.denied"
    ' && if [ -n "$3" ]; then actors recv --type client.release >/dev/null'
    ' && actors message run:$1 lease.release "$2" --force >/dev/null'
    " && actors recv --type lease.released; fi' client {service} {path} {hold=}"
)


def _service(ttl: str = "300") -> dict[str, Any]:
    record = actors.spawn("leases", values={"ttl": ttl})
    table = Path(record["state_dir"]) / "leases" / "leases.json"
    wait_for_change(Path(record["state_dir"]), table.exists, what="the lease table")
    return record


def _client(service: str, path: str, hold: str = "") -> dict[str, Any]:
    return actors.spawn(template=CLIENT, values={"service": service, "path": path, "hold": hold})


def _output(record: dict[str, Any]) -> str:
    return str(actors.result(record["run"])["output"])


def _room(service: dict[str, Any]) -> list[dict[str, Any]]:
    return list(actors.inspect(f"room:{service['run']}", view="messages")["messages"])


def _wait_room(service: dict[str, Any], kind: str, count: int = 1) -> list[dict[str, Any]]:
    def seen() -> list[dict[str, Any]]:
        return [m for m in _room(service) if m["type"] == kind]

    wait_for_change(
        Path(service["state_dir"]), lambda: len(seen()) >= count, what=f"{count} {kind}"
    )
    return seen()


def _table(service: dict[str, Any]) -> dict[str, Any]:
    path = Path(service["state_dir"]) / "leases" / "leases.json"
    return dict(json.loads(path.read_text())["leases"])


def test_two_client_runs_contend_one_is_denied_until_the_holder_releases(
    home: StateRoot,
) -> None:
    service = _service()
    holder = _client(service["run"], "src/app.py", hold="yes")
    granted = _wait_room(service, "lease.granted")[0]["body"]
    assert granted["holder"] == f"run:{holder['run']}"
    assert _table(service)["src/app.py"]["holder"] == f"run:{holder['run']}"

    rival = _client(service["run"], "./src//app.py")  # the same file, spelled otherwise
    finished(rival)
    kind, body = _output(rival).split(" ", 1)
    assert kind == "lease.denied"
    assert json.loads(body)["conflicts"][0]["holder"] == f"run:{holder['run']}"
    directory = _client(service["run"], "src")  # a directory above a held file conflicts
    finished(directory)
    assert _output(directory).startswith("lease.denied ")

    sent = cli("message", f"run:{holder['run']}", "client.release", "--force")
    assert sent.returncode == 0, sent.stderr
    finished(holder)
    lines = _output(holder).splitlines()
    assert lines[0].startswith("lease.granted ")
    assert lines[1].startswith("lease.released ")
    assert json.loads(lines[1].split(" ", 1)[1])["paths"] == ["src/app.py"]
    assert _table(service) == {}

    after = _client(service["run"], "src/app.py")
    finished(after)
    assert _output(after).startswith("lease.granted ")
    assert actors.status(service["run"])["status"] == "running"  # the service lives on
    actors.message(f"run:{service['run']}", "control.kill")


def test_an_expired_lease_goes_to_the_next_holder_without_a_release(home: StateRoot) -> None:
    service = _service()
    address = f"run:{service['run']}"
    # the two contending acquires are sent in-process, back to back: b's must reach the
    # service well inside a's ttl even on a loaded machine (a CLI start-up each could not)
    request = {"path": "docs", "ttl": 3}
    actors.message(address, "lease.acquire", request, session="worker-a", force=True)
    granted_at = time.time()
    actors.message(address, "lease.acquire", request, session="worker-b", force=True)
    denied = _wait_room(service, "lease.denied")[0]["body"]
    assert denied["holder"] == "worker-b"
    assert denied["conflicts"][0]["holder"] == "worker-a"

    expired = _wait_room(service, "lease.expired")[0]["body"]
    assert expired == {"paths": ["docs"], "holder": "worker-a"}
    assert time.time() - granted_at >= 2.9  # not before its ttl
    acquire = ["message", address, "lease.acquire", '{"path": "docs", "ttl": 3}', "--body-json"]
    assert cli(*acquire, "--session", "worker-b", "--force").returncode == 0
    granted = _wait_room(service, "lease.granted", 2)[-1]["body"]
    assert granted["holder"] == "worker-b"
    # renewing and releasing are the holder's alone
    renew = ["message", address, "lease.renew", "docs", "--session", "worker-a", "--force"]
    assert cli(*renew).returncode == 0
    assert _wait_room(service, "lease.denied", 2)[-1]["body"]["holder"] == "worker-a"
    release = ["message", address, "lease.release", "docs", "--session", "worker-a", "--force"]
    assert cli(*release).returncode == 0
    released = _wait_room(service, "lease.released")[0]["body"]
    assert released["paths"] == [] and released["not_held"] == ["docs"]
    assert _table(service)["docs"]["holder"] == "worker-b"
    actors.message(address, "control.kill")


def test_unreadable_requests_are_denied_with_the_reason(home: StateRoot) -> None:
    service = _service()
    address = f"run:{service['run']}"
    for body in ('{"paths": []}', '{"path": "a", "ttl": -1}', '{"path": "../etc/passwd"}', "[1]"):
        sent = cli("message", address, "lease.acquire", body, "--body-json")
        assert sent.returncode == 0, sent.stderr
    reasons = [m["body"]["reason"] for m in _wait_room(service, "lease.denied", 4)]
    assert "name the paths" in reasons[0]
    assert "ttl must be seconds" in reasons[1]
    assert "leaves the tree" in reasons[2]
    assert "the body must be" in reasons[3]
    assert _table(service) == {}
    assert actors.status(service["run"])["status"] == "running"
    actors.message(address, "control.kill")
