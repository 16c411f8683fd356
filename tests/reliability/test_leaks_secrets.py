"""Issue 17 #5 and #14, the class: a declared secret is masked in every rendering and
every view; a webhook request cannot be replayed or re-addressed.

Siblings of test_attack_secrets.py and test_attack_webhook.py: secrets holding each kind
of quoting-sensitive character against every rendering (shlex, JSON, repr, the events
line), too-short secrets refused by the CLI and the API with nothing written, session
option secrets in every session view, emitted messages to the room, and the webhook
signature checked by a real loopback receiver against replay and tampering.
"""

from __future__ import annotations

import http.server
import json
import shlex
import threading
import time
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

import actors
from adapters.webhook import REPLAY_WINDOW_S, signature, verify
from runtime.compiler.redact import MASK, redact_text, secret_texts
from runtime.store.layout import StateRoot
from tests.conftest import cli, finished
from tests.reliability._checks import refused

SECRETS = [
    "Zq9x'Wk7y\"Rt5v", "SEKRET with spaces", "SEKRET'$(id)", "Bk7\\Sl4sh'Qx", "tab\there",
    "new\nline", "uni-ß漢字'q", "ctl\x01\x1b[x", "only\"double", "$HOME`id`!",
]  # fmt: skip


@pytest.mark.parametrize("secret", SECRETS)
def test_every_rendering_of_a_secret_is_masked(secret: str) -> None:
    texts = secret_texts({"pw": secret}, ["pw"])
    argv = ["sh", "-c", "exit 0", "x", secret, f"--opt={secret}"]
    renderings = {
        "shlex.join": shlex.join(argv),
        "shlex.quote": shlex.quote(secret),
        "json": json.dumps({"argv": argv}),
        "json-ascii-off": json.dumps(argv, ensure_ascii=False),
        "repr": repr(argv),
        "json of shlex": json.dumps(shlex.join(argv)),
    }
    for name, text in renderings.items():
        masked = redact_text(text, texts)
        assert secret not in masked and MASK in masked, f"{name}: {masked!r}"
        pieces = [p for p in secret.replace('"', "'").split("'") if len(p) >= 3]
        assert not [p for p in pieces if p in masked], f"{name}: {masked!r}"


@pytest.mark.parametrize("secret", SECRETS[:4])
def test_a_quoted_secret_is_masked_in_every_stored_file_and_view(
    home: StateRoot, secret: str
) -> None:
    script = 'actors emit note.x "$1" --deliver followup --summary "s $1"'
    args = ["spawn", "-t", f"sh -c '{script}' x {{pw}}", "-v", f"pw={secret}", "--secret", "pw"]
    proc = cli(*args, "--as", "run:q", "--wait")
    assert proc.returncode == 0, proc.stderr
    views = [
        cli("tail", "q", "--events", "-n", "50").stdout,
        cli("inspect", "run:q", "--view", "messages").stdout,
        cli("inbox", "read", "--peek", "--json").stdout,
        json.dumps(actors.inspect("run:q", view="messages")),
    ]
    stored = [
        p.read_text(errors="replace")
        for p in home.path.rglob("*")
        if p.is_file() and p.name != "run.json" and p.name not in ("stdout.log", "stderr.log")
    ]
    pieces = [p for p in secret.replace('"', "'").split("'") if len(p) >= 3]
    for text in views + stored:
        assert not [p for p in pieces if p in text], text[:400]


@pytest.mark.parametrize("value", ["abc", "ab", "x", "", "12"])
@pytest.mark.parametrize("how", ["-v", "recipe-default"])
def test_a_short_declared_secret_is_refused_and_nothing_is_written(
    home: StateRoot, tmp_path: Any, value: str, how: str
) -> None:
    if how == "-v":
        args = ["spawn", "-t", "echo {tok}", "-v", f"tok={value}", "--secret", "tok"]
    else:
        recipe = tmp_path / "r.json"
        recipe.write_text(json.dumps({"template": "echo {tok}", "values": {"tok": value}}))
        args = ["spawn", str(recipe), "--secret", "tok"]
    line = refused(args, cli(*args, "--as", "run:short"), "tok", "4")
    assert value == "" or value not in line.replace("tok", "")
    assert not home.runs.exists() or not any(home.runs.iterdir())


def test_the_api_refuses_short_secrets_and_takes_four_characters(home: StateRoot) -> None:
    with pytest.raises(actors.BadInput):
        actors.spawn(template="echo {k}", values={"k": "abc"}, secret_names=["k"], as_="s1")
    assert not (home.runs / "s1").exists()
    record = actors.spawn(template="echo {k}", values={"k": "abcd"}, secret_names=["k"], as_="s2")
    assert finished(record)["status"] == "done"
    assert "abcd" not in cli("tail", "s2", "--events").stdout


def test_an_emitted_secret_is_masked_in_the_room_timeline(home: StateRoot) -> None:
    secret = "SEKRET-ROOM-41aa"
    script = 'actors emit note.x "room $1" --to room --summary "r $1"'
    args = ["spawn", "-t", f"sh -c '{script}' x {{pw}}", "-v", f"pw={secret}", "--secret", "pw"]
    proc = cli(*args, "--as", "run:rm", "--wait")
    assert proc.returncode == 0, proc.stderr
    timeline = list(home.path.rglob("*.jsonl"))
    assert timeline and not [p for p in timeline if secret in p.read_text()]


SECRET_OPTIONS = {  # every secret-named key a built-in adapter declares, with its harness
    "secret": ("webhook", "url=http://127.0.0.1:9/hook"),
    "password": ("opencode", "url=http://127.0.0.1:9/hook", "session=ses_x"),
    "messaging_token": ("claude_code",),
}


@pytest.mark.parametrize("name", sorted(SECRET_OPTIONS))
def test_every_session_view_masks_adapter_secrets(home: StateRoot, name: str) -> None:
    value = f"SESSION-SEKRET-{name}"
    harness, *given = SECRET_OPTIONS[name]
    others = [item for option in given for item in ("-o", option)]
    reg = cli("session", "register", "--harness", harness, "--id", "wh", "--json", "--no-check",
              *others, "-o", f"{name}={value}")  # fmt: skip
    assert reg.returncode == 0, reg.stderr
    views = {
        "register --json": reg.stdout,
        "session show": cli("session", "show", "wh").stdout,
        "session ls": cli("session", "ls").stdout,
        "session ls --json": cli("session", "ls", "--json").stdout,
        "inspect session": cli("inspect", "session:wh").stdout,
        "doctor": cli("doctor", "delivery", "--session", "wh").stdout,
    }
    assert [v for v, text in views.items() if value in text] == []
    assert json.loads(views["session show"])["options"][name] == MASK


# -- webhook signatures ---------------------------------------------------------------------------


def test_verify_rejects_replay_tamper_and_re_addressing() -> None:
    body, now = b'{"id":"x"}', int(time.time())
    header = signature("k3y-k3y", "d-1", body, now)
    assert verify("k3y-k3y", header, "d-1", body, now=now)
    assert not verify("k3y-k3y", header, "d-2", body, now=now)  # another delivery id
    assert not verify("k3y-k3y", header, "d-1", body + b" ", now=now)  # another body
    assert not verify("other-key", header, "d-1", body, now=now)
    assert not verify("k3y-k3y", header, "d-1", body, now=now + REPLAY_WINDOW_S + 1)  # stale
    assert not verify("k3y-k3y", header, "d-1", body, now=now - REPLAY_WINDOW_S - 1)  # future
    for bad in ("", "v1=" + "0" * 64, "t=abc,v1=00", header.replace("t=", "t=1")):
        assert not verify("k3y-k3y", bad, "d-1", body, now=now)


class _Hook(http.server.BaseHTTPRequestHandler):
    received: ClassVar[list[tuple[dict[str, str], bytes]]] = []
    script: ClassVar[list[int]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).received.append((dict(self.headers.items()), body))
        self.send_response(self.script.pop(0) if self.script else 200)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def hook() -> Iterator[tuple[str, type[_Hook]]]:
    handler = type("Hook", (_Hook,), {"received": [], "script": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/h", handler
    finally:
        server.shutdown()
        server.server_close()


def test_every_attempt_is_signed_over_time_delivery_id_and_body(
    home: StateRoot, hook: tuple[str, type[_Hook]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACTORS_RETRY_BASE", "0.05")
    url, handler = hook
    handler.script.extend([503, 200])
    reg = cli("session", "register", "--harness", "webhook", "--id", "wh",
              "-o", f"url={url}", "-o", "secret=whsec-class-01")  # fmt: skip
    assert reg.returncode == 0, reg.stderr
    finished(actors.spawn("hello", session="wh"))
    assert len(handler.received) == 2
    for headers, body in handler.received:
        sig, delivery = headers["X-Actors-Signature"], headers["X-Actors-Delivery"]
        assert verify("whsec-class-01", sig, delivery, body)
        assert not verify("whsec-class-01", sig, delivery + "x", body)
    assert len({h["X-Actors-Delivery"] for h, _ in handler.received}) == 1
