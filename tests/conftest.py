"""Helpers the tests share (pytest loads this file first; test modules ``from conftest import``).

- ``call(tool, **arguments)``: one agent call, as a ``ToolCallAction``.
- ``smollm2_tokenizer(style)`` and ``tiny_model(seed, style)``: SmolLM2's tokenizer (with the
  tool-calling chat template of ``style`` when given) and the 2-layer in-process model on it
  (``pipeline.model.build_tiny_model``): no download, no weights on disk.
- ``serve(env, **options)``: an environment's OpenEnv app on a free loopback port for the length
  of a ``with`` block (``env.server.ServerThread``); gives its URL.

Heavy imports (transformers, uvicorn) happen inside the helpers, so collecting a test module that
does not use them stays cheap.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from env.base import ToolCallAction


def call(tool: str, **arguments: Any) -> ToolCallAction:
    """The call of ``tool`` with ``arguments``."""
    return ToolCallAction(tool=tool, arguments=arguments)


def smollm2_tokenizer(style: str | None = None) -> Any:
    """SmolLM2's tokenizer; with ``style`` ("full" or "compact"), the tool-calling chat template
    training uses (``pipeline.chat_templates.apply_tool_chat_template``)."""
    from transformers import AutoTokenizer

    from pipeline.chat_templates import apply_tool_chat_template
    from pipeline.model import smollm2_path

    tokenizer = AutoTokenizer.from_pretrained(smollm2_path())
    return tokenizer if style is None else apply_tool_chat_template(tokenizer, style)


def tiny_model(seed: int = 0, style: str | None = None) -> tuple[Any, Any]:
    """A fresh tiny model (seeded: two builds are identical) and its tokenizer."""
    from pipeline.model import build_tiny_model

    tokenizer = smollm2_tokenizer(style)
    return build_tiny_model(tokenizer, seed=seed), tokenizer


@contextmanager
def serve(env: Any, **options: Any) -> Iterator[str]:
    """``env`` (a registered name or an environment class) served over OpenEnv; yields the URL.
    ``options`` go to ``env.server.create_env_app`` (e.g. ``max_concurrent_envs``)."""
    from env.server import ServerThread, create_env_app

    with ServerThread(create_env_app(env, **options)) as url:
        yield url
