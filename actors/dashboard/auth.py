"""Who may talk to the dashboard: the holder of its token, from a page it served.

The token is random per start (as Jupyter's), printed once in the URL. A request carries
it as `?token=` (the first visit; answered with a cookie and a redirect that drops it from
the address bar), as that cookie, or as an `Authorization: Bearer` / `X-Actors-Token`
header (a script, a metrics scraper). Everything else gets 403, compared in constant time.

Two more guards a loopback server needs. The Host header must name this server (a DNS
rebinding page on evil.example resolving to 127.0.0.1 would otherwise be same-origin
with it). And an action (POST) must carry the `X-Actors-Dashboard` header, which a page
of another origin cannot set without a CORS preflight this server never grants, and an
Origin, when sent, that is this server's own: a cross-site form cannot act through the
cookie.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Iterable
from http.cookies import CookieError, SimpleCookie
from urllib.parse import parse_qs

CSRF_HEADER = "x-actors-dashboard"
TOKEN_HEADER = "x-actors-token"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def new_token() -> str:
    return secrets.token_urlsafe(24)


def headers_of(scope: dict[str, object]) -> dict[str, str]:
    raw = scope.get("headers") or []
    assert isinstance(raw, Iterable)
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in raw}


class Gate:
    """The token, the cookie that carries it, and the Host names this server answers to."""

    def __init__(self, token: str, port: int, hosts: Iterable[str], *, any_host: bool) -> None:
        self.token = token
        self.cookie = f"actors-dashboard-{port}"
        """Per port: cookies are shared by every port of a host, two dashboards are not."""
        self.hosts = {f"{h}:{port}" for h in hosts}
        self.any_host = any_host

    def matches(self, given: str | None) -> bool:
        if not given:
            return False
        return hmac.compare_digest(given.encode("utf-8", "replace"), self.token.encode())

    def host_ok(self, headers: dict[str, str]) -> bool:
        return self.any_host or headers.get("host", "") in self.hosts

    def query_token(self, scope: dict[str, object]) -> str | None:
        query = scope.get("query_string") or b""
        assert isinstance(query, bytes)
        found = parse_qs(query.decode("latin-1")).get("token")
        return found[0] if found else None

    def admitted(self, scope: dict[str, object], headers: dict[str, str]) -> bool:
        """The request carries the token (any of the accepted ways)."""
        auth = headers.get("authorization", "")
        bearer = auth[7:].strip() if auth.lower().startswith("bearer ") else None
        return any(
            self.matches(given)
            for given in (
                self.query_token(scope),
                self._cookie_token(headers),
                headers.get(TOKEN_HEADER),
                bearer,
            )
        )

    def _cookie_token(self, headers: dict[str, str]) -> str | None:
        try:
            jar = SimpleCookie(headers.get("cookie", ""))
        except CookieError:
            return None
        morsel = jar.get(self.cookie)
        return morsel.value if morsel is not None else None

    def set_cookie(self) -> str:
        return f"{self.cookie}={self.token}; Path=/; HttpOnly; SameSite=Strict"

    def action_ok(self, headers: dict[str, str]) -> bool:
        """A POST made by our own page's script (see the module doc)."""
        if headers.get(CSRF_HEADER) != "1":
            return False
        origin = headers.get("origin")
        return origin is None or self.any_host or origin.removeprefix("http://") in self.hosts
