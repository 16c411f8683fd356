"""`actors mcp`: the coordinator tools over MCP (stdio), on trio.

Tools: spawn, message, inspect, inbox_read, recipes. Results are compact text for the
model plus structured content for clients that read it; input and state errors come
back as MCP tool errors carrying the CLI's one-line messages. The server acts as one
coordinator session (`--session`, else $ACTORS_SESSION, else the local user), so every
run it spawns delivers its follow-ups to that session's inbox.
"""

from __future__ import annotations

import json
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
  with `spawn`; it returns at once with the run's address.
- Do not poll. Each run delivers a follow-up to this session when it finishes or needs a
  decision; read them with `inbox_read` when you are told follow-ups arrived, or between
  tasks.
- Answer a decision point with `message` (the run's declared types), stop a run with
  `message` type `control.stop` (graceful) or `control.kill`.
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
    """The tool implementations, bound to one state root and one coordinator session."""

    def __init__(self, root: StateRoot, session: str) -> None:
        self.root, self.session = root, session
        self.home = str(root.path)  # how actors.api is told which state root

    def call(self, name: str, arguments: dict[str, Any]) -> tuple[str, Any]:
        model = TOOL_MODELS.get(name)
        if model is None:
            raise ActorsError(f"unknown tool {name!r}", hint=f"tools: {', '.join(TOOL_MODELS)}")
        try:
            params = model.model_validate(arguments)
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            where = ".".join(str(p) for p in first["loc"]) or name
            raise ActorsError(f"{name}: {where}: {first['msg']}") from None
        result: tuple[str, Any] = getattr(self, f"_{name}")(params)
        return result

    def _spawn(self, p: Any) -> tuple[str, Any]:
        from actors import api

        given = [x for x in (p.recipe, p.file, p.template) if x]
        if len(given) != 1:
            raise ActorsError("spawn needs exactly one of recipe, file or template")
        record = api.spawn(
            p.recipe or p.file,
            template=p.template,
            as_=p.as_,
            values=p.values,
            session=self.session,
            home=self.home,
        )
        out = {"run": record["run"], "address": record["address"], "state_dir": record["state_dir"]}
        return (
            f"started {record['address']}; its follow-up will arrive in this session (do not poll)"
        ), out

    def _message(self, p: Any) -> tuple[str, Any]:
        from actors import api

        outcome = api.message(
            p.to,
            p.type,
            p.body,
            summary=p.summary,
            reply_to=p.reply_to,
            session=self.session,
            home=self.home,
        )
        return _text(outcome), outcome

    def _inspect(self, p: Any) -> tuple[str, Any]:
        from actors import api

        data = api.inspect(p.target, p.view, lines=p.lines, status=p.status, home=self.home)
        return json.dumps(data, indent=1, default=str)[:20000], data

    def _inbox_read(self, p: Any) -> tuple[str, Any]:
        from runtime.delivery.engine import read_inbox

        unread = read_inbox(self.root, self.session, peek=p.peek, boundary="inbox_read")
        envelopes = [e["envelope"] for e in unread]
        lines = [f"{len(envelopes)} unread follow-up(s)"]
        for env in envelopes:
            lines.append(f"- {env.get('type')} from {env.get('from')}: {env.get('summary')}")
        return "\n".join(lines), {"followups": envelopes}

    def _recipes(self, p: Any) -> tuple[str, Any]:
        from runtime.compiler.library import search_dirs

        found: dict[str, dict[str, Any]] = {}
        for directory in search_dirs():
            for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
                if path.stem in found:
                    continue
                try:
                    description = json.loads(path.read_text()).get("description")
                except (OSError, ValueError, AttributeError):
                    description = "(unreadable)"
                found[path.stem] = {"file": str(path), "description": description}
        text = "\n".join(f"{name}: {info['description'] or ''}" for name, info in found.items())
        return text or "no recipes found", {"recipes": found}


def build_server(root: StateRoot, session: str) -> Server[Any]:
    tools = ActorsTools(root, session)

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=name, description=(model.__doc__ or "").strip(), inputSchema=schema(model)
                )
                for name, model in TOOL_MODELS.items()
            ]
        )

    async def call_tool(ctx: Any, params: Any) -> types.CallToolResult:
        import trio

        try:
            text, data = await trio.to_thread.run_sync(
                tools.call, params.name, params.arguments or {}
            )
        except ActorsError as exc:
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=_utf8(str(exc)))], isError=True
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

    return Server(
        "actors",
        instructions=GUIDANCE,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
    )


def serve(root: StateRoot, session: str) -> None:
    """Serve MCP on stdin/stdout until the client closes it (every request answered)."""
    from typing import cast

    import anyio
    from mcp.server.stdio import stdio_server

    from actors.mcp_wire import Wire, claim_stdio

    server = build_server(root, session)
    fd_in, fd_out = claim_stdio()

    async def main() -> None:
        from runtime.runs.guardian import watch_session_runs

        wire = Wire(fd_in, fd_out)
        async with anyio.create_task_group() as guard:  # fold this session's crashed runs
            guard.start_soon(watch_session_runs, root, session)
            async with stdio_server(cast(Any, wire), cast(Any, wire)) as (read, write):
                await server.run(read, write, server.create_initialization_options())
            guard.cancel_scope.cancel()

    anyio.run(main, backend="trio")
