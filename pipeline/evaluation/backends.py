"""Chat backends a model-backed policy writes its replies with.

``checkpoint:`` loads a local model folder, or a PEFT adapter folder, with
transformers/PEFT and decodes greedily (temperature 0) or samples from a ``torch.Generator``
seeded per policy; ``openai:`` calls ``/chat/completions`` of ``API_BASE_URL`` (else the OpenAI
default, or the Hugging Face router when only ``HF_TOKEN`` is set) with ``OPENAI_API_KEY`` or
``HF_TOKEN``, with a timeout and retries. Loaded backends are cached per spec, so a factory called
once per episode loads the weights once.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any, Protocol

from env.registry import env_class
from pipeline.decoding.decision_rate import DecisionRate
from pipeline.decoding.kv_rows import cached_length

logger = logging.getLogger(__name__)
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
    """Tool list, "full" or "compact": of plan prompts (pipeline/data/prompts.py) and of a checkpoint's
    qwen2_5 chat template in interactive mode (pipeline/training/chat_templates.py); match the training
    run's."""
    max_context_tokens: int | None = None
    """Checkpoint backend: tokens a conversation may hold, reply included, before the policy stops
    (None: the model's positions). A CPU evaluation caps it to bound its time: a turn costs the
    whole conversation's attention, and an episode cut off here ends without a decision."""
    result_style: str = "full"
    """Tool results as one-line JSON ("full") or ``pipeline.data.compact`` tables ("compact"): match the
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


class CheckpointBackend:
    """A local model folder or PEFT adapter folder, decoded token by token on one device."""

    tool_messages_need_ids = False

    def __init__(self, path: str | os.PathLike, settings: GenerationSettings):
        import torch

        from pipeline.training import chat_templates
        from pipeline.training.model import load_checkpoint

        self.settings = settings
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        model, tokenizer = load_checkpoint(path)
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
        self._context = 0  # with an activated adapter: cached tokens read with the adapter off
        self.decision_rate = DecisionRate.load(path)  # saved by rewards.decision_rate: held

    def tool_schemas(self, env_name: str) -> list[dict[str, Any]]:
        """The schemas TRL renders in training: ``get_json_schema`` of the adapter's methods."""
        if env_name not in self._schemas:
            from pipeline.training.interactive import tool_schemas

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
        tokens, not the whole conversation). With an activated adapter only the cached context
        before the last turn's assistant turn is kept: that turn's reply was read with the adapter
        on, and this prompt reads it with the adapter off."""
        import torch

        from pipeline.decoding.activation import activation_start, invocation_of
        from pipeline.decoding.batch_generation import greedy_choice, sampling_choice

        temperature, top_p = self.settings.temperature, self.settings.top_p
        greedy = temperature <= 0
        choose = greedy_choice if greedy else sampling_choice(generator, temperature, 0, top_p)
        shared = cached_length(self._cached, prompt)
        invocation = invocation_of(self.model)
        start = activation_start(prompt, invocation) if invocation else 0
        if invocation:
            shared = min(shared, start, self._context)
            self._context = start
        past = self._cache if shared else None
        excess = past.get_seq_length() - shared if past is not None else 0
        if excess > 0:  # a negative crop removes that many tokens (a positive one is deprecated)
            past.crop(-excess)
        fed, pending, out = prompt[:shared], prompt[shared:], []
        with torch.no_grad():
            for _ in range(budget):
                step_input = torch.tensor([pending], device=self.device)
                active = {}  # an activated adapter: on from the prompt's assistant turn
                if invocation:
                    after = len(fed) + len(pending) - start
                    active["alora_offsets"] = [max(0, min(len(pending), after))]
                result = self.model(
                    input_ids=step_input, past_key_values=past, use_cache=True, **active
                )
                past, fed = result.past_key_values, fed + pending
                token = int(choose(result.logits[:, -1])[0])
                if self.decision_rate is not None:  # a held rate decides between decisions
                    token = self.decision_rate.decide(out, token, result.logits[0, -1])
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
