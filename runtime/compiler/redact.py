"""Keep secrets out of what we emit (events, follow-ups, inspect output).

A value is secret when its name looks like a credential (token, secret, password, key,
auth, credential, cookie, session key) or when the caller marked it secret. Its text is
replaced by `***` wherever it appears in a recorded command line or message.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from runtime.compiler.placeholders import value_text

_SECRET_NAME = re.compile(
    r"(?i)(pass(word|wd|phrase)?|secret|token|api[_-]?key|(^|_)key$|private|auth|credential|cookie)"
)
MASK = "***"


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name))


def secret_texts(values: Mapping[str, Any], extra_names: Iterable[str] = ()) -> list[str]:
    """The texts to mask, longest first so overlapping secrets are masked whole."""
    names = set(extra_names)
    texts = {
        value_text(v)
        for k, v in values.items()
        if (k in names or is_secret_name(k)) and len(value_text(v)) >= 4
    }
    return sorted(texts, key=len, reverse=True)


def redact_text(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, MASK)
    return text


def run_secrets(run: Mapping[str, Any]) -> list[str]:
    """The texts to mask for one run (its values named like credentials, or marked
    secret at spawn), from its run.json record."""
    values = run.get("values")
    names = run.get("secret_names")
    return secret_texts(
        values if isinstance(values, Mapping) else {},
        names if isinstance(names, list) else [],
    )


def redact_deep(data: Any, secrets: list[str]) -> Any:
    """A copy of JSON-like data with every secret text in every string masked."""
    if not secrets:
        return data
    if isinstance(data, str):
        return redact_text(data, secrets)
    if isinstance(data, dict):
        return {k: redact_deep(v, secrets) for k, v in data.items()}
    if isinstance(data, list):
        return [redact_deep(v, secrets) for v in data]
    return data


def redact_values(values: Mapping[str, Any], extra_names: Iterable[str] = ()) -> dict[str, Any]:
    names = set(extra_names)
    return {k: (MASK if k in names or is_secret_name(k) else v) for k, v in values.items()}
