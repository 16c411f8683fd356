"""`opencode`: an OpenCode server session (`opencode serve`, or the server a TUI runs).

The follow-up goes in as a user message through `POST /session/{id}/prompt_async`. The
204 that answers it means only that the server took the request (it answers before the
message is persisted, and an idle-wake can be dropped: anomalyco/opencode #21524), so the
adapter confirms each stage itself:
- `injected`: the message, under the id we chose for it, is readable at
  `GET /session/{id}/message/{messageID}`;
- `processed`: an assistant message after ours has completed and the session is no longer
  busy (a busy session queues our message and answers it after its current turn).
Idempotency: the text part carries `metadata.actors_delivery = <delivery id>`, which
OpenCode stores but does not show the model; before sending, the recent messages are
searched for it, so a retried delivery (a crash after the POST, a lost response) never
creates a second message. Reposting the same `messageID` would not help: OpenCode appends
the parts to the existing message.

Modes: `immediate` and `on-idle` both queue behind a busy turn (the v1 API has no steer);
`manual` stores the message without starting a turn (`noReply`). Failures: 401 (wrong
password) and 404 (no such session) are final; refused connections, timeouts and 5xx
are retried by the delivery runner.

Loopback is shared by every local user, so the adapter sends nothing (no password, no
follow-up) to a local port held by someone else: once connected, before the first byte,
it asks the kernel who owns the far end of the connection (runtime.core.listeners) and
refuses, finally, unless it is this user. That is checked on every new connection, so a
port another user took after our OpenCode exited never receives the password. A remote
server (not a socket of this machine) is the user's own registration and is not checked;
where /proc/net cannot be read (not Linux) nothing can be checked, and only sessions the
user registered hold a password there (`actors mcp` cannot prove a URL without /proc and
registers a `file` session instead). Proxies from the environment are never used for a
loopback URL.

Options: `url`, `session`, optional `password` / `username` (HTTP Basic, as
OPENCODE_SERVER_PASSWORD / OPENCODE_SERVER_USERNAME; default user `opencode`), `model`
(`provider/model`), `confirm_timeout` (s, default 5: a fresh server takes about a second
to persist its first message), `processed_timeout` (s, default 3; 0 = do not wait).
"""

from __future__ import annotations

import os
import time
from typing import Any, ClassVar

from runtime.delivery.contract import (
    NO_CHECK,
    AdapterError,
    Capabilities,
    CheckedAdapter,
    DeliveryContext,
    Option,
    Receipt,
    Refused,
    elapsed_ms,
    option_seconds,
    processed_timeout,
)
from runtime.delivery.render import injected_text

_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_SCAN_LIMIT = 200
_POLL_S = 0.03
_last_id_time = [0, 0]  # (ms, counter), as OpenCode's own ascending identifiers


def ascending_message_id() -> str:
    """`msg_` + 12 hex digits of (ms * 4096 + counter) + 14 base62: OpenCode's own
    shape, so our message sorts by time among the ones OpenCode creates."""
    now = int(time.time() * 1000)
    if now == _last_id_time[0]:
        _last_id_time[1] += 1
    else:
        _last_id_time[:] = [now, 0]
    stamp = (now * 0x1000 + _last_id_time[1]) & 0xFFFF_FFFF_FFFF
    tail = "".join(_BASE62[b % 62] for b in os.urandom(14))
    return f"msg_{stamp:012x}{tail}"


class OpenCodeAdapter(CheckedAdapter):
    HARNESS = "opencode"
    capabilities = Capabilities(
        wake_mode="HTTP prompt_async into the live OpenCode session",
        level="D7",
        modes=("immediate", "on-idle", "manual"),
        notes="full message injection; injected and processed confirmed by reading the session back",
        native=True,
        injects=True,
        completion=True,
    )
    OPTIONS: ClassVar[tuple[Option, ...]] = (
        Option("url", "the server: http://HOST:PORT (opencode serve, or the TUI's --port)"),
        Option("session", "the OpenCode session id (ses_...)"),
        Option("password", "HTTP Basic password (OPENCODE_SERVER_PASSWORD)"),
        Option("username", "HTTP Basic user (default opencode)"),
        Option("model", "provider/model for the woken turn"),
        Option("confirm_timeout", "seconds to see the message stored (default 5)", "seconds"),
        Option("processed_timeout", "seconds to watch the turn finish (default 3)", "seconds"),
    )

    def __init__(self, session: dict[str, Any], options: dict[str, str]) -> None:
        super().__init__(session, options)
        self.session_id = self.options["session"]

    @classmethod
    def check_rules(cls, options: dict[str, str]) -> None:
        if not options.get("url", "").startswith(("http://", "https://")):
            raise AdapterError(
                "opencode needs -o url=http://HOST:PORT (the opencode serve address)"
            )
        if not options.get("session", "").startswith("ses"):
            raise AdapterError("opencode needs -o session=ses_... (the OpenCode session id)")
        model = options.get("model")
        if model is not None and "/" not in model.strip("/"):
            raise AdapterError(
                "opencode model must be provider/model, e.g. -o model=anthropic/claude"
            )

    @classmethod
    def check_reachable(cls, options: dict[str, str]) -> None:
        """Registration: the server answers, accepts the credentials and holds the
        session (a URL with nothing listening would fail every delivery)."""
        adapter = cls({"id": "probe"}, options)
        url = options["url"]
        try:
            with adapter._client() as client:
                adapter._call(client, "GET", f"/session/{adapter.session_id}", timeout=3.0)
        except Refused as exc:
            if "unreachable" in str(exc):
                port = url.rstrip("/").rsplit(":", 1)[-1]
                fix = f"start `opencode serve --port {port}` (or the TUI with --port {port})"
                raise AdapterError(f"nothing answers at {url}: {fix}, {NO_CHECK}") from None
            raise AdapterError(f"{exc}; check -o url / session / password, {NO_CHECK}") from None

    # -- HTTP -----------------------------------------------------------------------
    def _client(self) -> Any:
        import httpx

        password = self.options.get("password")
        auth = (self.options.get("username", "opencode"), password) if password else None
        base = self.options["url"].rstrip("/")
        local = httpx.URL(base).host in ("localhost", "127.0.0.1", "::1")
        return httpx.Client(base_url=base, auth=auth, timeout=10.0, trust_env=not local)

    def _check_peer(self, event: str, info: dict[str, Any]) -> None:
        """httpx trace hook: a new connection whose far end is another user's process is
        refused (see the module docstring). Raised from here, the refusal comes before
        any request byte is written."""
        if event != "connection.connect_tcp.complete":
            return
        from runtime.core.listeners import foreign_peer

        stream = info.get("return_value")
        if stream is None or (sock := stream.get_extra_info("socket")) is None:
            return
        owner = foreign_peer(sock)
        if owner is None:
            return  # ours, another machine's, or nothing can tell (no /proc/net)
        stream.close()
        whose = "a local socket the kernel does not name" if owner == -1 else f"uid {owner}"
        raise Refused(
            f"opencode server {self.options['url']} is held by {whose}, not you; nothing was"
            " sent (another local user may have taken the port: restart OpenCode and let"
            " `actors mcp` register it again)",
            retryable=False,
        )

    def _call(self, client: Any, method: str, path: str, **kwargs: Any) -> Any:
        """One request; failures become `Refused` with the server's own reason. Every
        new connection is checked before the request is written (`_check_peer`)."""
        import httpx

        try:
            response = client.request(
                method, path, extensions={"trace": self._check_peer}, **kwargs
            )
        except httpx.TransportError as exc:
            raise Refused(
                f"opencode server {self.options['url']} unreachable: {type(exc).__name__}",
                retryable=True,
            ) from None
        if response.status_code < 300:
            return response
        reason = _server_reason(response)
        if response.status_code == 401:
            raise Refused(
                "opencode rejected the credentials (HTTP 401): check -o password / username",
                retryable=False,
            )
        if response.status_code == 404:
            raise Refused(f"opencode: {reason} (HTTP 404)", retryable=False)
        raise Refused(
            f"opencode: {reason} (HTTP {response.status_code})",
            retryable=response.status_code >= 500 or response.status_code == 429,
        )

    def _messages(self, client: Any) -> list[dict[str, Any]]:
        path = f"/session/{self.session_id}/message"
        found = self._call(client, "GET", path, params={"limit": _SCAN_LIMIT}).json()
        return found if isinstance(found, list) else []

    def _already_sent(self, client: Any, delivery_id: str) -> str | None:
        for message in self._messages(client):
            for part in message.get("parts") or []:
                if (part.get("metadata") or {}).get("actors_delivery") == delivery_id:
                    return str(message["info"]["id"])
        return None

    # -- delivery ---------------------------------------------------------------------
    def receive_message(self, envelope: dict[str, Any], context: DeliveryContext) -> Receipt:
        started = time.monotonic()
        with self._client() as client:
            try:
                return self._deliver(client, envelope, context, started)
            except Refused as refused:
                return refused.receipt(context.delivery_id)

    def _deliver(
        self, client: Any, envelope: dict[str, Any], context: DeliveryContext, started: float
    ) -> Receipt:
        observed: list[str] = []
        message_id = self._already_sent(client, context.delivery_id)
        resent = message_id is not None
        if message_id is None:
            message_id = ascending_message_id()
            self._call(
                client,
                "POST",
                f"/session/{self.session_id}/prompt_async",
                json=self._prompt(envelope, context, message_id),
            )
            observed.append("triggered")
        metadata: dict[str, Any] = {"message_id": message_id, "session": self.session_id}
        if resent:
            metadata["already_stored"] = True
        if not self._wait_stored(client, message_id):
            raise Refused(
                "opencode answered 204 but the message was not stored within "
                f"{option_seconds(self.options, 'confirm_timeout', 5)} s (will check again before resending)",
                retryable=True,
            )
        observed.append("injected")
        metadata["body_injected"] = True  # noReply too: it is in the conversation
        context.injected()  # read now: the woken turn may call inbox_read itself
        metadata["injected_ms"] = elapsed_ms(started)
        if context.mode != "manual" and self._wait_processed(client, message_id):
            observed.append("processed")
            metadata["processed_ms"] = elapsed_ms(started)
        return Receipt("delivered", context.delivery_id, observed=observed, metadata=metadata)

    def _prompt(
        self, envelope: dict[str, Any], context: DeliveryContext, message_id: str
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "messageID": message_id,
            "parts": [
                {
                    "type": "text",
                    "text": injected_text(envelope, context),
                    "metadata": {"actors_delivery": context.delivery_id},
                }
            ],
        }
        if self.options.get("model"):
            provider, _, model = self.options["model"].partition("/")
            body["model"] = {"providerID": provider, "modelID": model}
        if context.mode == "manual":
            body["noReply"] = True
        return body

    def _wait_stored(self, client: Any, message_id: str) -> bool:
        deadline = time.monotonic() + option_seconds(self.options, "confirm_timeout", 5)
        path = f"/session/{self.session_id}/message/{message_id}"
        while True:
            try:
                self._call(client, "GET", path)
                return True
            except Refused as refused:
                if refused.retryable or "404" not in str(refused):
                    raise
            if time.monotonic() >= deadline:
                return False
            time.sleep(_POLL_S)

    def _wait_processed(self, client: Any, message_id: str) -> bool:
        """An assistant message after ours has completed and the session is not busy."""
        deadline = time.monotonic() + processed_timeout(self.options)
        while True:
            answered = any(
                m["info"].get("role") == "assistant"
                and str(m["info"].get("id", "")) > message_id
                and (m["info"].get("time") or {}).get("completed")
                for m in self._messages(client)
            )
            if answered:
                status = self._call(client, "GET", "/session/status").json()
                if (status.get(self.session_id) or {}).get("type") in (None, "idle"):
                    return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(_POLL_S * 3)


def _server_reason(response: Any) -> str:
    try:
        data = response.json()
    except ValueError:
        return str(response.text.strip()[:200] or response.reason_phrase)
    if isinstance(data, dict):
        message = (data.get("data") or {}).get("message") or data.get("name")
        if message:
            return " ".join(str(message).split())[:200]
    return str(data)[:200]
