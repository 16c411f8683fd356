"""Text a run wrote, made inert before it is typed into a pane or shown on a terminal.

A run writes summaries, bodies, output and event fields; any of them may hold control
characters. Typed into a tmux pane, a Ctrl-U, DEL or ESC edits the command line; shown
on a terminal, ESC and C1 sequences move the cursor, retitle the window, rewrite what
is on screen or (on some terminals) answer back as typed input. Bidirectional overrides
and zero-width characters make what is shown differ from what is there.

`inert` is the one sanitiser: every C0 control (newline and tab only where the caller
keeps them), DEL, every C1 control (U+0080-U+009F: the code points a UTF-8 terminal
decodes from the bytes C2 80-C2 9F), the Unicode line and paragraph separators, bidi
controls, zero-width and other invisible format characters, and lone surrogates (the
bytes of invalid UTF-8) are replaced by a visible escape (`\\x1b`, `\\u202e`; `\\n`, `\\t`
and `\\r` for those three). Nothing else changes. `TerminalStream` applies it to
everything written to a terminal; `cell` to every field of a listing's row, on a
terminal or not.
"""

from __future__ import annotations

import re
from typing import Any, TextIO

_CONTROLS = (
    "\x00-\x1f\x7f-\x9f"  # C0, DEL, C1
    "\u00ad\u061c\u115f\u1160\u180e"  # soft hyphen, Arabic letter mark, fillers, Mongolian sep.
    "\u200b-\u200f"  # zero-width space / non-joiner / joiner, LRM, RLM
    "\u2028-\u202e"  # line / paragraph separators, bidi embeddings and overrides
    "\u2060-\u206f"  # word joiner, invisible operators, bidi isolates, deprecated formats
    "\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff9-\ufffb"  # fillers, variation selectors, BOM, ...
    "\ud800-\udfff"  # lone surrogates: undecodable bytes
)
_PATTERNS: dict[str, re.Pattern[str]] = {}


def _pattern(keep: str) -> re.Pattern[str]:
    pattern = _PATTERNS.get(keep)
    if pattern is None:
        if keep:
            kept = "".join(re.escape(c) for c in keep)
            pattern = re.compile(f"(?![{kept}])[{_CONTROLS}]")
        else:
            pattern = re.compile(f"[{_CONTROLS}]")
        _PATTERNS[keep] = pattern
    return pattern


_SHORT = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    short = _SHORT.get(char)
    if short is not None:
        return short
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def inert(text: str, *, keep: str = "") -> str:
    """`text` with every control, invisible or direction-changing character escaped
    (those in `keep`, e.g. "\\n\\t" for multi-line output, left as they are)."""
    return _pattern(keep).sub(_escape, text)


def cell(value: object) -> str:
    """One field of a line of text output (a run id, a recipe or file name, a command, a
    reason, a summary): every control, newline, tab and invisible character escaped
    (`\\n`, `\\x1b`, `\\u202e`) whether or not the output is a terminal, so no field can
    forge a row of a listing or act on a terminal, and a pipe reads one row per line.
    Printable ASCII (nearly every field) is returned as it is, without a regex."""
    text = value if isinstance(value, str) else str(value)
    if text.isascii() and text.isprintable():
        return text
    return inert(text)


def one_line(text: str, limit: int | None = None) -> str:
    """Run-written text for a single line: whitespace runs folded to one space, then
    made inert, then cut to `limit` characters (an ellipsis marks the cut)."""
    text = inert(" ".join(text.split()))
    if limit is not None and len(text) > limit:
        text = text[: max(limit - 1, 0)] + "…"
    return text


COLOURS = {"green": "32", "red": "31", "yellow": "33", "cyan": "36", "dim": "2"}
"""SGR codes of the colours the CLI uses (status words), by name."""


class TerminalStream:
    """A text stream that makes everything written to it inert (newlines and tabs kept,
    and carriage returns when `keep` says so): the CLI's stdout and stderr when they are
    terminals, so no run-written text can drive the terminal."""

    def __init__(self, stream: TextIO, keep: str = "\n\t") -> None:
        self._stream = stream
        self._keep = keep

    def write(self, text: Any) -> int:
        if isinstance(text, str):
            text = inert(text, keep=self._keep)
        return self._stream.write(text)

    def styled(self, text: str, colour: str) -> None:
        """`text`, made inert, in one of COLOURS: the only escape sequences that reach
        the terminal are these, written by actors itself around its own words."""
        self._stream.write(f"\x1b[{COLOURS[colour]}m{inert(text, keep=self._keep)}\x1b[0m")

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
