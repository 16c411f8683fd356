"""Shell-free command templates: split into words first, substitute per word second.

A template string is split into argv words with POSIX shell quoting rules (single and
double quotes, backslash) and nothing else: no globbing, no variables, no operators. Only
then are placeholders replaced inside each word, so a value is always exactly one
argument whatever characters it holds. `{{` and `}}` are literal braces; a brace that
does not open a well-formed placeholder is kept as text (so `${x}` in inline code fails
loudly only when `x` is a valid name).

Placeholder forms: `{x}`, `{x=default}`, `{x??fallback}` (x when truthy, else the
fallback text), `{x?yes:no}`, `{items.length}`, `{items[index]}` / `{items[index+1]}`,
and inside a `repeat` node `{index}`, `{prev}`, `{next}` (wrapping), `{repeat}` with
integer arithmetic (`+ - * / %`, parentheses) and zero padding (`{_index}` = width 2,
`{__(index+1)}` = width 3). Missing, empty, `false`, `0`, `no` and `[]` are false.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from typing import Any, NamedTuple

from runtime.core.bounded_json import INPUT_DEPTH, MAX_INPUT_BYTES, Undecodable, decode
from runtime.core.errors import BadInput

_TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]+)\}")
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_ARITH = r"[0-9a-z+\-*/%() ]+"
_DEFAULT = re.compile(rf"({_NAME})=([^{{}}]*)")
_FALLBACK = re.compile(rf"({_NAME}(?:\.length|\[{_ARITH}\])?)\?\?([^{{}}]*)")
_TERNARY = re.compile(rf"({_NAME}(?:\.length|\[{_ARITH}\])?)\?([^:{{}}]*):([^{{}}]*)")
_SELECT = re.compile(rf"({_NAME})(?:\.(length)|\[({_ARITH})\])")
_PADDED = re.compile(r"(_+)(.+)")
REPEAT_VARS = ("index", "prev", "next", "repeat")
"""A `repeat` node's own variables: never recipe parameters."""
INJECTED = (
    "run_id",
    "state_dir",
    "actor_address",
    "default_room",
    "communication_file",
    "recipe_dir",
)
"""Values the runtime sets for every run: never recipe parameters, never given."""
_ARITH_TOKEN = re.compile(r"\s*(?:(\d+)|(index|prev|next|repeat)|([-+*/%()]))")
FALSE_TEXTS = ("", "false", "0", "no")
MAX_REPEAT = 256
"""Instances one `repeat` node may expand to (64 when they run in parallel)."""


class Ref(NamedTuple):
    """One placeholder occurrence: the value it needs (`name`, "" for pure arithmetic),
    its inline default, whether a missing value is allowed, and the expression itself."""

    name: str
    default: str | None
    optional: bool = False
    expr: str = ""


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


SHELL_OPERATORS = ("&&", "||", ";", "|", ">", "<", "$(", "`")
"""What a shell would act on in a command line; a template is never run by a shell, so
these outside quotes are refused unless the recipe sets `literal_operators` (`$(` and a
backtick also inside double quotes, where a shell would still run them)."""


def check_operators(template: str) -> None:
    """Refuse a template that uses shell syntax, naming the `sh -c` rewrite that would do
    what it seems to mean: values passed as positional arguments (`"$1"`), never pasted
    into the script, so a value is still exactly one argument."""
    script: list[str] = []
    refs: list[str] = []
    found: str | None = None
    quote = ""
    pos = 0
    while pos < len(template):
        char = template[pos]
        placeholder = _TOKEN.match(template, pos) if char == "{" else None
        if placeholder and placeholder.group(1) and parse_expr(placeholder.group(1)):
            refs.append(placeholder.group(0))
            arg = f"${len(refs)}" if len(refs) < 10 else f"${{{len(refs)}}}"
            script.append({"": f'"{arg}"', '"': arg, "'": f"'\"{arg}\"'"}[quote])
            pos = placeholder.end()
            continue
        if char == "\\" and quote != "'":
            script.append(template[pos : pos + 2])
            pos += 2
            continue
        if quote and char == quote:
            quote = ""
        elif not quote and char in "'\"":
            quote = char
        elif found is None and quote != "'":
            for op in SHELL_OPERATORS if not quote else ("$(", "`"):
                if template.startswith(op, pos):
                    found = op
                    break
        script.append(char)
        pos += 1
    if found is None:
        return
    rewrite = " ".join(["sh -c", shlex.quote("".join(script)), *(["sh", *refs] if refs else [])])
    raise BadInput(
        f"template uses the shell operator {found!r}, but templates never run through a shell",
        hint=(
            f"to mean it, use: {rewrite} (or single-quote {found!r} to pass it as text; a recipe"
            ' that means it literally sets "literal_operators": true)'
        ),
    )


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
            ref = parse_expr(match.group(1))
            parts.append(ref if ref is not None else token)
        pos = match.end()
    if pos < len(word):
        parts.append(word[pos:])
    return parts


def parse_expr(inner: str) -> Ref | None:
    """The placeholder inside braces, or None when it is not one (then it is text)."""
    if re.fullmatch(_NAME, inner):
        padded = _PADDED.fullmatch(inner)
        if padded and padded.group(2) in REPEAT_VARS:
            return Ref("", None, optional=True, expr=inner)
        return Ref(inner, None, expr=inner)
    if found := _DEFAULT.fullmatch(inner):
        return Ref(found.group(1), found.group(2), expr=inner)
    if found := _FALLBACK.fullmatch(inner):
        return Ref(_base_name(found.group(1)), None, optional=True, expr=inner)
    if found := _TERNARY.fullmatch(inner):
        return Ref(_base_name(found.group(1)), None, optional=True, expr=inner)
    if found := _SELECT.fullmatch(inner):
        if found.group(3) is not None and _arith(found.group(3), None, need_var=False) is None:
            return None
        return Ref(found.group(1), None, expr=inner)
    padded = _PADDED.fullmatch(inner)
    body = padded.group(2) if padded else inner
    if _arith(body, None) is not None:
        return Ref("", None, optional=True, expr=inner)
    return None


def _base_name(ref: str) -> str:
    return re.split(r"[.\[]", ref, maxsplit=1)[0]


def _arith(text: str, scope: Mapping[str, Any] | None, *, need_var: bool = True) -> int | None:
    """Integer arithmetic over numbers and the repeat variables, or None when `text` is not
    such an expression (outside `[...]` it must name a repeat variable, so `{5}` or awk's
    `{print $1}` stay text). With `scope` None only the syntax is checked."""
    tokens: list[str | int] = []
    pos = 0
    uses_var = False
    while pos < len(text):
        found = _ARITH_TOKEN.match(text, pos)
        if found is None:
            if text[pos:].strip():
                return None
            break
        number, var, op = found.groups()
        if number is not None:
            tokens.append(int(number))
        elif var is not None:
            uses_var = True
            tokens.append(int((scope or {}).get(var, 0)))
        else:
            tokens.append(op)
        pos = found.end()
    if not tokens or (need_var and not uses_var):
        return None
    try:
        value, rest = _sum(tokens, 0)
    except (IndexError, ZeroDivisionError, TypeError, ValueError):
        return None
    return value if rest == len(tokens) else None


def _sum(tokens: list[str | int], pos: int) -> tuple[int, int]:
    value, pos = _product(tokens, pos)
    while pos < len(tokens) and tokens[pos] in ("+", "-"):
        right, after = _product(tokens, pos + 1)
        value = value + right if tokens[pos] == "+" else value - right
        pos = after
    return value, pos


def _product(tokens: list[str | int], pos: int) -> tuple[int, int]:
    value, pos = _atom(tokens, pos)
    while pos < len(tokens) and tokens[pos] in ("*", "/", "%"):
        right, after = _atom(tokens, pos + 1)
        op = tokens[pos]
        if op == "*":
            value *= right
        elif op == "/":
            value = value // right if right else 0 // right  # raises ZeroDivisionError
        else:
            value %= right
        pos = after
    return value, pos


def _atom(tokens: list[str | int], pos: int) -> tuple[int, int]:
    token = tokens[pos]
    if token == "(":
        value, pos = _sum(tokens, pos + 1)
        if tokens[pos] != ")":
            raise ValueError("unbalanced parentheses")
        return value, pos + 1
    if token == "-":
        value, pos = _atom(tokens, pos + 1)
        return -value, pos
    if isinstance(token, int):
        return token, pos + 1
    raise ValueError(f"unexpected {token!r}")


def truthy(value: Any) -> bool:
    """The template language's truth: missing, empty, false, 0, no and [] are false."""
    if value is None or value is False or value == [] or value == {}:
        return False
    return value_text(value).strip().lower() not in FALSE_TEXTS


def _select(ref: str, values: Mapping[str, Any]) -> Any:
    """`name`, `name.length` or `name[arith]` looked up in values (None when missing)."""
    found = _SELECT.fullmatch(ref)
    if found is None:
        return values.get(ref)
    items = _as_list(found.group(1), values.get(found.group(1)))
    if items is None:
        return None
    if found.group(2):
        return len(items)
    index = _arith(found.group(3), values, need_var=False)
    if index is None or not -len(items) <= index < len(items):
        raise BadInput(
            f"{{{ref}}}: index {index} is outside {found.group(1)} ({len(items)} items)",
            hint="check the repeat count against the array's length",
        )
    return items[index]


def _as_list(name: str, value: Any) -> list[Any] | None:
    """An array value; a JSON array given as text (e.g. `-v items='[1,2]'`) counts too."""
    if value is None:
        return None
    if isinstance(value, list):
        return value
    if isinstance(value, str):
        try:
            parsed = decode(value, max_bytes=MAX_INPUT_BYTES, max_depth=INPUT_DEPTH)
        except Undecodable:
            parsed = None
        if isinstance(parsed, list):
            return parsed
    raise BadInput(
        f"{{{name}...}} needs an array, got {value_text(value)!r}",
        hint=f'pass a JSON array, e.g. -v {name}=\'["a","b"]\'',
    )


def render_ref(ref: Ref, values: Mapping[str, Any]) -> str:
    """The text one placeholder stands for."""
    expr = ref.expr or ref.name
    if ref.default is not None:
        return value_text(values[ref.name]) if ref.name in values else ref.default
    if found := _FALLBACK.fullmatch(expr):
        chosen = _select(found.group(1), values)
        return value_text(chosen) if truthy(chosen) else found.group(2)
    if found := _TERNARY.fullmatch(expr):
        chosen = _select(found.group(1), values)
        return found.group(2) if truthy(chosen) else found.group(3)
    if ref.name and re.fullmatch(_NAME, expr):
        if ref.name not in values:
            raise MissingValue(ref.name)
        return value_text(values[ref.name])
    if ref.name:
        if ref.name not in values:
            raise MissingValue(ref.name)
        return value_text(_select(expr, values))
    padded = _PADDED.fullmatch(expr)
    width, body = (len(padded.group(1)) + 1, padded.group(2)) if padded else (0, expr)
    number = _arith(body, values)
    if number is None:
        raise BadInput(f"{{{expr}}}: cannot compute it", hint="use integers and + - * / %")
    return str(number).zfill(width) if width else str(number)


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


class MissingValues(BadInput):
    """Placeholders with no value and no default, all of them at once (spawn's check), so
    a caller fixes them in one go; `names` lets an MCP or API caller say it in its terms."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        needed = ", ".join(f"{{{name}}}" for name in names)
        super().__init__(
            f"the template needs a value for {needed} and none was given",
            hint="pass " + " ".join(f"-v {name}=VALUE" for name in names),
        )


def substitute_word(word: str, values: Mapping[str, Any]) -> str:
    """The word with every placeholder replaced by its value's text."""
    out: list[str] = []
    for part in parse_word(word):
        out.append(part if isinstance(part, str) else render_ref(part, values))
    return "".join(out)


def render_argv(words: list[str], values: Mapping[str, Any]) -> list[str]:
    """The argv for one leaf: one argument per template word, always."""
    return [substitute_word(word, values) for word in words]


def missing_values(words: list[str], values: Mapping[str, Any]) -> list[str]:
    """Names that `render_argv` would fail on, without rendering."""
    missing: list[str] = []
    for ref in references(words):
        if (
            ref.name
            and not ref.optional
            and ref.name not in values
            and ref.name not in REPEAT_VARS
            and ref.default is None
            and ref.name not in missing
        ):
            missing.append(ref.name)
    return missing
