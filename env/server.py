"""Serve any registered environment over OpenEnv: HTTP, WebSocket sessions, MCP and a web page.

One process serves one environment (``python -m env.server --env aml``). A client opens a
WebSocket on ``/ws``; that session owns its own environment instance for as long as the socket
lives (``reset`` with ``{"task", "seed"}``, then ``step`` with ``{"tool", "arguments"}``), so many
parallel rollouts never share an episode. The same session also answers MCP JSON-RPC messages
(``tools/list``, ``tools/call``), and ``/mcp`` serves MCP over HTTP or its own WebSocket: the tool
specs come from the environment class, and every MCP call goes through ``step`` so it pays the
same costs and is graded the same way. ``reset_episode`` is the one MCP-only tool: it starts a case.

HTTP ``/reset`` and ``/step`` are stateless, as in OpenEnv: each request builds a fresh
environment and drops it afterwards. ``/step`` therefore replays: it accepts ``task``, ``seed`` and
``history`` (earlier actions) next to ``action`` and rebuilds the episode deterministically before
running the new call. Without ``seed`` it answers with an error observation telling the caller to
use a WebSocket session. ``/state`` reports a fresh (unstarted) environment. Nothing served here
ever calls ``reveal()``: the hidden truth stays in the process.
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import threading
import time
from functools import cache
from importlib import import_module
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse
from openenv.core.env_server.http_server import create_fastapi_app
from openenv.core.env_server.types import ConcurrencyConfig, EnvironmentMetadata

from env.base import EpisodeState, ToolCallAction, ToolEnvironment, ToolObservation
from env.registry import env_class

logger = logging.getLogger(__name__)

WEB_DIR = Path(__file__).with_name("web")
RESET_TOOL = "reset_episode"
MAX_HISTORY = 1000


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
        tasks = list(env.tasks)
        reset_params = {
            "type": "object",
            "properties": {
                "task": {"type": "string", "enum": tasks, "description": "Task to play"},
                "seed": {"type": "integer", "description": "Episode seed (same seed, same case)"},
            },
            "required": [],
        }
        out = [
            McpTool(
                RESET_TOOL,
                "Start a new case (episode) with a task and seed; returns the opening observation.",
                reset_params,
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

    @app.exception_handler(ValueError)
    async def _bad_value(request: Request, exc: ValueError) -> JSONResponse:
        return JSONResponse(status_code=400, content={"detail": str(exc)})

    return app


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


class ServerThread:
    """Run an app with uvicorn on a free loopback port in a thread (tests, benchmarks).

    ``with ServerThread(app) as url: ...``; the server stops when the block ends.
    """

    def __init__(self, app: FastAPI, host: str = "127.0.0.1", port: int | None = None):
        import uvicorn

        self.port = port or free_port(host)
        self.url = f"http://{host}:{self.port}"
        config = uvicorn.Config(
            app, host=host, port=self.port, log_level="warning", ws_max_size=4 * 1024 * 1024
        )
        self.server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError(f"server on {self.url} did not start")
            time.sleep(0.02)
        return self.url

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self._thread.join(timeout=10)


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


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
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        ws_max_size=4 * 1024 * 1024,
    )


def __getattr__(name: str) -> Any:
    """``env.server:app`` for ASGI runners (openenv.yaml): the app of ``$ENV_NAME``."""
    if name == "app":
        return create_env_app(os.environ.get("ENV_NAME", "aml"))
    raise AttributeError(name)


if __name__ == "__main__":
    main()
