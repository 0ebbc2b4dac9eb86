"""Helpers the tests share (pytest loads this file first; test modules ``from conftest import``).

- ``call(tool, **arguments)``: one agent call, as a ``ToolCallAction``.
- ``smollm2_tokenizer(style)`` and ``tiny_model(seed, style)``: SmolLM2's tokenizer (with the
  tool-calling chat template of ``style`` when given) and the 2-layer in-process model on it
  (``pipeline.training.model.build_tiny_model``): no download, no weights on disk.
- ``ServerThread(app)``: any FastAPI app under uvicorn on a free loopback port, in a thread, for
  the length of a ``with`` block; ``serve(env, **options)`` does it for an environment's OpenEnv
  app. Both give the URL.
- ``wait_for_health(proc, port)``: a server started as a process, once its ``/health`` answers.

Heavy imports (transformers, uvicorn) happen inside the helpers, so collecting a test module that
does not use them stays cheap.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from env.base import ToolCallAction


def call(tool: str, **arguments: Any) -> ToolCallAction:
    """The call of ``tool`` with ``arguments``."""
    return ToolCallAction(tool=tool, arguments=arguments)


def smollm2_tokenizer(style: str | None = None) -> Any:
    """SmolLM2's tokenizer; with ``style`` ("full" or "compact"), the tool-calling chat template
    training uses (``pipeline.training.chat_templates.apply_tool_chat_template``)."""
    from transformers import AutoTokenizer

    from pipeline.training.chat_templates import apply_tool_chat_template
    from pipeline.training.model import smollm2_path

    tokenizer = AutoTokenizer.from_pretrained(smollm2_path())
    return tokenizer if style is None else apply_tool_chat_template(tokenizer, style)


def tiny_model(seed: int = 0, style: str | None = None) -> tuple[Any, Any]:
    """A fresh tiny model (seeded: two builds are identical) and its tokenizer."""
    from pipeline.training.model import build_tiny_model

    tokenizer = smollm2_tokenizer(style)
    return build_tiny_model(tokenizer, seed=seed), tokenizer


@contextmanager
def serve(env: Any, **options: Any) -> Iterator[str]:
    """``env`` (a registered name or an environment class) served over OpenEnv; yields the URL.
    ``options`` go to ``env.server.create_env_app`` (e.g. ``max_concurrent_envs``)."""
    from env.server import create_env_app

    with ServerThread(create_env_app(env, **options)) as url:
        yield url


class ServerThread:
    """Run an app with uvicorn on a free loopback port in a thread.

    ``with ServerThread(app) as url: ...``; the server stops when the block ends.
    """

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int | None = None):
        import uvicorn

        from env.server import free_port

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


def wait_for_health(proc: subprocess.Popen, port: int, timeout_s: float = 60.0) -> subprocess.Popen:
    """``proc`` once ``http://127.0.0.1:PORT/health`` answers 200; kills it and raises if it exits
    or does not answer within ``timeout_s``."""
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            raise RuntimeError(f"server on {port} exited with {proc.returncode}")
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"server on {port} did not start")
