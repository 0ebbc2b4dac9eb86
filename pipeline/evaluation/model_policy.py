"""Model-backed policies: a trained checkpoint or an OpenAI-compatible endpoint plays episodes.

``make_model_policy("checkpoint:PATH" | "openai:MODEL", env_name, mode, seed)`` returns a
``Policy`` (env/rollout.py) that ``env.rollout.play`` and ``scripts/evaluate.py`` drive like the
scripted policies, so a model is scored on exactly the episodes and grades they are.

- ``interactive``: the prompt is the training prompt of interactive mode (interactive system
  prompt, header plus rendered opening observation, the tools in the chat template, as TRL builds
  it); each turn the model writes a reply, its tool calls are read with
  ``rewards.parsing.parse_tool_calls`` and played one per ``act``; once a turn's calls have run,
  their results go back as ``tool`` messages (``pipeline.data.prompts.render_observation``, the text
  TRL's adapter returns) and the model writes the next turn.
- ``plan``: one completion from the plan-mode prompt holds the whole plan; its calls are replayed.
- ``steps``: receding horizon, the way a steps-trained model is meant to play. The prompt is the
  steps-mode training prompt (``pipeline.data.steps``); each turn the model writes a plan from the state
  it sees, its first call runs (``horizon="receding"``; ``"whole"`` runs every call of the reply),
  and the call goes into the conversation as an assistant tool call with its result as a tool
  message, exactly as the steps prompts show earlier calls; then it plans again. A turn whose
  first call is terminal ends the episode.

A reply with no readable call is played as the pseudo-tool ``no_tool_call``: the environment answers
with an unknown-tool error, which is fed back as a user message. A turn is idle when none of its
calls ran (no call, or only calls the environment rejected: unknown tools, invalid arguments); after
``max_idle_turns`` idle turns in a row the policy stops generating and the step limit ends the
episode, so a silent or stuck model still finishes (undecided, no decision credit) without
decoding a reply for every step left.

The model behind it is a backend (``pipeline.evaluation.backends``).
"""

from __future__ import annotations

import logging
from typing import Any

from env.base import ToolCallAction, ToolEnvironment, ToolObservation
from env.registry import env_class
from pipeline.data.prompts import MODES, render_observation, system_prompt, user_message
from pipeline.evaluation.backends import ChatBackend, GenerationSettings, load_backend
from rewards.parsing import parse_tool_calls
from rewards.protocol import render_completion, render_response

logger = logging.getLogger(__name__)

SPEC_PREFIXES = ("checkpoint:", "openai:")
NO_CALL = "no_tool_call"


class ModelPolicy:
    """A ``Policy`` whose calls come from a chat model (see the module docstring)."""

    def __init__(
        self,
        backend: ChatBackend,
        env_name: str,
        mode: str,
        seed: int,
        settings: GenerationSettings,
    ):
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; choose from {', '.join(MODES)}")
        env_class(env_name)  # fail early on an unknown environment
        self.backend, self.env_name, self.mode = backend, env_name, mode
        self.seed, self.settings = seed, settings
        self.messages: list[dict[str, Any]] = []
        self.queue: list[dict[str, Any]] = []
        self.pending: list[dict[str, Any]] = []  # calls played since the last reply
        self.idle_turns = 0
        self.turns = 0

    def reset(self, env: ToolEnvironment, observation: ToolObservation) -> None:
        """Build the prompt of this episode (public env name, task and opening only)."""
        self.messages = [
            {
                "role": "system",
                "content": system_prompt(self.env_name, self.mode, self.settings.prompt_style),
            }
        ]
        style = self.settings.result_style
        opening = user_message(self.env_name, env.task, observation, self.mode, style)
        if self.mode == "interactive":
            opening += render_observation(observation, style)
        self.messages.append({"role": "user", "content": opening})
        self.queue, self.pending, self.idle_turns, self.turns = [], [], 0, 0
        if self.mode == "plan":
            self._reply()

    def act(self, observation: ToolObservation) -> ToolCallAction:
        """The next call: from the queue, else (interactive) from a new reply to the results."""
        if self.pending:
            self.pending[-1]["observation"] = observation
        if self.mode == "steps":
            return self._step_call()
        if not self.queue and self.mode == "interactive":
            if self.pending:  # the last reply's calls have all been played
                ran = any(not call["observation"].error for call in self.pending)
                self.idle_turns = 0 if ran else self.idle_turns + 1
            self._feed_results()
            if self.idle_turns < self.settings.max_idle_turns:
                self._reply()
        call = self.queue.pop(0) if self.queue else {"tool": NO_CALL, "arguments": {}}
        self.pending.append(call)
        return ToolCallAction(tool=call["tool"], arguments=call["arguments"])

    def _step_call(self) -> ToolCallAction:
        """Steps mode: the next call of the current plan, or the first of a new one."""
        if not self.queue:
            if self.pending:
                ran = any(not call["observation"].error for call in self.pending)
                self.idle_turns = 0 if ran else self.idle_turns + 1
            self._feed_turns()
            if self.idle_turns < self.settings.max_idle_turns:
                message = self.backend.complete(self.messages, None, self.seed + self.turns)
                self.turns += 1
                if message is None:
                    self.idle_turns = self.settings.max_idle_turns
                else:
                    calls = _calls_of(message)
                    self.queue = calls if self.settings.horizon == "whole" else calls[:1]
        call = self.queue.pop(0) if self.queue else {"tool": NO_CALL, "arguments": {}}
        self.pending.append(call)
        return ToolCallAction(tool=call["tool"], arguments=call["arguments"])

    def _feed_turns(self) -> None:
        """Steps mode: each played call as an assistant tool call and its result as a tool
        message, the form the steps prompts show (``pipeline.data.steps.tool_turns``)."""
        from pipeline.data.steps import tool_turns

        played = [c for c in self.pending if c.get("observation") is not None]
        turns = tool_turns(
            [{"tool": c["tool"], "arguments": c["arguments"]} for c in played],
            [c["observation"] for c in played],
            self.settings.result_style,
        )
        self.messages += text_protocol(turns) if self.backend.tool_messages_need_ids else turns
        self.pending = []

    # ----- conversation -------------------------------------------------------------------------

    def _tools(self) -> list[dict[str, Any]] | None:
        return self.backend.tool_schemas(self.env_name) if self.mode == "interactive" else None

    def _reply(self) -> None:
        message = self.backend.complete(self.messages, self._tools(), self.seed + self.turns)
        self.turns += 1
        if message is None:  # context full: stop generating, let the step limit end it
            self.idle_turns = self.settings.max_idle_turns
            return
        self.messages.append(message)
        self.queue = _calls_of(message)

    def _feed_results(self) -> None:
        """Append the results of the calls played since the last reply."""
        for call in self.pending:
            obs = call.get("observation")
            if obs is None:
                continue
            text = render_observation(obs, self.settings.result_style)
            if call["tool"] == NO_CALL:
                self.messages.append(
                    {"role": "user", "content": "Your reply contained no tool call. " + text}
                )
            elif call.get("id"):
                self.messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": call["id"],
                        "name": call["tool"],
                        "content": text,
                    }
                )
            elif self.backend.tool_messages_need_ids:
                # A call written as text has no id for an OpenAI-style tool message.
                wrapped = render_response(text)
                self.messages.append({"role": "user", "content": wrapped})
            else:
                self.messages.append({"role": "tool", "name": call["tool"], "content": text})
        self.pending = []


def text_protocol(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages with id-less tool calls and tool results (steps prompts) rewritten as the text
    protocol, for endpoints that need an id on every tool message (OpenAI): a call becomes an
    assistant ``<tool_call>`` line, its result a user ``<tool_response>`` message."""
    out = []
    for message in messages:
        if message.get("role") == "assistant" and message.get("tool_calls"):
            calls = [c.get("function", c) for c in message["tool_calls"]]
            text = render_completion(
                [{"tool": c["name"], "arguments": c.get("arguments", {})} for c in calls]
            )
            content = (message.get("content") or "").strip()
            out.append({"role": "assistant", "content": f"{content}\n{text}".strip()})
        elif message.get("role") == "tool":
            out.append({"role": "user", "content": render_response(message["content"])})
        else:
            out.append(message)
    return out


def _calls_of(message: dict[str, Any]) -> list[dict[str, Any]]:
    """Calls of an assistant reply, each with the id of its native tool call when it has one."""
    calls = []
    for raw in message.get("tool_calls") or []:
        for call in parse_tool_calls({"role": "assistant", "tool_calls": [raw]}).calls:
            calls.append({**call, "id": raw.get("id")})
    if not calls:
        calls = parse_tool_calls(message.get("content") or "").calls
    return [_clean(call) for call in calls]


def _clean(call: dict[str, Any]) -> dict[str, Any]:
    args = call.get("arguments")
    return {
        "tool": str(call.get("tool")),
        "arguments": args if isinstance(args, dict) else {"value": args},
        "id": call.get("id"),
    }


def make_model_policy(
    spec: str, env_name: str, mode: str = "interactive", seed: int = 0, **settings: Any
) -> ModelPolicy:
    """A ``Policy`` backed by a model.

    Args:
        spec: ``checkpoint:PATH`` (model or PEFT adapter folder) or ``openai:MODEL``.
        env_name: The registered environment the policy plays.
        mode: ``interactive`` (one turn per call, sees results) or ``plan`` (one blind plan).
        seed: Seeds sampling (with temperature > 0) so a run is reproducible.
        **settings: ``GenerationSettings`` fields, e.g. ``temperature=0.7``.

    Returns:
        A fresh policy; the backend (weights, client) is shared between calls with the same spec.
    """
    generation = GenerationSettings(**settings)
    return ModelPolicy(load_backend(spec, generation), env_name, mode, seed, generation)
