"""MCP for a served environment: the tools as MCP tools, on two surfaces, one episode each.

OpenEnv's own ``/mcp`` handler and its WebSocket sessions read a duck-typed tool server
(``McpTools``: every call goes through ``env.step``, ``reset_episode`` through ``env.reset``).
Standard MCP clients (``fastmcp.Client``, the ``mcp`` SDK) speak streamable HTTP on the same path
and reach ``McpEndpoint``, on the ``mcp`` SDK's server, where each MCP session owns its own
environment; ``McpDispatch`` tells the two kinds of request apart (``speaks_mcp``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from mcp import types as mcp_types
from mcp.server.lowlevel import Server as McpServer
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from env.base import ToolCallAction, ToolEnvironment, ToolObservation

logger = logging.getLogger(__name__)

RESET_TOOL = "reset_episode"
STATE_TOOL = "episode_state"
MCP_PATH = "/mcp"


def reset_schema(tasks: list[str]) -> dict[str, Any]:
    """JSON schema of the ``reset_episode`` tool's arguments (both MCP surfaces)."""
    return {
        "type": "object",
        "properties": {
            "task": {"type": "string", "enum": tasks, "description": "Task to play"},
            "seed": {"type": "integer", "description": "Episode seed (same seed, same case)"},
        },
        "required": [],
    }


RESET_DESCRIPTION = (
    "Start a new case (episode) with a task and seed; returns the opening observation."
)


class McpTool:
    """The few attributes of a FastMCP tool that OpenEnv's ``/mcp`` handler reads."""

    def __init__(self, name: str, description: str, parameters: dict[str, Any], fn: Any):
        self.name = name
        self.description = description
        self.parameters = parameters
        self.inputSchema = parameters
        self.fn = fn


class McpTools:
    """An environment's tools as an MCP server (duck-typed: OpenEnv calls ``list_tools``).

    Every call is routed through ``env.step`` (or ``env.reset`` for ``reset_episode``), so MCP
    play is the same episode as WebSocket play; the result is the serialized observation.
    """

    def __init__(self, env: ToolEnvironment):
        self._env = env

    def tools(self) -> list[McpTool]:
        env = self._env
        out = [
            McpTool(
                RESET_TOOL,
                RESET_DESCRIPTION,
                reset_schema(list(env.tasks)),
                lambda **kw: _dump(env.reset(seed=kw.get("seed"), task=kw.get("task"))),
            )
        ]
        for spec in env.tool_specs():
            out.append(
                McpTool(spec.name, spec.description, spec.parameters, _caller(env, spec.name))
            )
        return out

    async def list_tools(self) -> list[McpTool]:
        return self.tools()


def _caller(env: ToolEnvironment, name: str):
    def call(**arguments: Any) -> dict[str, Any]:
        return _dump(env.step(ToolCallAction(tool=name, arguments=arguments)))

    return call


def _dump(obs: ToolObservation) -> dict[str, Any]:
    return obs.model_dump(mode="json")


@dataclass
class _McpEpisode:
    """What one MCP session owns: its environment and a lock that orders its calls."""

    env: ToolEnvironment
    lock: anyio.Lock


class McpEndpoint:
    """Standard MCP over streamable HTTP (the official ``mcp`` SDK), one episode per session.

    An ASGI app: ``initialize`` opens an MCP session (``Mcp-Session-Id``) and with it a fresh
    environment instance, held in the SDK server's per-session lifespan; ``DELETE``, the idle
    timeout or shutdown ends the session and closes that environment. ``tools/list`` gives
    ``reset_episode(task, seed)``, every environment tool (name, description and JSON schema from
    its ``ToolSpec``) and ``episode_state``. Environment tools run through ``env.step`` in a worker
    thread (one call at a time per session), so they are costed and graded exactly like ``/ws``
    play; the result is the observation, as structured content and as JSON text, flagged
    ``isError`` when the observation carries an error. Bad arguments, unknown tools and calls
    before ``reset_episode`` come back as MCP error results; nothing here raises to the client.

    The low-level SDK server is used rather than FastMCP's decorators because the tools are
    defined by JSON schemas (not Python signatures) and the SDK gives, publicly, the per-session
    lifespan, the session cap and the idle timeout that this needs.
    """

    def __init__(
        self,
        cls: type[ToolEnvironment],
        factory: Callable[[], ToolEnvironment],
        max_sessions: int = 64,
        session_timeout_s: float | None = 600.0,
    ):
        self.cls = cls
        self.factory = factory
        self.max_sessions = max_sessions
        self.session_timeout_s = session_timeout_s
        self.live = 0
        self.manager: StreamableHTTPSessionManager | None = None
        self.specs = cls.tool_specs_by_name()
        clash = {RESET_TOOL, STATE_TOOL} & set(self.specs)
        if clash:
            raise ValueError(f"{cls.name}: tool names reserved by the MCP endpoint: {clash}")
        self.tools = [
            mcp_types.Tool(
                name=RESET_TOOL,
                description=RESET_DESCRIPTION,
                inputSchema=reset_schema(list(cls.tasks)),
            ),
            *(
                mcp_types.Tool(name=s.name, description=s.description, inputSchema=s.parameters)
                for s in self.specs.values()
            ),
            mcp_types.Tool(
                name=STATE_TOOL,
                description="The episode's state: task, seed, steps, done, total reward, and "
                "the grade once the episode is over.",
                inputSchema={"type": "object", "properties": {}, "required": []},
            ),
        ]
        instructions = (cls.instructions or cls.__doc__ or cls.name).strip()
        self.server: McpServer[_McpEpisode, Any] = McpServer(
            f"{cls.name}-environment",
            version="0.1.0",
            instructions=f"{instructions}\n\nStart every case with {RESET_TOOL}(task, seed).",
            lifespan=self._session,
        )
        self.server.list_tools()(self._list_tools)
        self.server.call_tool(validate_input=False)(self._call_tool)

    @asynccontextmanager
    async def _session(self, _server: Any) -> AsyncIterator[_McpEpisode]:
        env = await anyio.to_thread.run_sync(self.factory)
        self.live += 1
        try:
            yield _McpEpisode(env, anyio.Lock())
        finally:
            self.live -= 1
            try:
                env.close()
            except Exception:  # closing is best effort; the session is gone either way
                logger.exception("closing the environment of an MCP session failed")

    async def _list_tools(self) -> list[mcp_types.Tool]:
        return self.tools

    async def _call_tool(self, name: str, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        episode: _McpEpisode = self.server.request_context.lifespan_context
        async with episode.lock:
            return await anyio.to_thread.run_sync(self._run, episode.env, name, arguments)

    def _run(
        self, env: ToolEnvironment, name: str, arguments: dict[str, Any]
    ) -> mcp_types.CallToolResult:
        try:
            if name == RESET_TOOL:
                return self._reset(env, arguments)
            if name == STATE_TOOL:
                state = env.state.model_dump(mode="json")
                grade = env.final_grade if env.done else None
                state["grade"] = grade.model_dump(mode="json") if grade else None
                return _mcp_result(state, error=False)
            if name not in self.specs:
                known = ", ".join(t.name for t in self.tools)
                return _mcp_error(f"unknown tool {name!r}; available: {known}")
            if not env._started:
                return _mcp_error(f"no episode yet: call {RESET_TOOL}(task, seed) first")
            obs = env.step(ToolCallAction(tool=name, arguments=arguments))
            return _mcp_result(obs.model_dump(mode="json"), error=obs.error is not None)
        except Exception as exc:  # a bug, not the caller's fault: no details (they may be hidden)
            logger.exception("MCP call %s failed", name)
            return _mcp_error(f"internal error in {name}: {type(exc).__name__}")

    def _reset(self, env: ToolEnvironment, arguments: dict[str, Any]) -> mcp_types.CallToolResult:
        extra = sorted(set(arguments) - {"task", "seed"})
        if extra:
            return _mcp_error(f"{RESET_TOOL} takes task and seed; unexpected: {', '.join(extra)}")
        task, seed = arguments.get("task"), arguments.get("seed")
        if task is not None and task not in self.cls.tasks:
            return _mcp_error(f"unknown task {task!r}; choose from {', '.join(self.cls.tasks)}")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            return _mcp_error(f"seed must be an integer, not {type(seed).__name__}")
        obs = env.reset(seed=seed, task=task)
        return _mcp_result(obs.model_dump(mode="json"), error=False)

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """Serve sessions while the block runs (the app's lifespan); they all end with it."""
        self.manager = StreamableHTTPSessionManager(
            self.server,
            json_response=True,
            session_idle_timeout=self.session_timeout_s,
            max_sessions=self.max_sessions,
        )
        try:
            async with self.manager.run():
                yield
        finally:
            self.manager = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        manager = self.manager
        if manager is None:
            response = _rpc_error(503, "the MCP endpoint is not running (app lifespan not started)")
            return await response(scope, receive, send)
        opening = scope["method"] == "POST" and not _header(scope, b"mcp-session-id")
        if opening and self.live >= self.max_sessions:
            message = (
                f"too many MCP sessions: {self.live} open, the cap is {self.max_sessions}; end "
                "one (DELETE /mcp with its Mcp-Session-Id) or wait for an idle one to expire"
            )
            return await _rpc_error(503, message)(scope, receive, send)
        await manager.handle_request(scope, receive, send)


class _SessionCloseNoise(logging.Filter):
    """Drop the SDK's traceback for a GET stream that a closing session ends (mcp 1.30).

    When a client ends its session (``DELETE``), the transport closes the stream its open
    ``GET`` listener reads, and the SDK logs that expected ``ClosedResourceError`` as an error.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        closed = isinstance(exc, anyio.ClosedResourceError)
        return not (closed and record.getMessage() == "Error in standalone SSE writer")


_SDK_TRANSPORT_LOG = logging.getLogger("mcp.server.streamable_http")
if not any(isinstance(f, _SessionCloseNoise) for f in _SDK_TRANSPORT_LOG.filters):
    _SDK_TRANSPORT_LOG.addFilter(_SessionCloseNoise())


def _mcp_result(data: dict[str, Any], error: bool) -> mcp_types.CallToolResult:
    text = mcp_types.TextContent(type="text", text=json.dumps(data))
    return mcp_types.CallToolResult(content=[text], structuredContent=data, isError=error)


def _mcp_error(message: str) -> mcp_types.CallToolResult:
    return mcp_types.CallToolResult(
        content=[mcp_types.TextContent(type="text", text=message)], isError=True
    )


def _rpc_error(status: int, message: str) -> JSONResponse:
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": message}}
    return JSONResponse(status_code=status, content=body)


def _header(scope: Any, name: bytes) -> bytes:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return value
    return b""


def speaks_mcp(scope: Any) -> bool:
    """Whether an HTTP request on ``/mcp`` is streamable-HTTP MCP rather than OpenEnv JSON-RPC.

    MCP clients must accept ``text/event-stream`` on POST and send ``Mcp-Session-Id`` once a
    session is open; ``GET`` and ``DELETE`` are MCP's alone (OpenEnv serves POST and a WebSocket
    there). ``/mcp/`` is always MCP. Everything else keeps going to OpenEnv's handler.
    """
    if scope["type"] != "http":
        return False
    path = scope["path"]
    if path == MCP_PATH + "/":
        return True
    if path != MCP_PATH:
        return False
    if scope["method"] in ("GET", "DELETE") or _header(scope, b"mcp-session-id"):
        return True
    return b"text/event-stream" in _header(scope, b"accept")


class McpDispatch:
    """ASGI middleware: streamable-HTTP MCP requests on ``/mcp`` go to the MCP endpoint."""

    def __init__(self, app: Any, endpoint: McpEndpoint):
        self.app = app
        self.endpoint = endpoint

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if speaks_mcp(scope):
            await self.endpoint(scope, receive, send)
        else:
            await self.app(scope, receive, send)


def add_mcp(app: FastAPI, endpoint: McpEndpoint) -> None:
    """Route MCP requests to ``endpoint`` and run its session manager in the app's lifespan."""
    app.add_middleware(McpDispatch, endpoint=endpoint)
    app.state.mcp = endpoint
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(a: Any) -> AsyncIterator[Any]:
        async with endpoint.run(), inner(a) as state:
            yield state

    app.router.lifespan_context = lifespan
