"""Run an LLM agent on one episode through any OpenAI-compatible endpoint.

The agent is ``pipeline.evaluation.model_policy``' interactive ``ModelPolicy`` with an ``OpenAIBackend``: the
same prompt, tool schemas, call parsing and result messages that ``scripts/evaluate.py
--policy openai:MODEL`` uses, so a score printed here is the score an evaluation gives. This
script only owns the environment (in-process, or a running ``env.server`` over WebSocket) and the
output. A reply without a readable call is played as the pseudo-tool ``no_tool_call``, so the
environment answers with an error and the step limit still ends a silent model's episode. stdout
carries exactly:

    [START] task=<task> env=<env> model=<model>
    [STEP] step=<n> action=<tool>(<json args>) reward=<r> done=<true|false> error=<msg|null>
    [END] success=<true|false> steps=<n> score=<grade> rewards=<r1,r2,...>

Configuration (environment variables, or the flags of the same name in lower case):
``API_BASE_URL`` (default: the Hugging Face router), ``MODEL_NAME``, ``HF_TOKEN`` or
``OPENAI_API_KEY``, ``ENV_URL`` (a running ``env.server``; unset = in-process environment),
``ENV_NAME`` (registry name or ``module:Class``), ``TASK``, ``SEED``, ``MAX_STEPS``,
``MAX_TOKENS``, ``TEMPERATURE``, ``TIMEOUT_S`` (per request), ``RETRIES`` (per request; the
OpenAI client backs off between them), ``SUCCESS_THRESHOLD`` (score needed, with a decision, for success=true).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:  # the environment stack is imported only once the flags are read
    from env.base import ToolCallAction, ToolObservation

logger = logging.getLogger("inference")
HF_ROUTER = "https://router.huggingface.co/v1"


@dataclass
class Settings:
    """Everything one run needs; read from flags, then environment variables, then defaults."""

    api_base_url: str = HF_ROUTER
    model_name: str = ""
    api_key: str = ""
    env_url: str = ""
    env_name: str = "aml"
    task: str = ""
    seed: int = 0
    max_steps: int = 30
    max_tokens: int = 512
    temperature: float = 0.0
    timeout_s: float = 60.0
    retries: int = 3
    success_threshold: float = 0.5

    @classmethod
    def from_sources(cls, argv: list[str] | None = None) -> Settings:
        parser = argparse.ArgumentParser(description="Run an LLM agent on one episode.")
        for f in fields(cls):
            parser.add_argument(f"--{f.name.replace('_', '-')}", dest=f.name, default=None)
        args = vars(parser.parse_args(argv))
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = args[f.name]
            if raw is None:
                raw = os.environ.get(f.name.upper())
            if raw is None and f.name == "api_key":
                raw = os.environ.get("HF_TOKEN") or os.environ.get("OPENAI_API_KEY")
            if raw is not None:
                values[f.name] = type(f.default)(raw)
        settings = cls(**values)
        if not settings.model_name:
            parser.error("set MODEL_NAME (or --model-name)")
        return settings


class LocalEnv:
    """The environment in this process."""

    def __init__(self, cls: type) -> None:
        self.env = cls()

    def reset(self, task: str, seed: int) -> ToolObservation:
        return self.env.reset(seed=seed, task=task or None)

    def step(self, action: ToolCallAction) -> ToolObservation:
        return self.env.step(action)

    def close(self) -> None:
        self.env.close()


class RemoteEnv:
    """An ``env.server`` session over WebSocket (one episode, its own environment)."""

    def __init__(self, url: str, timeout_s: float) -> None:
        from env.client import ToolEnvClient

        self.client = ToolEnvClient(base_url=url, message_timeout_s=timeout_s).sync()
        self.client.connect()

    def reset(self, task: str, seed: int) -> ToolObservation:
        kwargs: dict[str, Any] = {"seed": seed}
        if task:
            kwargs["task"] = task
        return self.client.reset(**kwargs).observation

    def step(self, action: ToolCallAction) -> ToolObservation:
        return self.client.step(action).observation

    def close(self) -> None:
        self.client.close()


def _one_line(text: str | None) -> str:
    return "null" if text is None else " ".join(str(text).split())


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _action_text(call: dict[str, Any]) -> str:
    args = json.dumps(call["arguments"], separators=(",", ":"), ensure_ascii=False)
    return f"{call['tool']}({args})"


def _env_name(settings: Settings) -> str:
    """The registry name of the environment (an import string is registered for the prompt)."""
    from env.registry import names, register
    from env.server import resolve

    if ":" not in settings.env_name:
        return settings.env_name
    cls = resolve(settings.env_name)
    if cls.name not in names():
        register(cls.name, settings.env_name, "")
    return cls.name


def run_episode(settings: Settings, out: TextIO = sys.stdout) -> dict[str, Any]:
    """Play one episode and print the [START]/[STEP]/[END] lines; returns the summary."""
    from types import SimpleNamespace

    from env.registry import env_class
    from pipeline.evaluation.backends import GenerationSettings, OpenAIBackend
    from pipeline.evaluation.model_policy import ModelPolicy

    name = _env_name(settings)
    task = settings.task or env_class(name).tasks[0]
    print(f"[START] task={task} env={name} model={settings.model_name}", file=out, flush=True)
    steps, rewards, obs, error = 0, [], None, None
    env: LocalEnv | RemoteEnv | None = None
    try:
        generation = GenerationSettings(
            temperature=settings.temperature,
            max_new_tokens=settings.max_tokens,
            timeout_s=settings.timeout_s,
            max_retries=settings.retries,
        )
        backend = OpenAIBackend(
            settings.model_name,
            generation,
            base_url=settings.api_base_url,
            api_key=settings.api_key or "not-needed",  # local servers take any key
        )
        policy = ModelPolicy(backend, name, "interactive", settings.seed, generation)
        env = (
            RemoteEnv(settings.env_url, settings.timeout_s)
            if settings.env_url
            else LocalEnv(env_class(name))
        )
        obs = env.reset(task, settings.seed)
        policy.reset(SimpleNamespace(task=task), obs)
        while not obs.done and steps < settings.max_steps:
            action = policy.act(obs)
            obs = env.step(action)
            steps += 1
            rewards.append(obs.reward or 0.0)
            call = {"tool": action.tool, "arguments": action.arguments}
            print(
                f"[STEP] step={steps} action={_action_text(call)} "
                f"reward={obs.reward or 0.0:.2f} done={_flag(obs.done)} "
                f"error={_one_line(obs.error)}",
                file=out,
                flush=True,
            )
    except Exception as exc:  # endpoint or server down: report, never hang or crash silently
        error = f"{type(exc).__name__}: {exc}"
        logger.error("episode stopped: %s", error)
    finally:
        if env is not None:
            env.close()
    grade = obs.grade if obs is not None and obs.done else None
    score = grade.total if grade is not None else 0.0
    success = bool(grade and grade.decision is not None and score >= settings.success_threshold)
    rewards_text = ",".join(f"{r:.2f}" for r in rewards)
    print(
        f"[END] success={_flag(success)} steps={steps} score={score:.2f} rewards={rewards_text}",
        file=out,
        flush=True,
    )
    return {"success": success, "steps": steps, "score": score, "rewards": rewards, "error": error}


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    summary = run_episode(Settings.from_sources(argv))
    return 1 if summary["error"] else 0


if __name__ == "__main__":
    sys.exit(main())
