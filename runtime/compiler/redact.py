"""Keep secrets out of what we emit (events, follow-ups, inspect output).

A value is secret when its name looks like a credential (token, secret, password, key,
auth, credential, cookie, session key) or when the caller marked it secret. Its text is
replaced by `***` wherever it appears in a recorded command line or message, and so is
every rendering quoting gives it (a shell-quoted command line, a JSON string, a Python
repr), so a secret holding a quote or a backslash is masked in those too. A declared
secret shorter than MIN_SECRET characters cannot be masked (it would mask every such
run of characters everywhere): `check_declared_secrets` refuses it at spawn.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable, Mapping
from typing import Any

from runtime.compiler.placeholders import value_text

_SECRET_NAME = re.compile(
    r"(?i)(pass(word|wd|phrase)?|secret|token|api[_-]?key|(^|_)key$|private|auth|credential|cookie)"
)
MASK = "***"
MIN_SECRET = 4
"""The shortest text masked; a declared secret under it is refused at spawn."""


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name))


def renderings(text: str) -> set[str]:
    """The text and the forms quoting gives it: inside a shell-quoted word (shlex.quote
    rewrites `'` as `'"'"'`), a JSON string (ASCII or not), a Python repr; each of those
    again JSON-escaped (a JSON line masked after encoding)."""
    forms = {text, text.replace("'", "'\"'\"'"), shlex.quote(text), repr(text)[1:-1]}
    for form in list(forms):
        forms.add(json.dumps(form, ensure_ascii=False)[1:-1])
        forms.add(json.dumps(form)[1:-1])
    return forms


def secret_texts(values: Mapping[str, Any], extra_names: Iterable[str] = ()) -> list[str]:
    """The texts to mask (every rendering of every secret value), longest first so
    overlapping secrets are masked whole."""
    names = set(extra_names)
    texts = {
        form
        for k, v in values.items()
        if (k in names or is_secret_name(k)) and len(value_text(v)) >= MIN_SECRET
        for form in renderings(value_text(v))
    }
    return sorted(texts, key=len, reverse=True)


def check_declared_secrets(values: Mapping[str, Any], names: Iterable[str]) -> None:
    """Refuse (BadInput) a value declared secret that is too short to mask."""
    from runtime.core.errors import BadInput

    for name in sorted(set(names)):
        if name in values and len(value_text(values[name])) < MIN_SECRET:
            raise BadInput(
                f"secret {name} is {len(value_text(values[name]))} character(s) long; secrets"
                f" under {MIN_SECRET} characters cannot be masked",
                hint=f"use a longer value for {name}, or do not mark it --secret",
            )


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


def redact_session(record: Mapping[str, Any]) -> dict[str, Any]:
    """A session record fit to print: its secret-named adapter options (a webhook's
    `secret`, an `api_token`) masked, and their texts masked wherever else they appear."""
    options = record.get("options")
    if not isinstance(options, Mapping):
        return dict(record)
    masked: dict[str, Any] = redact_deep({**record, "options": {}}, secret_texts(options))
    return {**masked, "options": redact_values(options)}
