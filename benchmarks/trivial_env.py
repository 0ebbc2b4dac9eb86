"""The bare OpenEnv baseline of ``bench_server``: a trivial environment on OpenEnv's own server.

An echo environment (each step returns the message it was sent, no world, no tools) served by
OpenEnv's ``create_fastapi_app`` and uvicorn with the settings ``env.server`` uses. Whatever this
server spends per step is OpenEnv's and uvicorn's overhead, so an environment server measured in
the same run is compared with the fastest server OpenEnv can be (issue 25: >= 0.9x its steps/s).
With ``--like-ours`` the echo environment is served as ``env.server`` serves ours (one shared
worker thread, reset and step on the event loop): the baseline for the cost of an environment
alone, since the serving path is then the same on both sides.

    python -m benchmarks.trivial_env --port 8000
"""

from __future__ import annotations

import argparse
from typing import Any

from openenv.core.env_server.http_server import create_fastapi_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, ConcurrencyConfig, Observation, State

from env.server import UVICORN_SETTINGS, LoopServed, freeze_startup_heap

EPISODE_STEPS = 8
"""Steps per echo episode, so that the load resets as an environment's does."""


class EchoAction(Action):
    message: str = ""


class EchoObservation(Observation):
    echo: str = ""
    step: int = 0


class EchoEnvironment(Environment[EchoAction, EchoObservation, State]):
    """Returns each message as it came; ends an episode every ``EPISODE_STEPS`` steps."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State(episode_id=None, step_count=0)

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> EchoObservation:
        self._state = State(episode_id=episode_id, step_count=0)
        return EchoObservation(echo=f"seed {seed}")

    def step(self, action: EchoAction, timeout_s: float | None = None, **kwargs: Any):
        self._state.step_count += 1
        count = self._state.step_count
        return EchoObservation(
            echo=action.message, step=count, done=count >= EPISODE_STEPS, reward=0.0
        )

    @property
    def state(self) -> State:
        return self._state


class EchoServedLikeOurs(LoopServed, EchoEnvironment):
    """The echo environment served the way ``env.server`` serves ours (``LoopServed``: sessions
    share OpenEnv's one worker thread, resets take turns and steps run on the event loop, no
    thread hop per message). What this server spends per step is OpenEnv's and uvicorn's
    protocol work alone, so an environment server's ratio to it is the cost of the environment
    itself."""


def create_app(
    max_concurrent_envs: int = 64, session_timeout_s: float = 600.0, like_ours: bool = False
) -> Any:
    """OpenEnv's app for the echo environment, concurrency as ``env.server`` configures it;
    ``like_ours`` serves it as ``env.server`` serves ours (``EchoServedLikeOurs``)."""
    return create_fastapi_app(
        EchoServedLikeOurs if like_ours else EchoEnvironment,
        EchoAction,
        EchoObservation,
        concurrency_config=ConcurrencyConfig(
            max_concurrent_envs=max_concurrent_envs, session_timeout=session_timeout_s
        ),
        env_name="echo",
    )


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--max-concurrent-envs", type=int, default=64)
    parser.add_argument("--log-level", default="warning")
    parser.add_argument(
        "--gc-freeze",
        action="store_true",
        help="freeze the startup heap as env.server does (not OpenEnv's default)",
    )
    parser.add_argument(
        "--like-ours",
        action="store_true",
        help="serve the echo environment as env.server serves ours: one shared worker thread, "
        "reset and step on the event loop (not OpenEnv's default)",
    )
    args = parser.parse_args(argv)
    app = create_app(args.max_concurrent_envs, like_ours=args.like_ours)
    if args.gc_freeze:
        freeze_startup_heap()
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        **UVICORN_SETTINGS,
    )


if __name__ == "__main__":
    main()
