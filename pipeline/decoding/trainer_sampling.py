"""GRPO's sampling on a CPU through ``pipeline.decoding.batch_generation`` instead of ``model.generate``.

A GRPO group is one prompt repeated G times. ``model.generate`` encodes that prompt G times, keeps
G copies of its KV cache and copies each of them once per query head at every sampled token; on a
2-core CPU that is most of a GRPO step (AML plan mode: ~360 ms per token for G=4). ``fast_sampling``
gives TRL's GRPOTrainer a generation step that encodes the shared prompt once and samples every
completion against that one copy (``generate_by_prompt``: ``batch_generation.generate`` with
``sampling_choice``, once per group of a batch). It takes over only where it samples the same
distribution as ``generate``: no vLLM, no images, and TRL's sampling settings limited to
temperature, top-k and top-p. Anything else goes to TRL unchanged.

In plan mode a completion also ends at its decision (``decision_reached``): the replay stops at the
first terminal call and ignores the rest, so the tokens after it cost time, earn nothing and, left
in, are trained on with the plan's advantage (SmolLM2 learned to append junk calls after
``file_sar``, its replies grew 255 -> 355 tokens). The ended completion gets the end-of-turn token,
so TRL counts it as finished and the policy learns to stop after deciding.

With ``data.decision_branches`` (steps mode at decision cuts) a group's replies are split evenly
across the environment's decisions: each reply's first call is opened as one terminal tool
(``branch_openings``: the text up to the end of the tool's name, as the model writes it) and the
rest is sampled. Sampled freely, a group whose G replies all take one decision carries no
signal about the decision, and small groups empty fast: on AML easy at G=4 the policy walked
to one decision for every case within ~10 steps (benchmarks/RESULTS.md, runs 5-9). Branched,
every group compares the decisions on the same case, so each step's advantage says which one
the case's evidence calls for, however certain the policy already is. The reward is still the
environment's grade of the replayed episode; only the exploration over the decision is
enumerated instead of sampled. The opening tokens belong to the completion, so the loss trains
the decision token with its branch's advantage.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

BRANCHING_ENVS = ("aml",)
"""Environments whose decisions are distinct terminal tools (AML: ``file_sar``, ``close_alert``),
so opening a call names a decision. Elsewhere a decision is an argument (fraud's
``close_case(verdict)``, gang's and support's actions) or the terminal tools belong to other roles
or tasks (fraud's ``exit_scheme``, ops' five), and decision branches do not apply."""


def terminal_tools(env_names: Iterable[str]) -> set[str]:
    """Names of the tools that end an episode (a decision) in any of ``env_names``."""
    import env as registry

    return {s.name for name in env_names for s in registry.make(name).tool_specs() if s.terminal}


def decision_reached(tokenizer: Any, terminal: set[str]) -> Callable[[list[int]], bool]:
    """Whether a plan reply so far ends with a complete call of a ``terminal`` tool.

    The replay stops at the decision and ignores anything after it, so decoding can stop there:
    the episode's figures are the same, the tokens after it are not paid for."""
    return _call_reached(tokenizer, lambda tool: tool in terminal)


def first_call_reached(tokenizer: Any) -> Callable[[list[int]], bool]:
    """Whether a reply so far ends with its first complete call. A receding-horizon turn runs only
    its plan's first call (and the next prompt shows only the calls played), so a greedy turn can
    stop decoding there: the episode is the same, the rest of the plan is not paid for."""
    return _call_reached(tokenizer, lambda tool: True)


def _call_reached(tokenizer: Any, counts: Callable[[str], bool]) -> Callable[[list[int]], bool]:
    from rewards import parse_tool_calls
    from rewards.protocol import ends_with_call

    def reached(tokens: list[int]) -> bool:
        # The closing tag is several tokens ("</", "tool", "_", "call", ">" for SmolLM2).
        if not ends_with_call(tokenizer.decode(tokens[-12:])):
            return False
        calls = parse_tool_calls(tokenizer.decode(tokens, skip_special_tokens=True)).calls
        return bool(calls) and counts(calls[-1]["tool"])

    return reached


def end_decided(
    completions: list[list[int]], decided: Callable[[list[int]], bool], end: int, cap: int
) -> list[list[int]]:
    """Append the end-of-turn token ``end`` to completions that stopped at their decision."""
    return [
        c + [end] if c and c[-1] != end and len(c) < cap and decided(c) else c for c in completions
    ]


def branch_openings(tokenizer: Any, tools: Iterable[str]) -> list[list[int]]:
    """Per tool of ``tools`` (sorted), the token ids that open a call of it, up to the end of its
    name: ``<tool_call>{"name": "close_alert``. The cut falls where the tokenizer's pre-split
    falls (a word before a quote), so the ids are those the model writes for the whole call."""
    from rewards.protocol import render_call

    openings = []
    for tool in sorted(tools):
        text = render_call(tool)
        end = text.index(f'"{tool}"') + 1 + len(tool)
        openings.append(tokenizer.encode(text[:end], add_special_tokens=False))
    return openings


def shared_opening(openings: Sequence[Sequence[int]]) -> int:
    """Number of leading tokens every opening shares (``<tool_call>{"name": "``): the next token
    is where the decisions part."""
    shortest = min(len(o) for o in openings)
    for k in range(shortest):
        if len({o[k] for o in openings}) > 1:
            return k
    return shortest


def generate_by_prompt(
    model: Any,
    prompt_ids: list[list[int]],
    max_new_tokens: int,
    *args: Any,
    encoded: dict[tuple[int, ...], Any] | None = None,
    openings: Sequence[list[int]] = (),
    finished: Callable[[list[int]], bool] | None = None,
    **kwargs: Any,
) -> list[list[int]]:
    """``batch_generation.generate`` for a GRPO batch, one call per distinct prompt (its G rows),
    completions in the batch's order. A batch of several groups shares only the system message:
    decoded together, every row would encode its whole case again (8 rows for 2 prompts at G=4,
    each padded to the longer case); per group, the case is encoded once. ``encoded``: a dict
    that receives each prompt's cache (the prompt but its last token), keyed by that prefix.
    ``openings``: a group's k-th row starts its completion with ``openings[k % len(openings)]``
    and samples the rest (decision branches, module docstring); ``finished`` sees the whole
    completion, opening included. With an activated adapter every case's context comes from the
    run's ``ContextStore`` (encoded once per run), so nothing is encoded per group: the batch's
    rows are decoded together, one call per branch (``_decode_stored``)."""
    from pipeline.decoding.activation import invocation_of
    from pipeline.decoding.batch_generation import encode_prefix, generate

    groups: dict[tuple[int, ...], list[int]] = {}
    for row, ids in enumerate(prompt_ids):
        groups.setdefault(tuple(ids), []).append(row)
    completions: list[list[int]] = [[] for _ in prompt_ids]
    branches = list(openings) or [[]]
    if max(len(o) for o in branches) >= max_new_tokens:
        raise ValueError(f"a decision opening fills the {max_new_tokens}-token completion budget")
    if invocation_of(model) is not None:
        return _decode_stored(
            model, prompt_ids, groups, branches, max_new_tokens, finished, args, kwargs
        )
    for ids, rows in groups.items():
        prefix = encode_prefix(model, list(ids[:-1])) if len(ids) > 1 else None
        if prefix is not None and encoded is not None:
            encoded[ids[:-1]] = prefix.cache
        for k, opening in enumerate(branches):
            mine = rows[k :: len(branches)]
            if not mine:
                continue
            done = finished
            if opening and finished is not None:
                done = lambda reply, head=opening: finished(head + reply)  # noqa: E731
            replies = generate(
                model,
                [list(ids) + opening] * len(mine),
                max_new_tokens - len(opening),
                *args,
                batch_size=len(mine),
                prefix=prefix,
                finished=done,
                **kwargs,
            )
            for row, reply in zip(mine, replies, strict=True):
                completions[row] = opening + reply
    return completions


def _decode_stored(
    model: Any,
    prompt_ids: list[list[int]],
    groups: dict[tuple[int, ...], list[int]],
    branches: list[list[int]],
    max_new_tokens: int,
    finished: Callable[[list[int]], bool] | None,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> list[list[int]]:
    """An activated adapter's batch: every row of every group and decision branch decoded in one
    call, each resumed from its case's stored context after its branch's opening. A decoded token
    reads the weights once for the batch instead of once per group or branch (the weights, not
    the contexts, are most of what a 2-core CPU reads per token)."""
    from pipeline.decoding.activation import invocation_of, stored_rows
    from pipeline.decoding.batch_generation import generate

    rows, heads = [], []
    for mine in groups.values():
        for k, opening in enumerate(branches):
            rows += mine[k :: len(branches)]
            heads += [opening] * len(mine[k :: len(branches)])
    prompts = [list(prompt_ids[row]) + head for row, head in zip(rows, heads, strict=True)]
    prefix, kept = stored_rows(model, prompts, invocation_of(model))

    def done(head: list[int]) -> Callable[[list[int]], bool]:
        """The row's reply is its opening and what it decodes, within the completion budget."""
        return lambda reply: (
            len(head) + len(reply) >= max_new_tokens
            or (finished is not None and finished(head + reply))
        )

    replies = generate(
        model,
        prompts,
        max_new_tokens - min(len(head) for head in heads),
        *args,
        batch_size=len(rows),
        prefix=prefix,
        resume=kept,
        finished=[done(head) for head in heads],
        **kwargs,
    )
    completions: list[list[int]] = [[] for _ in prompt_ids]
    for row, head, reply in zip(rows, heads, replies, strict=True):
        completions[row] = head + reply
    return completions


def sampled_prefix(trainer: Any, prompt: tuple[int, ...]) -> Any | None:
    """The cache of ``prompt`` but its last token that ``trainer``'s sampling encoded, or None.
    TRL reuses a step's samples in later optimizer steps when ``num_iterations`` > 1. By default
    only the step that sampled reads the cache (its weights made it) and the later ones encode the
    prompt again; a trainer whose ``context_reuse_steps`` is k reads it in the k steps from the
    sampling's (``model.context_reuse: generation``: the context held at the sampling weights)."""
    step, caches = getattr(trainer, "_sampled_prefixes", (None, {}))
    window = getattr(trainer, "context_reuse_steps", 1)
    if step is None or not 0 <= trainer.state.global_step - step < window:
        return None
    return caches.get(tuple(prompt[:-1]))


def fast_sampling_applies(trainer: Any, multimodal_fields: Any, images: Any) -> bool:
    """Whether ``trainer``'s next generation can use the shared-prefix sampler."""
    return (
        not trainer.use_vllm
        and not getattr(trainer, "_is_vlm", False)
        and not images
        and not multimodal_fields
        and not trainer.min_p
        and trainer.repetition_penalty == 1.0
        and not (trainer.args.generation_kwargs or {})
    )


def fast_sampling_trainer(
    base: type, terminal: set[str] | None = None, branches: bool = False
) -> type:
    """A subclass of TRL's GRPOTrainer ``base`` that samples with the shared-prefix decoder;
    with ``terminal`` tool names (plan mode) a completion ends at its decision; ``branches``
    splits each group across those decisions (module docstring)."""
    import torch
    from trl.models import unwrap_model_for_generation

    from pipeline.decoding.batch_generation import sampling_choice

    class SharedPrefixGRPOTrainer(base):  # type: ignore[misc, valid-type]
        """GRPOTrainer whose CPU sampling encodes each group's prompt once (module docstring)."""

        decision_tools = terminal
        decision_branches = branches

        def _generate_single_turn(
            self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False
        ):
            if not fast_sampling_applies(self, multimodal_fields, images):
                return super()._generate_single_turn(
                    prompt_ids, images, multimodal_fields, num_generations, has_tool_images
                )
            if not hasattr(self, "_sampling_generator"):  # seeded, owned by this trainer
                self._sampling_generator = torch.Generator().manual_seed(self.args.seed)
            choose = sampling_choice(
                self._sampling_generator, self.temperature, self.top_k or 0, self.top_p
            )
            tools = self.decision_tools
            decided = decision_reached(self._tokenizer, tools) if tools else None
            encoded: dict[tuple[int, ...], Any] = {}
            openings = branch_openings(self._tokenizer, tools) if self.decision_branches else ()
            self._sampled_prefixes = (None, {})  # the last step's caches go now, not after
            with unwrap_model_for_generation(
                self.model_wrapped, self.accelerator, generation_kwargs=self.generation_kwargs
            ) as model:
                completions = generate_by_prompt(
                    model,
                    prompt_ids,
                    self.max_completion_length,
                    set(self.eos_token_ids),
                    self._tokenizer.pad_token_id,
                    choose=choose,
                    keep_stop=True,  # TRL trains the end-of-turn token of finished completions
                    finished=decided,
                    encoded=encoded,
                    openings=openings,
                )
            self._sampled_prefixes = (self.state.global_step, encoded)
            if decided is not None:
                end = self._tokenizer.eos_token_id  # TRL counts it among self.eos_token_ids
                completions = end_decided(completions, decided, end, self.max_completion_length)
            return completions, None

    return SharedPrefixGRPOTrainer
