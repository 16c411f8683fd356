"""The merge edits `actors install` makes to a harness's config files, as pieces each
harness's install module (adapters/<harness>/install.py) builds its plan from.

An `Edit` is a pair of pure text transforms on one file: `add` merges our entries in
(returning the text unchanged when they are already there, so a second install changes
no bytes) and notes in `added` what it put in that was not there before; `remove` takes
only our entries out (given that note, exactly those: a permission the user already had
stays). Reading, backing up, writing the files and keeping the note is
actors/install.py's business, the same for every harness.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime.core.bounded_json import Undecodable, decode
from runtime.core.errors import BadInput

TOML_BEGIN = "# >>> actors (managed by `actors install`; `actors uninstall` removes it)\n"
TOML_END = "# <<< actors\n"

Put = Callable[[dict[str, Any]], Any]
"""Puts our entries into a parsed JSON config, in place; returns what it added that was
not there (JSON, kept in installs.json for `Take`), or None."""
Take = Callable[[dict[str, Any], Any], None]
"""Takes our entries out of a parsed JSON config, in place; its second argument is what
`Put` returned at install (None when unknown: take every entry of ours)."""
Change = tuple[Put, Take]


@dataclass
class Edit:
    path: Path
    add: Callable[[str | None], str]
    remove: Callable[[str, Any], str]
    what: str = ""
    """What install puts in this file, for its report (`wrote PATH: <what>`)."""
    added: Any = None
    """Set by `add`: what it put in that was not there before (see `Put`)."""


def actors_command() -> list[str]:
    """How a harness should start us: the installed script, else this interpreter."""
    found = shutil.which("actors")
    return [found] if found else [sys.executable, "-m", "actors"]


def _load_json(path: Path, text: str | None) -> dict[str, Any]:
    if not text or not text.strip():
        return {}
    try:
        data = decode(text)
    except Undecodable as exc:
        raise BadInput(
            f"{path} is not valid JSON ({exc}): fix it first; nothing was changed"
        ) from None
    if not isinstance(data, dict):
        raise BadInput(f"{path} does not hold a JSON object; nothing was changed")
    return data


def _dump(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def json_edit(path: Path, put: Put, take: Take, what: str = "") -> Edit:
    """A JSON config file: `put` / `take` our entries; unchanged data keeps its bytes."""

    def add(text: str | None) -> str:
        data = _load_json(path, text)
        before = json.dumps(data, sort_keys=True)
        edit.added = put(data)
        if text and json.dumps(data, sort_keys=True) == before:
            return text  # already installed: keep the bytes as they are
        return _dump(data)

    def remove(text: str, added: Any = None) -> str:
        data = _load_json(path, text)
        before = json.dumps(data, sort_keys=True)
        take(data, added)
        return text if json.dumps(data, sort_keys=True) == before else _dump(data)

    edit = Edit(path, add, remove, what)
    return edit


def mcp_entry(container: str, entry: dict[str, Any]) -> Change:
    """Our MCP server as `<container>.actors` (the container goes when it empties)."""

    def put(data: dict[str, Any]) -> None:
        data.setdefault(container, {})["actors"] = entry

    def take(data: dict[str, Any], added: Any = None) -> None:
        servers = data.get(container)
        if isinstance(servers, dict) and "actors" in servers:
            del servers["actors"]
            if not servers:
                del data[container]

    return put, take


def both(first: Change, second: Change) -> Change:
    """Two changes of one JSON file as one (a file is read and written by one Edit);
    what each added (a dict of lists, see `Put`, or None) is noted under its own keys."""

    def put(data: dict[str, Any]) -> Any:
        added = {**(first[0](data) or {}), **(second[0](data) or {})}
        return added or None

    def take(data: dict[str, Any], added: Any = None) -> None:
        second[1](data, added)
        first[1](data, added)

    return put, take


def toml_edit(path: Path, block: str, what: str = "") -> Edit:
    """A TOML config file: our `block` between marker lines (no TOML parser needed, and
    uninstall removes exactly what install appended)."""

    def add(text: str | None) -> str:
        text = text or ""
        if TOML_BEGIN in text:
            return text
        if "[mcp_servers.actors]" in text:
            raise BadInput(
                f"{path} already defines [mcp_servers.actors] (not ours); remove it first"
            )
        sep = "" if not text or text.endswith("\n\n") else ("\n" if text.endswith("\n") else "\n\n")
        return text + sep + TOML_BEGIN + block + TOML_END

    def remove(text: str, added: Any = None) -> str:
        start = text.find(TOML_BEGIN)
        end = text.find(TOML_END, start)
        if start < 0 or end < 0:
            return text
        return (
            text[:start].rstrip("\n")
            + ("\n" if text[:start].strip() else "")
            + text[end + len(TOML_END) :]
        )

    return Edit(path, add, remove, what)
