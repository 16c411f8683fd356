"""`actors mcp`: the coordinator tools over MCP (stdio), on trio.

Tools: spawn, restart, message, result, status, tools_register, inspect, inbox_read,
recipes (every verb a follow-up names has its tool). Claude Code and Codex hand the model a result's structured content alone when there is one (OpenCode its text), so
both say the same few model-oriented things: spawn's run and its "do not poll" note,
each follow-up's type, sender and summary (bodies on request), inspect compact unless
`verbose`. Input and state errors come back as MCP tool errors carrying the CLI's
one-line messages. Each call acts for the harness session that made it
(actors.mcp_session), so a run it spawns delivers its follow-ups to that session.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import mcp.types as types
from mcp.server.lowlevel import Server
from pydantic import ValidationError

from actors.tool_models import TOOL_MODELS, schema
from runtime.core.errors import ActorsError
from runtime.store.layout import StateRoot

GUIDANCE = """\
You can run long or background work as detached run actors (the `actors` tools).
Working rules:
- Spawn anything that may outlive this turn (builds, test suites, watchers, subagents)
  with `spawn`; it returns at once with the run's address. Give it a `group` to hold
  how many run at once (it is then queued until a slot frees) or `after` runs it
  needs; `restart` starts a finished run again.
- Do not poll. Each run delivers a follow-up to this session when it finishes or needs a
  decision; read them with `inbox_read` when you are told follow-ups arrived, or between
  tasks.
- Answer a decision point with `message` (the run's declared types), stop a run with
  `message` type `control.stop` (graceful) or `control.kill`.
- A follow-up's `next: actors result RUN` is the `result` tool (run: RUN), `actors status
  RUN` the `status` tool, `actors tools register NAME --from-run RUN` the
  `tools_register` tool (only once the operator agreed).
- Use `inspect` only when a follow-up asks for it or a real decision depends on state,
  never just because time passed.
"""


def _text(data: Any) -> str:
    if isinstance(data, dict):
        parts = [
            f"{k}={v}" for k, v in data.items() if not isinstance(v, dict | list) and v is not None
        ]
        return " ".join(parts) or json.dumps(data, default=str)
    return json.dumps(data, default=str)


def _utf8(text: str) -> str:
    """`text` as valid UTF-8: a lone surrogate (an undecodable file name, say) becomes
    `?`, since the response could not be written at all otherwise."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


class ActorsTools:
    """The tool implementations, bound to one state root; each call acts for the
    session its caller is (actors.mcp_session), `fallback` when the call names none."""

    def __init__(
        self,
        root: StateRoot,
        session: str,
        *,
        explicit: bool = False,
        on_session: Callable[[str], None] | None = None,
        answered: dict[Any, Callable[[bool], None]] | None = None,
    ) -> None:
        from actors.mcp_session import SessionResolver

        self.root = root
        self.sessions = SessionResolver(root, session, explicit=explicit)
        self.home = str(root.path)  # how actors.api is told which state root
        self.served = {session}  # the sessions whose runs this server guards
        self.on_session = on_session
        self.answered = answered
        """Request id -> what to do once its answer is written (True) or could not be
        (False): the wire's (actors.mcp_wire.Wire.answered). None: settle at once."""

    def call(
        self,
        name: str,
        arguments: dict[str, Any],
        meta: dict[str, Any] | None = None,
        request_id: Any = None,
    ) -> tuple[str, Any]:
        from actors.mcp_session import CALLER_ARG

        model = TOOL_MODELS.get(name)
        if model is None:
            raise ActorsError(f"unknown tool {name!r}", hint=f"tools: {', '.join(TOOL_MODELS)}")
        arguments = dict(arguments)
        caller = arguments.pop(CALLER_ARG, None)
        try:
            params = model.model_validate(arguments)
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            where = ".".join(str(p) for p in first["loc"]) or name
            raise ActorsError(f"{name}: {where}: {first['msg']}") from None
        session = self.sessions.resolve(meta, caller)
        if session not in self.served:  # a thread or session new to this server
            self.served.add(session)
            if self.on_session is not None:
                self.on_session(session)
        if name == "inbox_read":
            return self._inbox_read(params, session, request_id)
        result: tuple[str, Any] = getattr(self, f"_{name}")(params, session)
        return result

    def _spawn(self, p: Any, session: str) -> tuple[str, Any]:
        from actors import api

        given = [x for x in (p.recipe, p.file, p.template) if x]
        if len(given) != 1:
            raise ActorsError("spawn needs exactly one of recipe, file or template")
        from runtime.compiler.placeholders import MissingValues

        try:
            record = api.spawn(
                p.recipe or p.file,
                template=p.template,
                as_=p.as_,
                values=p.values,
                group=p.group,
                after=p.after,
                session=session,
                home=self.home,
            )
        except MissingValues as exc:  # said in this tool's terms, not the CLI's -v
            example = ", ".join(f'"{name}": ...' for name in exc.names)
            raise ActorsError(
                f"spawn: no value for {', '.join(exc.names)}",
                hint=f"call spawn again with all of them in values: {{{example}}}",
            ) from None
        return self._started(record)

    def _started(self, record: Any) -> tuple[str, Any]:
        """A run was started (spawn, restart): its address, whether it is queued, and
        that its follow-up will come by itself."""
        queued = None
        if record.get("group") or record.get("after"):
            from runtime.runner.gate import expected_wait

            queued = expected_wait(self.root, dict(record))
        state = f"queued (waits for {queued})" if queued else "started"
        note = (
            f"{state} {record['address']}; its follow-up will arrive in this session (do not poll)"
        )
        data = {"run": record["run"], "note": note}
        if queued:
            data["status"] = "queued"
        return note, data

    def _restart(self, p: Any, session: str) -> tuple[str, Any]:
        from actors import api

        record = api.restart(p.run, as_=p.as_, session=session, home=self.home)
        return self._started(record)

    def _message(self, p: Any, session: str) -> tuple[str, Any]:
        from actors import api
        from runtime.hosts.address import is_remote

        if is_remote(p.to):  # a run on a host (runtime.hosts)
            from runtime.hosts.verbs import remote_message
            from runtime.runs.ownership import Principal

            sent = remote_message(
                self.root, p.to, p.type, p.body, principal=Principal(session), summary=p.summary
            )
            return _text(sent), _scalars(sent)

        outcome = api.message(
            p.to,
            p.type,
            p.body,
            summary=p.summary,
            reply_to=p.reply_to,
            session=session,
            home=self.home,
        )
        return _text(outcome), _scalars(outcome)

    def _result(self, p: Any, session: str) -> tuple[str, Any]:
        """What `actors result` shows, compact: the per-node records and the output's
        path are left out, the run's secrets masked, every run-written string inert."""
        from actors import api
        from runtime.compiler.redact import redact_deep, run_secrets
        from runtime.delivery.followups import result_line
        from runtime.hosts.address import is_remote
        from runtime.views.status import find_run

        if is_remote(p.run):  # a run on a host: its host answers
            return self._remote(p.run, "result", session)
        found = dict(api.result(p.run, home=self.home))
        paths, record = find_run(self.root, str(found["run"]))
        if found.get("run_instance_id"):
            said = result_line(paths, record, found)  # type: ignore[arg-type]
            found["result_line"] = said
        for key in ("nodes", "output_file", "run_instance_id"):
            found.pop(key, None)
        data = _compact(redact_deep(found, run_secrets(record)))
        text = json.dumps(data, separators=(",", ":"), ensure_ascii=False, default=str)[:8000]
        return text, _bounded(data, 8000)

    def _status(self, p: Any, session: str) -> tuple[str, Any]:
        """What `actors status --json` shows (its secrets masked), compact."""
        from runtime.hosts.address import is_remote
        from runtime.store.layout import parse_run_ref
        from runtime.views.status import find_run, shown_status

        if is_remote(p.run):
            return self._remote(p.run, "status", session)
        data = _compact(dict(shown_status(*find_run(self.root, parse_run_ref(p.run)))))
        text = json.dumps(data, separators=(",", ":"), ensure_ascii=False, default=str)[:8000]
        return text, _bounded(data, 8000)

    def _remote(self, address: str, verb: str, session: str) -> tuple[str, Any]:
        """`status` / `result` of a run on a host, as its host answers them, compact."""
        from runtime.hosts.verbs import remote_json
        from runtime.runs.ownership import Principal

        data = _compact(remote_json(self.root, address, verb, principal=Principal(session)))
        for key in ("nodes", "output_file", "run_instance_id", "state_dir"):
            data.pop(key, None)
        text = json.dumps(data, separators=(",", ":"), ensure_ascii=False, default=str)[:8000]
        return text, _bounded(data, 8000)

    def _tools_register(self, p: Any, session: str) -> tuple[str, Any]:
        from runtime.compiler.tools import register_tool
        from runtime.runs.keep import recipe_from_run

        data, label = recipe_from_run(self.root, p.from_run)
        target, replaced = register_tool(p.name, data=data, label=label, update=p.update)
        state = "updated" if replaced else "registered"
        return f"tool {p.name} {state}: {target}", {"name": p.name, "path": str(target)}

    def _inspect(self, p: Any, session: str) -> tuple[str, Any]:
        from actors import api

        data = api.inspect(p.target, p.view, lines=p.lines, status=p.status, home=self.home)
        if p.verbose:
            return json.dumps(data, indent=1, default=str)[:20000], _bounded(data, 20000)
        data = _compact(data)
        text = json.dumps(data, separators=(",", ":"), default=str)[:8000]
        return text, _bounded(data, 8000)

    def _inbox_read(self, p: Any, session: str, request_id: Any) -> tuple[str, Any]:
        """The unread follow-ups, taken for this request and marked read only once its
        answer is written to the client; given back unread when it cannot be."""
        from functools import partial

        from runtime.delivery.engine import read_inbox, settle_inbox, take_inbox
        from runtime.delivery.render import entry_body_file, followups_text

        if p.peek:
            unread = read_inbox(self.root, session, peek=True, boundary="inbox_read")
        else:
            unread = take_inbox(self.root, session)
            settle = partial(settle_inbox, self.root, session, unread, boundary="inbox_read")
            if self.answered is None or request_id is None:
                settle(shown=True)
            else:
                self.answered[request_id] = lambda written: settle(shown=written)
        text = followups_text(self.root, session, unread, with_body=p.bodies)
        shown = [
            _followup(e["envelope"], p.bodies, entry_body_file(self.root, session, e))
            for e in unread
        ]
        return text, {"followups": shown}

    def _recipes(self, p: Any, session: str) -> tuple[str, Any]:
        from runtime.compiler.library import load_recipe_file, search_dirs

        found: dict[str, str] = {}
        for directory in search_dirs():
            for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
                if path.stem in found:
                    continue
                raw, _problem = load_recipe_file(path)  # bounded: a folder anyone could fill
                description = "(unreadable)" if raw is None else raw.get("description")
                found[path.stem] = str(description or "")
        text = "\n".join(f"{name}: {info}" for name, info in found.items())
        return text or "no recipes found", {"recipes": found}


def _error_line(exc: Exception, root: StateRoot) -> str:
    """A failed call's answer: its one line when the caller (or the machine: a full
    disk, no descriptor left) can fix it, else an internal error, its traceback on
    stderr (the harness's MCP log)."""
    from runtime.core.errors import log_exception, resource_error

    if isinstance(exc, ActorsError):
        return str(exc)
    found = resource_error(exc, where=str(root.path))
    if found is not None:
        return str(found)
    log_exception(exc)
    return f"internal error: {type(exc).__name__}: {exc} (please report it)"


def _scalars(data: Any) -> Any:
    """A dict's scalar fields (what a model acts on), else the value as it is."""
    if not isinstance(data, dict):
        return data
    return {k: v for k, v in data.items() if v is not None and not isinstance(v, dict | list)}


def _bounded(data: Any, limit: int) -> Any:
    """A view as structured content, which Claude Code hands a model instead of the text:
    its run-written strings made inert (runtime.delivery.render), and only when it is
    within `limit` characters as JSON; a larger view is left to the text, which is cut
    to that limit (JSON, so no run-written line starts a line of it)."""
    from runtime.delivery.render import inert_value

    try:
        size = len(json.dumps(data, default=str))
    except (ValueError, TypeError, RecursionError):
        return None
    return inert_value(data) if size <= limit else None


def _compact(data: Any) -> Any:
    """`data` without empty values (None, "", [], {}), at every depth."""
    if isinstance(data, dict):
        pruned = {k: _compact(v) for k, v in data.items()}
        return {k: v for k, v in pruned.items() if v not in (None, "", [], {})}
    if isinstance(data, list):
        return [_compact(v) for v in data]
    return data


def _followup(envelope: dict[str, Any], body: bool, body_file: str | None) -> dict[str, Any]:
    """What the model needs of a follow-up: who, what, the one-line summary (which says
    what to do next); the body only on request, else its file (`body_file`, as the text
    answer's `[actors] body:` line names it). Run-written, and Claude Code hands a
    model the structured content alone: so every string is made inert and the summary
    and body are bounded as runtime.delivery.render bounds them (a body past the bound
    is its cut text, with `body_cut` saying how much is left out); being JSON strings,
    none of them can start a line of the model's context."""
    from runtime.core.terminal import inert, one_line
    from runtime.delivery.render import SUMMARY_CHARS, body_text, bound, inert_value, token

    shown: dict[str, Any] = {
        "type": token(envelope.get("type") or "message"),
        "from": token(envelope.get("from") or "?"),
        "summary": one_line(str(envelope.get("summary") or ""), SUMMARY_CHARS),
    }
    if not body and body_file is not None:
        shown["body_file"] = inert(body_file)
    if body and envelope.get("body") is not None:
        text = body_text(envelope["body"])
        cut = bound(text)
        if cut.more_bytes or cut.more_lines:
            shown["body"] = "\n".join(cut.lines)
            shown["body_cut"] = {"more_bytes": cut.more_bytes, "more_lines": cut.more_lines}
        else:
            shown["body"] = inert_value(envelope["body"])
    return shown


def _annotations(name: str) -> types.ToolAnnotations:
    """What a harness may assume without asking: inspect and recipes change nothing;
    message may stop or kill a run."""
    from actors.tool_models import TOOLS

    return types.ToolAnnotations(
        title=name,
        readOnlyHint=TOOLS[name].read_only,
        destructiveHint=name == "message",
        idempotentHint=TOOLS[name].read_only,
        openWorldHint=name == "spawn",
    )


def build_server(
    root: StateRoot,
    session: str,
    *,
    explicit: bool = False,
    on_session: Callable[[str], None] | None = None,
    answered: dict[Any, Callable[[bool], None]] | None = None,
) -> Server[Any]:
    tools = ActorsTools(root, session, explicit=explicit, on_session=on_session, answered=answered)

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=name,
                    description=(model.__doc__ or "").strip(),
                    inputSchema=schema(model),
                    annotations=_annotations(name),
                )
                for name, model in TOOL_MODELS.items()
            ]
        )

    async def call_tool(ctx: Any, params: Any) -> types.CallToolResult:
        import trio

        try:
            meta = params.meta if isinstance(params.meta, dict) else None
            text, data = await trio.to_thread.run_sync(
                tools.call, params.name, params.arguments or {}, meta, ctx.request_id
            )
        except Exception as exc:  # every call is answered, with the CLI's one line
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=_utf8(_error_line(exc, root)))],
                isError=True,
            )
        structured = json.loads(_utf8(json.dumps(data, default=str, ensure_ascii=False)))
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=_utf8(text))],
            structuredContent=structured if isinstance(structured, dict) else None,
        )

    async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
        return types.ListPromptsResult(
            prompts=[types.Prompt(name="actors-guide", description="How to coordinate run actors")]
        )

    async def get_prompt(ctx: Any, params: Any) -> types.GetPromptResult:
        return types.GetPromptResult(
            description="How to coordinate run actors",
            messages=[
                types.PromptMessage(
                    role="user", content=types.TextContent(type="text", text=GUIDANCE)
                )
            ],
        )

    from actors._version import __version__

    return Server(
        "actors",
        version=__version__,
        instructions=GUIDANCE,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
    )


def serve(root: StateRoot, session: str, *, explicit: bool = False) -> None:
    """Serve MCP on stdin/stdout until the client closes it (every request answered)."""
    from typing import cast

    import anyio
    from mcp.server.stdio import stdio_server

    from actors.mcp_wire import Wire, claim_stdio

    fd_in, fd_out = claim_stdio()
    from actors.mcp_session import caller_key

    caller_key(root, create=True)  # before any call: the OpenCode plugin signs with it

    import contextlib
    import threading

    from runtime.runner.guardian import guarding

    # Fold the crashed runs of every session this server acts for: the one it started
    # with, and each Codex thread or OpenCode session that calls it later (a guardian
    # each, on a thread of its own: runtime.runner.guardian).
    guards, lock = contextlib.ExitStack(), threading.Lock()

    def guard_session(served: str) -> None:
        with lock:
            guards.enter_context(guarding(root, served))

    async def main() -> None:
        wire = Wire(fd_in, fd_out)
        server = build_server(
            root, session, explicit=explicit, on_session=guard_session, answered=wire.answered
        )
        async with stdio_server(cast(Any, wire), cast(Any, wire)) as (read, write):
            await server.run(read, write, server.create_initialization_options())

    with guards:
        guard_session(session)
        anyio.run(main, backend="trio")
