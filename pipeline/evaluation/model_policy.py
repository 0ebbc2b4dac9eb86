"""Model-backed policies: a trained checkpoint or an OpenAI-compatible endpoint plays episodes.

``make_model_policy("checkpoint:PATH" | "openai:MODEL", env_name, mode, seed)`` returns a
``Policy`` (env/rollout.py) that ``env.rollout.play`` and ``scripts/evaluate.py`` drive like the
scripted policies, so a model is scored on exactly the episodes and grades they are.

- ``interactive``: the prompt is the training prompt of interactive mode (interactive system
  prompt, header plus rendered opening observation, the tools in the chat template, as TRL builds
  it); each turn the model writes a reply, its tool calls are read with
  ``rewards.parsing.parse_tool_calls`` and played one per ``act``; once a turn's calls have run,
  their results go back as ``tool`` messages (``pipeline.prompts.render_observation``, the text
  TRL's adapter returns) and the model writes the next turn.
- ``plan``: one completion from the plan-mode prompt holds the whole plan; its calls are replayed.
- ``steps``: receding horizon, the way a steps-trained model is meant to play. The prompt is the
  steps-mode training prompt (``pipeline.steps``); each turn the model writes a plan from the state
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

Backends: ``checkpoint:`` loads a local model folder, or a PEFT adapter folder, with
transformers/PEFT and decodes greedily (temperature 0) or samples from a ``torch.Generator``
seeded per policy; ``openai:`` calls ``/chat/completions`` of ``API_BASE_URL`` (else the OpenAI
default, or the Hugging Face router when only ``HF_TOKEN`` is set) with ``OPENAI_API_KEY`` or
``HF_TOKEN``, with a timeout and retries. Loaded backends are cached per spec, so a factory called
once per episode loads the weights once.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from env.base import ToolCallAction, ToolEnvironment, ToolObservation
from env.registry import env_class
from pipeline.prompts import MODES, render_observation, system_prompt, user_message
from pipeline.row_cache import cached_length
from rewards.parsing import parse_tool_calls
from rewards.protocol import render_completion, render_response

logger = logging.getLogger(__name__)

SPEC_PREFIXES = ("checkpoint:", "openai:")
NO_CALL = "no_tool_call"
HF_ROUTER = "https://router.huggingface.co/v1"


@dataclass(frozen=True)
class GenerationSettings:
    """How a model backend writes one reply."""

    temperature: float = 0.0
    """0 decodes greedily; above 0 samples (seeded per policy)."""
    top_p: float = 1.0
    """Nucleus sampling mass when sampling."""
    max_new_tokens: int = 256
    """Tokens per interactive turn."""
    plan_max_new_tokens: int = 1024
    """Tokens for the single plan-mode reply."""
    prompt_style: str = "full"
    """Tool list, "full" or "compact": of plan prompts (pipeline/prompts.py) and of a checkpoint's
    qwen2_5 chat template in interactive mode (pipeline/chat_templates.py); match the training
    run's."""
    max_context_tokens: int | None = None
    """Checkpoint backend: tokens a conversation may hold, reply included, before the policy stops
    (None: the model's positions). A CPU evaluation caps it to bound its time: a turn costs the
    whole conversation's attention, and an episode cut off here ends without a decision."""
    result_style: str = "full"
    """Tool results as one-line JSON ("full") or ``pipeline.compact`` tables ("compact"): match the
    training run's ``data.result_style``."""
    train_template: bool = False
    """Checkpoint backend: render with the training run's qwen2_5 template even when the folder
    has a template of its own (an untrained base evaluated on steps prompts, whose earlier tool
    calls and results must read as they read in training)."""
    horizon: str = "receding"
    """Steps mode: run the first call of each plan ("receding") or all of them ("whole")."""
    max_idle_turns: int = 3
    """Replies in a row none of whose calls ran (no call, or only rejected ones) before the policy
    stops generating (the step limit then ends the episode)."""
    timeout_s: float = 60.0
    """OpenAI backend: seconds per request."""
    max_retries: int = 3
    """OpenAI backend: retries of a failed request (the client backs off between them)."""


class ChatBackend(Protocol):
    """Writes one assistant reply to a conversation; ``None`` when the context is full."""

    tool_messages_need_ids: bool

    def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, seed: int
    ) -> dict[str, Any] | None: ...

    def tool_schemas(self, env_name: str) -> list[dict[str, Any]]: ...


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
        message, the form the steps prompts show (``pipeline.steps.tool_turns``)."""
        from pipeline.steps import tool_turns

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


# ----- backends ---------------------------------------------------------------------------------


class CheckpointBackend:
    """A local model folder or PEFT adapter folder, decoded token by token on one device."""

    tool_messages_need_ids = False

    def __init__(self, path: str | os.PathLike, settings: GenerationSettings):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        folder = Path(path)
        if not folder.is_dir():
            raise FileNotFoundError(f"checkpoint folder {folder} does not exist")
        self.settings = settings
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        adapter = folder / "adapter_config.json"
        if adapter.exists():
            from peft import PeftModel

            from pipeline.hub import local_base

            base = json.loads(adapter.read_text()).get("base_model_name_or_path") or ""
            base = local_base(base)  # a pushed SmolLM2 adapter names the Hub id
            model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base), folder)
            has_tokenizer = (folder / "tokenizer_config.json").exists()
            tokenizer = AutoTokenizer.from_pretrained(folder if has_tokenizer else base)
        else:
            model = AutoModelForCausalLM.from_pretrained(folder)
            tokenizer = AutoTokenizer.from_pretrained(folder)
        from pipeline import chat_templates

        if settings.train_template or chat_templates.ours(tokenizer.chat_template):
            chat_templates.apply_tool_chat_template(tokenizer, settings.prompt_style)
        self.model = model.to(self.device).eval()
        self.tokenizer = tokenizer
        stops = {tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("<|im_end|>")}
        self.stop_ids = {i for i in stops if isinstance(i, int) and i >= 0}
        self.max_positions = int(getattr(model.config, "max_position_embeddings", 4096))
        if settings.max_context_tokens is not None:
            self.max_positions = min(self.max_positions, settings.max_context_tokens)
        self._schemas: dict[str, list[dict[str, Any]]] = {}
        self._cache: Any = None  # KV cache of the tokens in self._cached, kept between replies
        self._cached: list[int] = []

    def tool_schemas(self, env_name: str) -> list[dict[str, Any]]:
        """The schemas TRL renders in training: ``get_json_schema`` of the adapter's methods."""
        if env_name not in self._schemas:
            from pipeline.interactive import tool_schemas

            self._schemas[env_name] = tool_schemas(env_name)
        return self._schemas[env_name]

    def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, seed: int
    ) -> dict[str, Any] | None:
        import torch

        ids, budget = self.encode(messages, tools)
        if budget <= 0:
            return None
        generator = torch.Generator(device=self.device).manual_seed(seed)
        out = self._decode(ids, budget, generator)
        return {"role": "assistant", "content": self.tokenizer.decode(out)}

    def encode(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
    ) -> tuple[list[int], int]:
        """Prompt token ids of the conversation and the reply's token budget (0: context full)."""
        budget = self.settings.max_new_tokens if tools else self.settings.plan_max_new_tokens
        text = self.tokenizer.apply_chat_template(
            messages, tools=tools, add_generation_prompt=True, tokenize=False
        )
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        budget = max(min(budget, self.max_positions - len(ids)), 0)
        if budget == 0:
            logger.warning("conversation of %d tokens fills the context", len(ids))
        return ids, budget

    def _decode(self, prompt: list[int], budget: int, generator: Any) -> list[int]:
        """Greedy or nucleus sampling with a KV cache; stops at end of turn.

        The cache outlives the reply: the next prompt of an interactive episode is this one plus
        the reply and the tool results, and every episode starts with the same system prompt, so
        only the tokens after the longest shared prefix are encoded again (turns cost their new
        tokens, not the whole conversation)."""
        import torch

        from pipeline.batch_generation import greedy_choice, sampling_choice

        temperature, top_p = self.settings.temperature, self.settings.top_p
        greedy = temperature <= 0
        choose = greedy_choice if greedy else sampling_choice(generator, temperature, 0, top_p)
        shared = cached_length(self._cached, prompt)
        past = self._cache if shared else None
        excess = past.get_seq_length() - shared if past is not None else 0
        if excess > 0:  # a negative crop removes that many tokens (a positive one is deprecated)
            past.crop(-excess)
        fed, pending, out = prompt[:shared], prompt[shared:], []
        with torch.no_grad():
            for _ in range(budget):
                step_input = torch.tensor([pending], device=self.device)
                result = self.model(input_ids=step_input, past_key_values=past, use_cache=True)
                past, fed = result.past_key_values, fed + pending
                token = int(choose(result.logits[:, -1])[0])
                if token in self.stop_ids:
                    break
                out.append(token)
                pending = [token]
        self._cache, self._cached = past, fed
        return out


class OpenAIBackend:
    """An OpenAI-compatible ``/chat/completions`` endpoint with native tool calling."""

    tool_messages_need_ids = True

    def __init__(
        self,
        model: str,
        settings: GenerationSettings,
        base_url: str | None = None,
        api_key: str | None = None,
    ):
        from openai import OpenAI

        key = api_key or os.environ.get("OPENAI_API_KEY") or os.environ.get("HF_TOKEN")
        if not key:
            raise ValueError("openai:MODEL needs OPENAI_API_KEY or HF_TOKEN in the environment")
        url = base_url or os.environ.get("API_BASE_URL")
        if url is None and not os.environ.get("OPENAI_API_KEY"):
            url = HF_ROUTER
        self.model, self.settings = model, settings
        self.client = OpenAI(
            base_url=url, api_key=key, timeout=settings.timeout_s, max_retries=settings.max_retries
        )

    def tool_schemas(self, env_name: str) -> list[dict[str, Any]]:
        """Standard JSON schemas straight from the specs (what OpenAI-style servers accept)."""
        return [spec.openai_schema() for spec in env_class(env_name).tool_specs()]

    def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, seed: int
    ) -> dict[str, Any] | None:
        budget = self.settings.max_new_tokens if tools else self.settings.plan_max_new_tokens
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "max_tokens": budget,
            "temperature": self.settings.temperature,
            "seed": seed,
        }
        if self.settings.temperature > 0 and self.settings.top_p < 1.0:
            kwargs["top_p"] = self.settings.top_p
        if tools:
            kwargs["tools"] = tools
        response = self.client.chat.completions.create(**kwargs)
        message = response.choices[0].message
        reply: dict[str, Any] = {"role": "assistant", "content": message.content or ""}
        if message.tool_calls:
            reply["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.function.name, "arguments": call.function.arguments},
                }
                for call in message.tool_calls
            ]
        return reply


_BACKENDS: dict[tuple[Any, ...], ChatBackend] = {}


def load_backend(spec: str, settings: GenerationSettings | None = None) -> ChatBackend:
    """The backend of ``checkpoint:PATH`` or ``openai:MODEL``, loaded once per spec and settings."""
    settings = settings or GenerationSettings()
    key = (
        (spec, settings, os.environ.get("API_BASE_URL"))
        if spec.startswith("openai:")
        else (spec, settings)
    )
    if key not in _BACKENDS:
        kind, _, target = spec.partition(":")
        if not target:
            raise ValueError(f"policy spec {spec!r} needs a target after the colon")
        if kind == "checkpoint":
            _BACKENDS[key] = CheckpointBackend(target, settings)
        elif kind == "openai":
            _BACKENDS[key] = OpenAIBackend(target, settings)
        else:
            raise ValueError(f"policy spec {spec!r}: use checkpoint:PATH or openai:MODEL")
    return _BACKENDS[key]


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
