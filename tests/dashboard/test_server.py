"""The dashboard's server over plain HTTP: the token, the Host and CSRF guards, the
loopback rule, Ctrl-C; and the actions under the CLI's ownership rules."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from runtime.core.process import wait_gone
from runtime.store.layout import StateRoot
from tests.conftest import cli, finished
from tests.dashboard.conftest import Server, start_dashboard, stop_dashboard

ACTION = {"X-Actors-Dashboard": "1", "Content-Type": "application/json"}


def get(server: Server, path: str, **kw: Any) -> httpx.Response:
    return httpx.get(server.base + path, follow_redirects=False, timeout=10, **kw)


def post(server: Server, path: str, body: dict[str, Any], **headers: str) -> httpx.Response:
    return httpx.post(
        server.base + path,
        content=json.dumps(body),
        headers={"X-Actors-Token": server.token, **headers},
        timeout=30,
    )


def test_every_path_refuses_a_missing_or_wrong_token(dashboard: Server) -> None:
    wrong = dashboard.token[:-2] + ("aa" if not dashboard.token.endswith("aa") else "bb")
    for path in ("/", "/api/runs", "/api/sessions", "/events", "/static/app.js", "/metrics", "/x"):
        assert get(dashboard, path).status_code == 403, path
        assert get(dashboard, path, params={"token": wrong}).status_code == 403, path
        assert get(dashboard, path, headers={"X-Actors-Token": wrong}).status_code == 403
        assert get(dashboard, path, headers={"Authorization": f"Bearer {wrong}"}).status_code == 403
        cookie = {"Cookie": f"actors-dashboard-{dashboard.base.rsplit(':', 1)[1]}={wrong}"}
        assert get(dashboard, path, headers=cookie).status_code == 403
    refused = get(dashboard, "/")
    assert "token" in refused.text and "<" not in refused.text


def test_the_printed_url_sets_a_cookie_and_drops_the_token_from_the_address(
    dashboard: Server,
) -> None:
    first = httpx.get(dashboard.url, follow_redirects=False, timeout=10)
    assert first.status_code == 303 and first.headers["location"] == "/"
    cookie = first.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    name, value = cookie.split(";", 1)[0].split("=", 1)
    page = get(dashboard, "/", headers={"Cookie": f"{name}={value}"})
    assert page.status_code == 200 and "app.js" in page.text
    assert page.headers["referrer-policy"] == "no-referrer"
    assert "script-src 'self'" in page.headers["content-security-policy"]
    listed = get(dashboard, "/api/runs", headers={"Authorization": f"Bearer {dashboard.token}"})
    assert listed.status_code == 200 and listed.json()["total"] == 0


def test_a_foreign_host_or_a_cross_site_action_is_refused(
    dashboard: Server, home: StateRoot
) -> None:
    token = {"X-Actors-Token": dashboard.token}
    # DNS rebinding: a page of evil.example resolving to 127.0.0.1 names its own host
    assert get(dashboard, "/api/runs", headers={**token, "Host": "evil.example"}).status_code == 403
    record = cli("spawn", "--json", "-t", "sleep 300")
    run = json.loads(record.stdout)["run"]
    # an action without the page's header (a cross-site form cannot set it) ...
    plain = post(dashboard, f"/api/runs/{run}/kill", {}, **{"Content-Type": "application/json"})
    assert plain.status_code == 403
    # ... or from another origin
    foreign = post(dashboard, f"/api/runs/{run}/kill", {}, **ACTION, Origin="http://evil.example")
    assert foreign.status_code == 403
    assert get(dashboard, f"/api/runs/{run}", headers=token).json()["status"]["status"] == "running"
    assert get(dashboard, f"/api/runs/{run}/kill", headers=token).status_code == 405


def test_kill_takes_the_cli_ownership_rule_and_the_force_flow(
    dashboard: Server, home: StateRoot
) -> None:
    """The dashboard acts as the user who started it (as the CLI does); a run of another
    session is refused with needs_force, and killed only when force is sent."""
    theirs = json.loads(cli("spawn", "--json", "--session", "other", "-t", "sleep 300").stdout)
    refused = post(dashboard, f"/api/runs/{theirs['run']}/kill", {}, **ACTION)
    assert refused.status_code == 409
    assert refused.json()["needs_force"] is True and refused.json()["owner"] == "other"
    assert json.loads(cli("status", "--json", theirs["run"]).stdout)["status"] == "running"
    forced = post(dashboard, f"/api/runs/{theirs['run']}/kill", {"force": True}, **ACTION)
    assert forced.status_code == 200 and forced.json()["status"] == "killed"
    assert finished(theirs)["status"] == "killed"
    assert wait_gone([int(theirs["pid"])], timeout=10)
    bad = post(dashboard, f"/api/runs/{theirs['run']}/kill", {"force": "yes"}, **ACTION)
    assert bad.status_code == 400 and "force" in bad.json()["error"]


def test_message_goes_through_the_router(dashboard: Server, home: StateRoot, tmp_path: Any) -> None:
    from tests.conftest import idle_run

    record = idle_run(tmp_path)
    sent = post(
        dashboard,
        "/api/message",
        {"to": f"run:{record['run']}", "type": "job.item", "body": {"n": 1}},
        **ACTION,
    )
    assert sent.status_code == 200, sent.text
    assert sent.json()["state"] == "queued"
    entries = get(
        dashboard, f"/api/runs/{record['run']}", headers={"X-Actors-Token": dashboard.token}
    )
    assert [e["type"] for e in entries.json()["inbox"]] == ["job.item"]
    undeclared = post(
        dashboard,
        "/api/message",
        {"to": f"run:{record['run']}", "type": "nope", "body": None},
        **ACTION,
    )
    assert undeclared.status_code == 400 and "does not accept" in undeclared.json()["error"]


@pytest.mark.parametrize("to", ["coordinator", "not an id!"])
def test_message_reads_an_address_as_the_cli_does(dashboard: Server, to: str) -> None:
    """The dashboard's ownership look-up reads `to` with the router's own rule: it used to
    take `coordinator` for a run of that name (404 "no run coordinator") where
    `actors message` says why the address cannot be used."""
    said = cli("message", to, "t", "{}")
    assert said.returncode == 2
    answer = post(dashboard, "/api/message", {"to": to, "type": "t", "body": {}}, **ACTION)
    assert answer.status_code in (400, 403), answer.text
    assert answer.json()["error"] in said.stderr


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.7", "::", "example.invalid"])
def test_a_host_that_is_not_loopback_is_refused(home: StateRoot, host: str) -> None:
    done = cli("dashboard", "--host", host, "--port", "0", timeout=30)
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "--allow-remote" in lines[0] and "Traceback" not in done.stderr


def test_allow_remote_binds_a_wildcard_address(home: StateRoot) -> None:
    server = start_dashboard("--host", "0.0.0.0", "--allow-remote")
    try:
        assert server.url.startswith("http://0.0.0.0:")
        port = server.base.rsplit(":", 1)[1]
        # reached over loopback with the token: any Host is accepted once remote is allowed
        answer = httpx.get(
            f"http://127.0.0.1:{port}/api/runs", headers={"X-Actors-Token": server.token}
        )
        assert answer.status_code == 200
    finally:
        assert stop_dashboard(server).returncode == 0


def test_ctrl_c_stops_it_with_a_page_listening(dashboard: Server) -> None:
    """An open event stream does not hold the server up (the fixture asserts the exit)."""
    with httpx.stream(
        "GET", dashboard.base + "/events", headers={"X-Actors-Token": dashboard.token}, timeout=10
    ) as stream:
        first = next(stream.iter_lines())
        assert first == "event: hello"
        done = stop_dashboard(dashboard)
        assert done.returncode == 0 and "stopped" in done.stderr
    dashboard.proc = start_dashboard().proc  # the fixture stops a live one


def test_a_port_in_use_or_out_of_range_is_one_line(home: StateRoot) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = cli("dashboard", "--port", str(port), timeout=30)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and f"127.0.0.1:{port}" in done.stderr
    assert cli("dashboard", "--port", "70000").returncode == 2


def test_bad_reads_answer_one_line_with_the_status_their_kind_means(dashboard: Server) -> None:
    token = {"X-Actors-Token": dashboard.token}
    bad = get(dashboard, "/api/runs", params={"status": "bogus"}, headers=token)
    assert bad.status_code == 400 and "bogus" in bad.json()["error"] and bad.json()["hint"]
    assert get(dashboard, "/api/runs", params={"page": "x"}, headers=token).status_code == 400
    assert get(dashboard, "/api/runs", params={"per": "9999"}, headers=token).status_code == 400
    missing = get(dashboard, "/api/runs/no-such-run", headers=token)
    assert missing.status_code == 404 and "no run no-such-run" in missing.json()["error"]
    assert get(dashboard, "/api/rooms/no-such-run", headers=token).status_code == 404
    assert get(dashboard, "/nowhere", headers=token).status_code == 404
    assert get(dashboard, "/static/../../etc/passwd", headers=token).status_code == 404


def test_an_untrusted_run_directory_stops_the_start_with_one_line(home: StateRoot) -> None:
    (home.runs / "open").mkdir(parents=True)
    (home.runs / "open").chmod(0o777)
    done = cli("dashboard", "--port", "0", timeout=30)
    assert done.returncode == 2 and done.stdout == ""  # no URL: nothing was served
    assert done.stderr.count("\n") == 1 and "writable by others" in done.stderr
    (home.runs / "open").chmod(0o700)


def test_an_untrusted_run_directory_made_while_serving_is_left_off(
    dashboard: Server, home: StateRoot
) -> None:
    token = {"X-Actors-Token": dashboard.token}
    with httpx.stream("GET", dashboard.base + "/events", headers=token, timeout=30) as stream:
        lines = stream.iter_lines()
        assert next(lines) == "event: hello"
        (home.runs / "open").mkdir()
        (home.runs / "open").chmod(0o777)
        (home.runs / "open" / "run.json").write_text("{}")
        record = json.loads(cli("spawn", "--json", "-t", "true").stdout)
        for line in lines:  # the server lives on, and sees the next run
            if line.startswith("data:") and record["run"] in json.loads(line[5:]).get(
                "changed", []
            ):
                break
    listed = get(dashboard, "/api/runs", headers=token).json()
    names = {n["run"] for g in listed["groups"] for n in g["runs"]}
    assert record["run"] in names and "open" not in names
    finished(record)
    (home.runs / "open").chmod(0o700)


def test_metrics_are_served_with_the_token_as_actors_metrics_prints_them(
    dashboard: Server, home: StateRoot
) -> None:
    """GET /metrics is the same Prometheus text `actors metrics` prints, for a scraper
    that holds the token (as a bearer header, which Prometheus can send)."""
    record = json.loads(cli("spawn", "--template", "true", "--json").stdout)
    finished(record)
    served = get(dashboard, "/metrics", headers={"Authorization": f"Bearer {dashboard.token}"})
    assert served.status_code == 200, served.text
    assert served.headers["content-type"].startswith("text/plain; version=0.0.4")
    assert 'actors_runs{status="done"} 1' in served.text
    printed = cli("metrics").stdout
    assert _run_counts(served.text) == _run_counts(printed)


def _run_counts(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("actors_runs{")]
