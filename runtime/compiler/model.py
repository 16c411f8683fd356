"""The recipe schema (pydantic) and its compiler to the plain form the runner executes.

A recipe is validated here once per distinct content (see `runtime.compiler.library` for the
cache), then stored in run.json as a normalized tree of plain dicts: the runner and the
hot CLI paths never import pydantic. `Recipe.model_json_schema()` is the recipe format's
JSON schema.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError, field_validator
from pydantic_core.core_schema import ValidationInfo

from runtime.compiler.placeholders import MAX_REPEAT, check_operators, split_words
from runtime.compiler.values import args_as_mapping
from runtime.core.errors import BadInput
from runtime.core.ids import is_valid_name

COMPILED_VERSION = 3
FailurePolicy = Literal["continue", "branch", "root"]
_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*")
_UNITS_MS = {"ms": 1.0, "s": 1000.0, "m": 60_000.0, "h": 3_600_000.0, None: 1.0}


def parse_duration_ms(value: object) -> float | None:
    """Milliseconds from a number of ms or a string like '500ms', '30s', '5m', '2h'."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError("expected a duration, got a boolean")
    if isinstance(value, int | float):
        ms = float(value)
    elif isinstance(value, str) and (match := _DURATION.fullmatch(value)):
        ms = float(match.group(1)) * _UNITS_MS[match.group(2)]
    else:
        raise ValueError("expected milliseconds (30000) or a string like '30s', '5m', '500ms'")
    if ms < 0:
        raise ValueError("a duration cannot be negative")
    return ms or None


Duration = Annotated[float | None, Field(default=None)]


class _Flags(BaseModel):
    """Keys allowed on any node, including the recipe's top level (the root node)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    label: str | None = Field(None, max_length=64)
    parallel: bool = False
    timeout: Duration = Field(None, description="ms, or '30s' / '5m'; 0 = unbounded")
    retry: int = Field(1, ge=1, le=100, description="maximum attempts (1 = no retry)")
    recover: str | None = Field(None, description="template run between failed attempts")
    failure: FailurePolicy = "continue"
    concurrency: int | None = Field(None, ge=1, le=64)
    min_successful: int | str | None = Field(
        None, description="0-64, or a placeholder such as '{quorum}' (rendered at run time)"
    )
    when: str | None = Field(None, description="run only when this renders truthy")
    repeat: int | str | None = Field(
        None, description="instances of this node: a count, or e.g. '{items.length}'"
    )
    delay: Duration = Field(None, description="wait before the node starts (ms or '2s')")
    output: Literal["stdout", "stderr", "both", "none"] = "stdout"
    host: str | None = Field(
        None,
        max_length=4096,
        description="run its commands on these hosts (`actors host add`): a name or a comma "
        "list, placeholders allowed; a `repeat`'s instance K takes name K mod their number",
    )

    @field_validator("timeout", "delay", mode="before")
    @classmethod
    def _duration(cls, value: object) -> float | None:
        return parse_duration_ms(value)

    @field_validator("repeat", "min_successful")
    @classmethod
    def _count(cls, value: int | str | None, info: ValidationInfo) -> int | str | None:
        limit = MAX_REPEAT if info.field_name == "repeat" else 64
        if isinstance(value, int) and not 0 <= value <= limit:
            raise ValueError(f"{info.field_name} must be 0-{limit}")
        if isinstance(value, str) and "{" not in value:
            example = "{items.length}" if info.field_name == "repeat" else "{quorum}"
            raise ValueError(
                f"{info.field_name} must be a count or a placeholder such as '{example}'"
            )
        return value


class ImportNode(BaseModel):
    """`{"name": ALIAS, "values": {...}, "defaults": {...}}` in a template list: replaced by
    the graph of the recipe imported under ALIAS."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, max_length=64)
    values: dict[str, JsonValue] = Field(default_factory=dict)
    defaults: dict[str, JsonValue] = Field(default_factory=dict)
    label: str | None = Field(None, max_length=64)


class ImportSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    from_: str = Field(alias="from", min_length=1)
    values: dict[str, JsonValue] = Field(default_factory=dict)
    defaults: dict[str, JsonValue] = Field(default_factory=dict)


class Node(_Flags):
    """A template node: a leaf command string, or a list run in sequence or in parallel."""

    template: str | list[str | Node | ImportNode]


class MailboxEntry(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: str = Field(min_length=1, max_length=128)


class Mailbox(BaseModel):
    model_config = ConfigDict(extra="forbid")
    accepts: list[str | MailboxEntry] = Field(default_factory=list)
    emits: list[str | MailboxEntry] = Field(default_factory=list)
    endpoint: Literal["mailbox", "fifo"] = "mailbox"


class Artifact(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str = Field(min_length=1)
    kind: str | None = None
    media_type: str | None = None
    required: bool = False


ARG_TYPES = ("string", "int", "number", "bool", "array", "enum", "path")


class ArgSpec(BaseModel):
    """A typed parameter: values given for it are checked and converted at spawn."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["string", "int", "number", "bool", "array", "enum", "path"] = "string"
    values: list[str] | None = Field(None, description="enum choices")
    default: JsonValue = None
    description: str | None = None


def _parse_args(raw: Any) -> dict[str, Any]:
    """`args` in the pi-actors list form or as an object `{name: {type, ...}}`."""
    mapping = args_as_mapping(raw)
    if not isinstance(mapping, dict):
        raise ValueError("args must be a list of 'name:type' or an object")
    return mapping


class Recipe(_Flags):
    """A saved definition: the template graph plus lifecycle metadata."""

    description: str | None = None
    disabled: bool = False
    async_: bool = Field(False, alias="async")
    template: str | list[str | Node | ImportNode]
    imports: dict[str, str | ImportSpec] = Field(default_factory=dict)
    values: dict[str, JsonValue] = Field(default_factory=dict)
    defaults: dict[str, JsonValue] = Field(default_factory=dict)
    artifacts: dict[str, str | Artifact] = Field(default_factory=dict)
    mailbox: Mailbox | None = None
    retire_when: Literal["children_terminal"] | None = None
    precheck: str | None = Field(None, description="command run at spawn; non-zero refuses it")
    group: str | None = Field(
        None,
        description="the group whose parallel limit its runs wait under (placeholders allowed)",
    )
    args: dict[str, ArgSpec] = Field(default_factory=dict)
    run_id: str | None = None
    name: str | None = Field(None, description="legacy; ignored for identity")
    literal_operators: bool = Field(
        False,
        description="its templates mean `&&`, `;`, `|`, `>` ... as plain words (else refused)",
    )

    @field_validator("args", mode="before")
    @classmethod
    def _args(cls, value: Any) -> dict[str, Any]:
        return _parse_args(value)

    @field_validator("args")
    @classmethod
    def _enums(cls, args: dict[str, ArgSpec]) -> dict[str, ArgSpec]:
        for name, spec in args.items():
            if (spec.type == "enum") != bool(spec.values):
                raise ValueError(f"{name}: enum(...) needs its choices, and only enum has them")
        return args

    @field_validator("values", "defaults", "artifacts", "args")
    @classmethod
    def _names(cls, mapping: dict[str, Any]) -> dict[str, Any]:
        for key in mapping:
            if not is_valid_name(key):
                raise ValueError(f"{key!r} is not a valid name (letters, digits, '_')")
        return mapping


MAX_IMPORT_DEPTH = 32
Resolver = Callable[[str, "str | None"], tuple[str, dict[str, Any], "str | None"]]
"""(reference, importing recipe's directory) -> (label, raw recipe, its directory)."""


@dataclass
class _Imports:
    """What an import node needs while one recipe is compiled."""

    specs: dict[str, str | ImportSpec]
    resolve: Resolver | None
    directory: str | None
    stack: tuple[str, ...]


def _compile_import(node: ImportNode, node_id: str, imports: _Imports) -> dict[str, Any]:
    spec = imports.specs.get(node.name)
    if spec is None:
        known = ", ".join(sorted(imports.specs)) or "none declared"
        raise BadInput(f"node {node_id}: no import named {node.name!r} ({known})")
    if imports.resolve is None:
        raise BadInput(f"node {node_id}: imports need a recipe file, not an inline template")
    ref = spec if isinstance(spec, str) else spec.from_
    label, raw, directory = imports.resolve(ref, imports.directory)
    if label in imports.stack:
        chain = " -> ".join([*imports.stack, label])
        raise BadInput(f"import cycle: {chain}", hint="an imported recipe must not import back")
    if len(imports.stack) >= MAX_IMPORT_DEPTH:
        raise BadInput(f"imports nested deeper than {MAX_IMPORT_DEPTH} at {label}")
    inner = compile_recipe(
        raw, source=label, resolve=imports.resolve, directory=directory, _stack=imports.stack
    )
    root = _reid(inner["root"], node_id)
    extra = spec if isinstance(spec, ImportSpec) else ImportSpec(**{"from": ref})
    root["scope_defaults"] = {**inner["defaults"], **extra.defaults, **node.defaults}
    root["scope"] = {**inner["values"], **extra.values, **node.values}
    if directory is not None:
        root["scope"]["recipe_dir"] = directory
    if node.label:
        root["label"] = node.label
    return root


def _reid(node: dict[str, Any], new_id: str) -> dict[str, Any]:
    """The imported graph with ids under the import node's place (ids stay unique)."""
    out = {**node, "id": new_id}
    if "children" in node:
        out["children"] = [
            _reid(child, f"{new_id}.{index}") for index, child in enumerate(node["children"], 1)
        ]
    return out


def _compile_node(
    node: _Flags,
    template: str | list[str | Node | ImportNode],
    node_id: str,
    imports: _Imports | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": node_id,
        "label": node.label,
        "timeout_ms": node.timeout,
        "retry": node.retry,
        "recover": split_words(node.recover) if node.recover else None,
        "failure": node.failure,
        "when": node.when,
        "repeat": node.repeat,
        "delay_ms": node.delay,
        "output": node.output,
        "host": node.host,
    }
    if isinstance(template, str):
        if node.parallel and node.repeat is not None:
            out.update(kind="leaf", words=split_words(template), repeat_parallel=True)
            # they apply to the instances as a group (_repeat_group copies them there)
            out.update(concurrency=node.concurrency, min_successful=node.min_successful)
            return out
        if node.parallel:
            raise BadInput(f"node {node_id}: 'parallel' needs a list template")
        out.update(kind="leaf", words=split_words(template))
        return out
    if not template:
        raise BadInput(f"node {node_id}: the template list is empty")
    children = []
    for index, child in enumerate(template, start=1):
        child_id = f"{node_id}.{index}"
        if isinstance(child, str):
            children.append(_compile_node(Node(template=child), child, child_id, imports))
        elif isinstance(child, ImportNode):
            children.append(
                _compile_import(child, child_id, imports or _Imports({}, None, None, ()))
            )
        else:
            children.append(_compile_node(child, child.template, child_id, imports))
    if node.host is not None:
        for compiled in children:
            _inherit_host(compiled, node.host)
    out.update(
        kind="parallel" if node.parallel else "sequence",
        children=children,
        concurrency=node.concurrency,
        min_successful=node.min_successful,
    )
    if isinstance(node.min_successful, int) and node.min_successful > len(children):
        raise BadInput(
            f"node {node_id}: min_successful={node.min_successful} but only "
            f"{len(children)} branches"
        )
    return out


def _inherit_host(node: dict[str, Any], host: str) -> None:
    """A list node's `host` is its commands' host, unless one names its own."""
    if node.get("host") is None:
        node["host"] = host
        for child in node.get("children", []):
            _inherit_host(child, host)


def _mailbox_entries(entries: list[str | MailboxEntry]) -> list[dict[str, Any]]:
    return [{"type": e} if isinstance(e, str) else e.model_dump() for e in entries]


def _command_texts(node: _Flags) -> list[str]:
    """Every command template of a node's tree (templates, `recover`, the recipe's
    `precheck`): what check_operators reads."""
    texts = [t for t in (node.recover, getattr(node, "precheck", None)) if t]
    template = getattr(node, "template", None)
    if isinstance(template, str):
        return [*texts, template]
    for child in template or []:
        if isinstance(child, str):
            texts.append(child)
        elif isinstance(child, Node):
            texts.extend(_command_texts(child))
    return texts


def compile_recipe(
    raw: Any,
    *,
    source: str,
    resolve: Resolver | None = None,
    directory: str | None = None,
    _stack: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Validate a parsed recipe and return its normalized plain form (imports resolved
    through `resolve`, with cycle and depth checks)."""
    if not isinstance(raw, dict):
        raise BadInput(f"{source}: a recipe is a JSON object, got {type(raw).__name__}")
    try:
        recipe = Recipe.model_validate(raw)
    except ValidationError as exc:
        raise BadInput(f"{source}: {format_validation_error(exc)}") from None
    if not recipe.literal_operators:
        try:
            for text in _command_texts(recipe):
                check_operators(text)
        except BadInput as exc:
            raise BadInput(f"{source}: {exc.message}", hint=exc.hint) from None
    artifacts = {
        name: (Artifact(path=spec) if isinstance(spec, str) else spec).model_dump()
        for name, spec in recipe.artifacts.items()
    }
    mailbox = recipe.mailbox or Mailbox()
    return {
        "compiled_version": COMPILED_VERSION,
        "description": recipe.description,
        "disabled": recipe.disabled,
        "async": recipe.async_,
        "values": recipe.values,
        "defaults": recipe.defaults,
        "artifacts": artifacts,
        "mailbox": {
            "accepts": _mailbox_entries(mailbox.accepts),
            "emits": _mailbox_entries(mailbox.emits),
            "endpoint": mailbox.endpoint,
        },
        "retire_when": recipe.retire_when,
        "group": recipe.group,
        "precheck": split_words(recipe.precheck) if recipe.precheck else None,
        "args": {name: spec.model_dump() for name, spec in recipe.args.items()},
        "run_id": recipe.run_id,
        "root": _compile_root(
            recipe, source, _Imports(recipe.imports, resolve, directory, (*_stack, source))
        ),
    }


def _compile_root(recipe: Recipe, source: str, imports: _Imports) -> dict[str, Any]:
    try:
        return _compile_node(recipe, recipe.template, "1", imports)
    except BadInput as exc:
        raise BadInput(f"{source}: {exc.message}", hint=exc.hint) from None


def _location(loc: tuple[int | str, ...]) -> str:
    """`('template', 'list[...]', 1, 'Node', 'timeout')` -> `template[1].timeout`."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif "[" in part or part in (
            "str",
            "int",
            "Node",
            "ImportNode",
            "ImportSpec",
            "MailboxEntry",
            "Artifact",
        ):
            continue  # pydantic's union member tags say nothing to a recipe author
        else:
            # a key with odd characters (a line break) is quoted: the error stays one line
            name = part if part.isidentifier() else json.dumps(part)
            out += f".{name}" if out else name
    return out or "recipe"


def format_validation_error(exc: ValidationError) -> str:
    """One line: the most specific problem with its location, and how many more exist.

    A union field (`template` is a string or a list) reports one error per member; the
    one that got deepest into the value is the one the author meant.
    """
    errors = exc.errors(include_url=False)
    best = max(errors, key=lambda e: (len(e["loc"]), e["type"] != "string_type"))
    msg = best["msg"]
    if best["type"] == "extra_forbidden":
        msg = "unknown key (see docs/recipes.md for the allowed keys)"
    msg = msg.removeprefix("Value error, ")
    where = _location(best["loc"])
    if where.endswith("template") and best["type"] in ("list_type", "string_type"):
        msg = "must be a command string or a list of nodes"
    others = {e["loc"][0] for e in errors} - {best["loc"][0]}
    more = f" (and problems in: {', '.join(sorted(map(str, others)))})" if others else ""
    return f"{where}: {msg}{more}"
