"""Serve any registered environment over OpenEnv: HTTP, WebSocket sessions, MCP and a web page.

One process serves one environment (``python -m env.server --env aml``). A client opens a
WebSocket on ``/ws``; that session owns its own environment instance for as long as the socket
lives (``reset`` with ``{"task", "seed"}``, then ``step`` with ``{"tool", "arguments"}``), so many
parallel rollouts never share an episode. The same session also answers MCP JSON-RPC messages
(``tools/list``, ``tools/call``), and ``/mcp`` serves MCP over HTTP or its own WebSocket: the tool
specs come from the environment class, and every MCP call goes through ``step`` so it pays the
same costs and is graded the same way. ``reset_episode`` is the one MCP-only tool: it starts a case.
Standard MCP clients (``fastmcp.Client``, the ``mcp`` SDK) reach the same ``/mcp`` path over
streamable HTTP (``McpEndpoint``, on the ``mcp`` SDK's server): each MCP session owns its own
episode; requests in OpenEnv's JSON-RPC shape still go to OpenEnv's handler (``speaks_mcp``).

HTTP ``/reset`` and ``/step`` are stateless, as in OpenEnv: each request builds a fresh
environment and drops it afterwards. ``/step`` therefore replays: it accepts ``task``, ``seed`` and
``history`` (earlier actions) next to ``action`` and rebuilds the episode deterministically before
running the new call. Without ``seed`` it answers with an error observation telling the caller to
use a WebSocket session. ``/state`` reports a fresh (unstarted) environment. Nothing served here
ever calls ``reveal()``: the hidden truth stays in the process.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import cache
from importlib import import_module
from pathlib import Path
from typing import Any

import anyio
from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse
from mcp import types as mcp_types
from mcp.server.lowlevel import Server as McpServer
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from openenv.core.env_server.http_server import create_fastapi_app
from openenv.core.env_server.types import ConcurrencyConfig, EnvironmentMetadata

from env.base import EpisodeState, ToolCallAction, ToolEnvironment, ToolObservation
from env.registry import env_class

logger = logging.getLogger(__name__)

WEB_DIR = Path(__file__).with_name("web")
RESET_TOOL = "reset_episode"
STATE_TOOL = "episode_state"
MCP_PATH = "/mcp"
MAX_HISTORY = 1000


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


class ServedMixin:
    """What serving adds to an environment: MCP tools, metadata and replaying HTTP ``/step``."""

    @property
    def mcp_server(self) -> McpTools:
        return McpTools(self)  # type: ignore[arg-type]

    def get_metadata(self) -> EnvironmentMetadata:
        cls = type(self)
        readme = _readme(cls.name)
        description = (cls.instructions or cls.__doc__ or cls.name).strip().split("\n\n")[0]
        return EnvironmentMetadata(
            name=cls.name,
            description=description,
            readme_content=readme,
            version="0.1.0",
            documentation_url="docs/SERVING.md",
        )

    # OpenEnv runs a synchronous step in a thread pool, one hop per message. A step of ours is tens
    # of microseconds of pure Python, so the hop costs more than the work and, under the GIL, buys
    # no parallelism: OpenEnv awaits this override on the event loop instead. Resets keep the hop:
    # a world build can take ~20 ms (gang hard), and in a thread the GIL's switch interval lets the
    # loop serve other sessions meanwhile (benchmarks/bench_server.py: gang p99 222 ms, 700 inline).
    async def step_async(
        self, action: Any, timeout_s: float | None = None, **kwargs: Any
    ) -> ToolObservation:
        return self.step(action, timeout_s=timeout_s, **kwargs)

    def step(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> ToolObservation:
        """Run one call; a stateless caller passes ``task``, ``seed`` and ``history`` to replay."""
        env: ToolEnvironment = self  # type: ignore[assignment]
        if not env._started and kwargs.get("seed") is not None:
            env.reset(seed=kwargs["seed"], task=kwargs.get("task"))
            history = kwargs.get("history") or []
            if not isinstance(history, list) or len(history) > MAX_HISTORY:
                return env._observe(None, None, "", "history must be a list of actions", 0.0)
            for past in history:
                if env.done:
                    break
                super().step(past)  # type: ignore[misc]
        elif not env._started:
            return env._observe(
                None,
                None,
                "",
                "no episode yet: call reset first (HTTP /step is stateless: use a /ws "
                "session, or pass task, seed and history to replay)",
                0.0,
            )
        return super().step(action, timeout_s=timeout_s)  # type: ignore[misc]


@cache
def _readme(name: str) -> str | None:
    path = Path(__file__).parent / name / "README.md"
    return path.read_text(encoding="utf-8") if path.is_file() else None


def resolve(env: str | type[ToolEnvironment]) -> type[ToolEnvironment]:
    """An environment class from a registry name, a ``module:Class`` string or a class."""
    if isinstance(env, type):
        return env
    if ":" in env:
        module, _, attr = env.partition(":")
        return getattr(import_module(module), attr)
    return env_class(env)


def served_class(cls: type[ToolEnvironment]) -> type[ToolEnvironment]:
    """The environment class with serving behaviour mixed in (same name, same tools)."""
    return type(cls.__name__, (ServedMixin, cls), {"__doc__": cls.__doc__})


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


def _add_mcp(app: FastAPI, endpoint: McpEndpoint) -> None:
    """Route MCP requests to ``endpoint`` and run its session manager in the app's lifespan."""
    app.add_middleware(McpDispatch, endpoint=endpoint)
    app.state.mcp = endpoint
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(a: Any) -> AsyncIterator[Any]:
        async with endpoint.run(), inner(a) as state:
            yield state

    app.router.lifespan_context = lifespan


def create_env_app(
    env: str | type[ToolEnvironment],
    max_concurrent_envs: int = 64,
    session_timeout_s: float | None = 600.0,
    **config: Any,
) -> FastAPI:
    """The OpenEnv app for one environment, plus the web page at ``/web``.

    Args:
        env: Registry name (``"aml"``), ``module:Class`` string or environment class.
        max_concurrent_envs: WebSocket/MCP sessions served at once; more are refused clearly.
        session_timeout_s: Idle sessions (no message for this long) are closed; None keeps them.
        **config: Overrides of the environment's config (e.g. ``max_steps=20``).
    """
    cls = resolve(env)
    served = served_class(cls)
    if config:
        cls.config_class(**config)  # fail now, with the config's own message

    def factory() -> ToolEnvironment:
        return served(**config)

    factory.__name__ = cls.__name__
    app = create_fastapi_app(
        factory,
        ToolCallAction,
        ToolObservation,
        concurrency_config=ConcurrencyConfig(
            max_concurrent_envs=max_concurrent_envs, session_timeout=session_timeout_s
        ),
        env_name=cls.name,
        state_cls=EpisodeState,
    )
    app.title = f"{cls.name} environment"
    _add_page(app, cls)
    _add_replay(app, cls, config)
    _add_mcp(app, McpEndpoint(cls, factory, max_concurrent_envs, session_timeout_s))

    @app.exception_handler(ValueError)
    async def _bad_value(request: Request, exc: ValueError) -> JSONResponse:
        return JSONResponse(status_code=400, content={"detail": str(exc)})

    return app


def replay_calls(
    env: ToolEnvironment, task: str, seed: int, prefix: list[Any], calls: list[Any]
) -> dict[str, Any]:
    """Replay ``prefix`` then ``calls`` on (task, seed): what a trainer's rewards need.

    The report of the whole episode, the prefix's steps and evidence coverage, and which of the
    completion's calls failed (the same numbers ``rewards.replay`` reads from an in-process
    replay). A prefix that already ends the episode is a ``ValueError`` (a broken steps row)."""
    env.reset(seed=seed, task=task)
    for call in prefix:
        if env.done:
            break
        env.step(call)
    prefix_steps = env.step_count
    coverage = float(env.report().metrics.get("evidence_coverage", 0.0)) if prefix else 0.0
    if prefix and env.done:
        raise ValueError("the prefix already ends the episode: a cut must precede the end")
    for call in calls:
        if env.done:
            break
        env.step(call)
    return {
        "report": env.report().model_dump(mode="json"),
        "prefix_steps": prefix_steps,
        "prefix_coverage": coverage,
        "errors": [record.error is not None for record in env.trace[prefix_steps:]],
        "max_steps": env.config.max_steps,
        "max_argument_chars": env.config.max_argument_chars,
    }


def _add_replay(app: FastAPI, cls: type[ToolEnvironment], config: dict[str, Any]) -> None:
    """``POST /replay``: a whole episode from (task, seed, calls), for a trainer's rewards.

    Stateless like ``/step``: a fresh environment per request, dropped afterwards, so any server
    of the environment answers any row and a failed request can go to another one. The answer is
    the episode report (grade, step rewards, metrics) — what the episode's own observations and
    its final grade already show a player — and never ``reveal()``."""

    @app.post("/replay", tags=["Training"])
    def _replay(body: dict[str, Any]) -> JSONResponse:
        try:
            name = body.get("env", cls.name)
            if name != cls.name:
                raise ValueError(f"this server plays {cls.name!r}, not {name!r}")
            seed = body.get("seed")
            if isinstance(seed, bool) or not isinstance(seed, int):
                raise ValueError(f"seed must be an integer, got {seed!r}")
            task = body.get("task") or None
            prefix, calls = body.get("prefix") or [], body.get("calls") or []
            if not isinstance(prefix, list) or not isinstance(calls, list):
                raise ValueError("prefix and calls must be lists of {tool, arguments}")
            if len(prefix) + len(calls) > MAX_HISTORY:
                raise ValueError(f"at most {MAX_HISTORY} calls per replay")
            return JSONResponse(replay_calls(cls(**config), task, seed, prefix, calls))
        except Exception as exc:  # the row's fault or an env bug: the caller scores it 0
            if not isinstance(exc, ValueError):
                logger.exception("replay of %s/%s failed", body.get("task"), body.get("seed"))
            detail = {"kind": type(exc).__name__, "message": str(exc)[:500]}
            return JSONResponse(status_code=422, content={"detail": detail})


def _add_page(app: FastAPI, cls: type[ToolEnvironment]) -> None:
    """The page (static HTML/JS over the ``/ws`` session) and the public config it reads."""

    @app.get("/", include_in_schema=False)
    async def _root() -> RedirectResponse:
        return RedirectResponse("/web")

    @app.get("/web", include_in_schema=False)
    async def _page() -> FileResponse:
        return FileResponse(WEB_DIR / "index.html", media_type="text/html")

    @app.get("/web/config", tags=["Web"])
    async def _web_config() -> dict[str, Any]:
        return {
            "env": cls.name,
            "tasks": list(cls.tasks),
            "instructions": cls.instructions,
            "tools": [
                {**spec.openai_schema()["function"], "kind": spec.kind, "terminal": spec.terminal}
                for spec in cls.tool_specs()
            ],
        }


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


UVICORN_SETTINGS: dict[str, Any] = {
    "ws_max_size": 4 * 1024 * 1024,
    "ws_per_message_deflate": False,
}
"""uvicorn's WebSocket settings. No per-message compression: observations are a few hundred bytes
of JSON, which deflate barely shrinks, while compressing and inflating every frame costs CPU at
both ends (measured by ``benchmarks/bench_server.py``, RESULTS.md)."""


def main(argv: list[str] | None = None) -> None:
    """``python -m env.server --env aml --port 8000``: serve one environment with uvicorn."""
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default=os.environ.get("ENV_NAME", "aml"), help="name or mod:Cls")
    parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    parser.add_argument("--max-concurrent-envs", type=int, default=64)
    parser.add_argument(
        "--session-timeout", type=float, default=600.0, help="idle seconds; 0 = never"
    )
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args(argv)
    app = create_env_app(
        args.env,
        max_concurrent_envs=args.max_concurrent_envs,
        session_timeout_s=args.session_timeout or None,
    )
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, **UVICORN_SETTINGS)


def __getattr__(name: str) -> Any:
    """``env.server:app`` for ASGI runners (openenv.yaml): the app of ``$ENV_NAME``."""
    if name == "app":
        return create_env_app(os.environ.get("ENV_NAME", "aml"))
    raise AttributeError(name)


if __name__ == "__main__":
    main()
