"""Identifiers: time-ordered unique ids, run ids, capability tokens, timestamps.

Envelope and record ids sort by creation time (ULID layout: 48-bit milliseconds then 80
random bits, Crockford base32) so journals can be merged and deduplicated by id alone.
"""

from __future__ import annotations

import _thread  # the documented low-level API: `threading` costs ~2 ms of every CLI start
import os
import re
import time

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_PAIRS = [a + b for a in _CROCKFORD for b in _CROCKFORD]
"""Two base32 digits per 10 bits: an id is 13 lookups (new_id is on every message's path)."""
_lock = _thread.allocate_lock()
_last_ms = 0
_last_rand = 0

ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"
_ID_RE = re.compile(ID_PATTERN)
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def new_id() -> str:
    """A 26-character id, strictly increasing within this process."""
    global _last_ms, _last_rand
    with _lock:
        ms = time.time_ns() // 1_000_000
        if ms <= _last_ms:
            ms = _last_ms
            rand = (_last_rand + 1) & ((1 << 80) - 1)
        else:
            rand = int.from_bytes(os.urandom(10), "big")
        _last_ms, _last_rand = ms, rand
    value = (ms << 80) | rand
    return "".join([_PAIRS[(value >> shift) & 1023] for shift in range(120, -1, -10)])


def new_token() -> str:
    """A capability secret: 256 random bits, URL-safe."""
    import base64  # not `secrets`: it pulls in hashlib, hmac and random (~5-10 ms of a
    # spawn) for what is os.urandom in the end, exactly as below (secrets.token_urlsafe)

    return base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=").decode("ascii")


TOKEN_VERIFIER_PREFIX = "sha256:"


def token_verifier(token: str) -> str:
    """What a run's `token` file holds: `sha256:<hex>` of the token, never the token.

    CPython's builtin SHA-256 when present (hashlib imports OpenSSL, ~6 ms), hashlib
    otherwise. Only spawn and a process presenting a token pay for it."""
    for name in ("_sha256", "_sha2", "hashlib"):  # CPython <= 3.11, 3.12+, anything
        try:
            module = __import__(name)
        except ImportError:
            continue
        return TOKEN_VERIFIER_PREFIX + str(module.sha256(token.encode()).hexdigest())
    raise ImportError("no SHA-256 implementation")


def token_matches(stored: str, token: str) -> bool:
    """Whether `token` is the one whose verifier is `stored`, in constant time. A file
    that holds anything but a verifier (a clear token, from an older version) matches
    nothing: it would be a token any same-user process could read."""
    if not stored.startswith(TOKEN_VERIFIER_PREFIX):
        return False
    import hmac  # only when a token is checked

    return hmac.compare_digest(stored.encode(), token_verifier(token).encode())


def short_suffix(length: int = 6) -> str:
    """Lowercase base36 suffix for generated run ids (`hello-k3x9fq`)."""
    alphabet = "0123456789abcdefghijklmnopqrstuvwxyz"
    return "".join(alphabet[byte % 36] for byte in os.urandom(length))


def is_valid_id(value: str) -> bool:
    """Run, branch and session ids: a letter or digit, then letters, digits, `._-`."""
    return bool(_ID_RE.fullmatch(value))


def is_session_id(value: str) -> bool:
    """A session a caller may name (`--session`, `$ACTORS_SESSION`, `session register
    --id`): a valid id, or `user:<id>`. `run:<id>` is not one: a run's principal is proven
    by its token, never named."""
    return is_valid_id(value) or (value.startswith("user:") and is_valid_id(value[5:]))


def is_valid_name(value: str) -> bool:
    """Placeholder and value names: identifiers of at most 64 characters."""
    return bool(_NAME_RE.fullmatch(value))


def now_iso(after_s: float = 0.0) -> str:
    """UTC timestamp with milliseconds, e.g. `2026-11-22T15:04:05.123Z` (no datetime import);
    `after_s` seconds from now for a deadline (a lease, a retry). The one formatter of every
    stored time, so all of them compare as strings and parse with `parse_iso`."""
    ns = time.time_ns() + int(after_s * 1_000_000_000)
    return (
        time.strftime("%Y-%m-%dT%H:%M:%S.", time.gmtime(ns // 1_000_000_000))
        + f"{ns // 1_000_000 % 1000:03d}Z"
    )


def parse_iso(value: str) -> float:
    """Seconds since the epoch for a timestamp written by `now_iso`."""
    from datetime import datetime

    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except (OverflowError, OSError) as exc:  # a date no clock can hold: not a timestamp
        raise ValueError(f"timestamp out of range: {value[:40]!r}") from exc
