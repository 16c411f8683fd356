"""Shell-free command templates: split into words first, substitute per word second.

A template string is split into argv words with POSIX shell quoting rules (single and
double quotes, backslash) and nothing else: no globbing, no variables, no operators. Only
then are `{name}` / `{name=default}` placeholders replaced inside each word, so a value is
always exactly one argument whatever characters it holds. `{{` and `}}` are literal braces;
a brace that does not open a well-formed placeholder is kept as text.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runtime.errors import BadInput

_TOKEN = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)(?:=([^{}]*))?\}")


@dataclass(frozen=True)
class Ref:
    """One placeholder occurrence."""

    name: str
    default: str | None


Part = str | Ref


def split_words(template: str) -> list[str]:
    """POSIX-quoted words of a template; raises BadInput on unbalanced quotes."""
    try:
        words = shlex.split(template, comments=False, posix=True)
    except ValueError as exc:
        raise BadInput(
            f"cannot split template {template!r}: {exc}",
            hint="balance the quotes, or escape the quote character with a backslash",
        ) from exc
    if not words:
        raise BadInput("template is empty", hint="give the command to run, e.g. 'echo hi'")
    return words


def parse_word(word: str) -> list[Part]:
    """Literal text and placeholder references, in order."""
    parts: list[Part] = []
    pos = 0
    for match in _TOKEN.finditer(word):
        if match.start() > pos:
            parts.append(word[pos : match.start()])
        token = match.group(0)
        if token == "{{":
            parts.append("{")
        elif token == "}}":
            parts.append("}")
        else:
            parts.append(Ref(match.group(1), match.group(2)))
        pos = match.end()
    if pos < len(word):
        parts.append(word[pos:])
    return parts


def references(words: list[str]) -> list[Ref]:
    """Every placeholder in the words, in order of appearance."""
    return [part for word in words for part in parse_word(word) if isinstance(part, Ref)]


def value_text(value: Any) -> str:
    """How a value of any JSON type appears inside an argument."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class MissingValue(BadInput):
    """A placeholder has no value and no default."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(
            f"the template needs a value for {{{name}}} and none was given",
            hint=f"pass -v {name}=VALUE (or write {{{{{name}}}}} for literal braces)",
        )


def substitute_word(word: str, values: Mapping[str, Any]) -> str:
    """The word with every placeholder replaced by its value's text."""
    out: list[str] = []
    for part in parse_word(word):
        if isinstance(part, str):
            out.append(part)
        elif part.name in values:
            out.append(value_text(values[part.name]))
        elif part.default is not None:
            out.append(part.default)
        else:
            raise MissingValue(part.name)
    return "".join(out)


def render_argv(words: list[str], values: Mapping[str, Any]) -> list[str]:
    """The argv for one leaf: one argument per template word, always."""
    return [substitute_word(word, values) for word in words]


def missing_values(words: list[str], values: Mapping[str, Any]) -> list[str]:
    """Names that `render_argv` would fail on, without rendering."""
    missing: list[str] = []
    for ref in references(words):
        if ref.name not in values and ref.default is None and ref.name not in missing:
            missing.append(ref.name)
    return missing
