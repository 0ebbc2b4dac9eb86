"""Serve any registered environment over OpenEnv: HTTP, WebSocket sessions, MCP and a web page.

One process serves one environment (``python -m env.server --env aml``). A client opens a
WebSocket on ``/ws``; that session owns its own environment instance for as long as the socket
lives (``reset`` with ``{"task", "seed"}``, then ``step`` with ``{"tool", "arguments"}``), so many
parallel rollouts never share an episode. The same session also answers MCP JSON-RPC messages
(``tools/list``, ``tools/call``), and ``/mcp`` serves MCP over HTTP or its own WebSocket: the tool
specs come from the environment class, and every MCP call goes through ``step`` so it pays the
same costs and is graded the same way. ``reset_episode`` is the one MCP-only tool: it starts a case.
Standard MCP clients (``fastmcp.Client``, the ``mcp`` SDK) reach the same ``/mcp`` path over
streamable HTTP, where each MCP session owns its own episode; requests in OpenEnv's JSON-RPC shape
still go to OpenEnv's handler (both surfaces: ``env.mcp_server``).

HTTP ``/reset`` and ``/step`` are stateless, as in OpenEnv: each request builds a fresh
environment and drops it afterwards. ``/step`` therefore replays: it accepts ``task``, ``seed`` and
``history`` (earlier actions) next to ``action`` and rebuilds the episode deterministically before
running the new call. Without ``seed`` it answers with an error observation telling the caller to
use a WebSocket session. ``/state`` reports a fresh (unstarted) environment. Nothing served here
ever calls ``reveal()``: the hidden truth stays in the process.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import logging
import os
import socket
import weakref
from functools import cache
from importlib import import_module
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse
from openenv.core import Environment, Observation
from openenv.core.env_server.http_server import create_fastapi_app
from openenv.core.env_server.types import ConcurrencyConfig, EnvironmentMetadata

from env.base import EpisodeState, ToolCallAction, ToolEnvironment, ToolObservation
from env.mcp_server import McpEndpoint, McpTools, add_mcp
from env.registry import env_class

logger = logging.getLogger(__name__)

WEB_DIR = Path(__file__).with_name("web")
MAX_HISTORY = 1000


class LoopServed:
    """How this server runs any OpenEnv environment's sessions: one shared worker thread for
    building and closing them, resets and steps on the event loop. Mixed into every served
    environment (``ServedMixin``) and into bench_server's like-for-like echo baseline."""

    # OpenEnv builds and closes each session's environment in an executor, by default a new
    # one-thread pool per session: a thread started and stopped for every WebSocket session, a
    # large share of a server's CPU when sessions are short (bench_server, RESULTS.md). Our
    # environments are plain Python objects with no thread affinity, so every session uses
    # OpenEnv's one shared worker instead (what this flag asks of OpenEnv); resets and steps
    # run on the event loop anyway (below).
    REQUIRES_SINGLE_THREAD_EXECUTOR = True

    # OpenEnv runs a synchronous reset or step in a thread pool, one hop per message. A step of
    # ours is tens of microseconds of pure Python, so the hop costs more than the work and, under
    # the GIL, buys no parallelism: OpenEnv awaits these overrides on the event loop instead. A
    # reset is longer (a gang world up to ~2 ms), and 64 sessions resetting at once would hold
    # every step behind all of them; so resets take turns (one per pass of the loop, steps served
    # in between) and a step waits for one reset at most. In a thread each reset cost 2-3x its
    # CPU (GIL hand-offs with the loop) and held steps up to 50 ms (benchmarks/RESULTS.md).
    async def reset_async(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        task: str | None = None,
        **kwargs: Any,
    ) -> Observation:
        env: Environment = self  # type: ignore[assignment]
        async with _reset_turn():
            await asyncio.sleep(0)  # the loop polls sockets and serves waiting steps first
            return env.reset(seed=seed, episode_id=episode_id, task=task, **kwargs)

    async def step_async(
        self, action: Any, timeout_s: float | None = None, **kwargs: Any
    ) -> Observation:
        env: Environment = self  # type: ignore[assignment]
        return env.step(action, timeout_s=timeout_s, **kwargs)


class ServedMixin(LoopServed):
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


_RESET_TURNS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
    weakref.WeakKeyDictionary()
)


def _reset_turn() -> asyncio.Lock:
    """The running loop's reset lock (one per loop: test clients run apps on their own loops)."""
    loop = asyncio.get_running_loop()
    lock = _RESET_TURNS.get(loop)
    if lock is None:
        lock = _RESET_TURNS[loop] = asyncio.Lock()
    return lock


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

    factory = functools.partial(served, **config)  # OpenEnv reads the flag above through it
    factory.__name__ = cls.__name__  # type: ignore[attr-defined]  # its error messages name it
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
    add_mcp(app, McpEndpoint(cls, factory, max_concurrent_envs, session_timeout_s))

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


def freeze_startup_heap() -> int:
    """Take every object alive now out of the cyclic collector; returns how many were moved.

    A server process holds ~200k objects from its imports (FastAPI, pydantic, OpenEnv's gradio
    page) that are never garbage. The collector still walks all of them in each full (oldest
    generation) collection, a pause of a tenth of a second or more, and the sessions' worlds
    trigger such a collection every few thousand steps: every step in flight waits for it
    (benchmarks/RESULTS.md, bench_server). Frozen, a full
    collection walks only what the sessions made (``gc.freeze``, the usual pre-fork/pre-serve
    step). Call it once the app is built, before serving; garbage made later is collected as
    before."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


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
    freeze_startup_heap()
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, **UVICORN_SETTINGS)


def __getattr__(name: str) -> Any:
    """``env.server:app`` for ASGI runners (openenv.yaml): the app of ``$ENV_NAME``."""
    if name == "app":
        app = create_env_app(os.environ.get("ENV_NAME", "aml"))
        freeze_startup_heap()
        return app
    raise AttributeError(name)


if __name__ == "__main__":
    main()
