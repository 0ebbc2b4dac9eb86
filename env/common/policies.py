"""Policy building blocks every environment's policies are made of.

``ScriptedPolicy`` turns a generator (yield a call, receive its observation) into the ``Policy``
protocol of ``env.rollout``, so a heuristic reads like the procedure it follows. ``RandomPolicy``
calls a random available tool with arguments drawn from the tool's JSON schema and from the ids and
numbers seen so far: the "random play" baseline the reference systems scored 0.58-0.73 with.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Generator
from typing import Any

from env.base import ToolCallAction, ToolEnvironment, ToolObservation

Script = Generator[ToolCallAction, ToolObservation, None]
_TOKEN = re.compile(r"\b[A-Za-z]{1,4}[-_][A-Za-z0-9-]{2,}\b")
_NUMBER = re.compile(r"(?<![\w-])\d+(?:\.\d+)?(?![\w-])")
_WORDS = ("ok", "done", "please check", "resolved", "urgent", "test", "refund", "status update")


def call(tool: str, **arguments: Any) -> ToolCallAction:
    """Shorthand for a tool call."""
    return ToolCallAction(tool=tool, arguments=arguments)


class ScriptedPolicy:
    """A policy written as a generator; when the script ends, ``fallback`` ends the episode."""

    def __init__(self, seed: int = 0):
        self.rng = random.Random(seed)
        self._script: Script | None = None
        self._fresh = True

    def prepare(self, env: ToolEnvironment) -> None:
        """Read what the policy may read at reset (only the oracle reads ``env.reveal()``)."""

    def script(self, opening: ToolObservation) -> Script:
        raise NotImplementedError

    def fallback(self, observation: ToolObservation) -> ToolCallAction:
        raise NotImplementedError

    def reset(self, env: ToolEnvironment, observation: ToolObservation) -> None:
        self.prepare(env)
        self._script = self.script(observation)
        self._fresh = True

    def act(self, observation: ToolObservation) -> ToolCallAction:
        try:
            if self._fresh:
                self._fresh = False
                return next(self._script)
            return self._script.send(observation)
        except StopIteration:
            return self.fallback(observation)


class RandomPolicy:
    """Random tools with schema-shaped arguments built from what has been observed."""

    def __init__(self, seed: int = 0):
        self.rng = random.Random(seed)
        self.specs: dict = {}
        self.tokens: list[str] = []
        self.numbers: list[float] = []

    def reset(self, env: ToolEnvironment, observation: ToolObservation) -> None:
        self.specs = type(env).tool_specs_by_name()
        self.tokens, self.numbers = [], []
        self._absorb(observation)

    def _absorb(self, observation: ToolObservation) -> None:
        text = json.dumps(observation.result, default=str)
        self.tokens = sorted(set(self.tokens) | set(_TOKEN.findall(text)))
        self.numbers = sorted(set(self.numbers) | {float(n) for n in _NUMBER.findall(text)})

    def _value(self, schema: dict[str, Any]) -> Any:
        if "enum" in schema:
            return self.rng.choice(schema["enum"])
        if "anyOf" in schema:
            return self._value(self.rng.choice(schema["anyOf"]))
        kind = schema.get("type")
        if kind == "number":
            pool = self.numbers or [1.0]
            return self.rng.choice([self.rng.choice(pool), round(self.rng.uniform(1, 500), 2)])
        if kind == "integer":
            return self.rng.randint(0, 10)
        if kind == "boolean":
            return self.rng.random() < 0.5
        if kind == "array":
            return [self._value(schema.get("items", {})) for _ in range(self.rng.randint(0, 2))]
        if self.tokens and self.rng.random() < 0.7:
            return self.rng.choice(self.tokens)
        return self.rng.choice(_WORDS)

    def _arguments(self, name: str) -> dict[str, Any]:
        """Arguments for a call of ``name``: a value per parameter of its schema."""
        props = self.specs[name].parameters.get("properties", {})
        return {k: self._value(v) for k, v in props.items()}

    def act(self, observation: ToolObservation) -> ToolCallAction:
        self._absorb(observation)
        name = self.rng.choice(observation.tools or list(self.specs))
        return ToolCallAction(tool=name, arguments=self._arguments(name))
