"""GRPO's loss with the shared prompt as fixed context (``training.context_grad: false``).

A steps-mode prompt is the conversation so far (~2-3k tokens); a reply is ~40-100 tokens. TRL
scores a group of G replies by running G full sequences through the model and back: on a 2-core
CPU that is ~6 minutes per group of 8 (95 s for the forward and backward of two 3.3k-token rows).
Here the prompt but its last token is encoded once per group, without gradient, and the G replies
are run (with gradient) against that one cache: the same log-probabilities (to float rounding),
at ~1/10 of the cost. Where the step's own sampling already encoded it with the same weights
(``trainer_sampling.sampled_prefix``), that encoding is used and the prompt is not read again.

What it changes is the gradient. The adapter's effect on how the prompt itself is encoded (its
keys and values at every layer) is held fixed for the step; the replies' own queries, keys,
values and MLPs still learn, so the policy still learns where in the evidence to look and what to
write. Everything else (sampling, advantages, the loss formula, the optimizer) is TRL's. It is a
CPU trade-off and off by default; ``tests/test_context_grad.py`` measures how far the gradient is
from the full one on a tiny model.
"""

from __future__ import annotations

from typing import Any


def groups_by_prompt(prompt_ids: Any, prompt_mask: Any) -> dict[tuple[int, ...], list[int]]:
    """Rows of the batch keyed by their unpadded prompt tokens, in first-seen order."""
    groups: dict[tuple[int, ...], list[int]] = {}
    for row, (ids, mask) in enumerate(zip(prompt_ids.tolist(), prompt_mask.tolist(), strict=True)):
        key = tuple(t for t, m in zip(ids, mask, strict=True) if m)
        groups.setdefault(key, []).append(row)
    return groups


def context_logits(
    model: Any, prompt: tuple[int, ...], completions: Any, mask: Any, encoded: Any = None
) -> Any:
    """Logits predicting each token of ``completions`` ([g, C]) after ``prompt``, the prompt but
    its last token encoded without gradient and shared by the g rows. ``encoded``: that
    encoding's cache when the caller already has it (the step's sampling made it with the same
    weights), else it is encoded here. With an activated adapter the fixed context is the prompt
    before its assistant turn, read from the run's ``ContextStore`` (the base model's, the same at
    every step: no gradient is lost), and the turn's opening tokens run with the adapter."""
    import torch

    from pipeline.decoding.activation import activation_start, invocation_of, plain_lora, store_of
    from pipeline.decoding.batch_generation import encode_prefix

    device = completions.device
    g, c = completions.shape
    invocation = invocation_of(model)
    cut = activation_start(prompt, invocation) if invocation else len(prompt) - 1
    context, head = list(prompt[:cut]), list(prompt[cut:])
    if invocation:
        encoded = store_of(model).get(model, context)
    elif encoded is None:
        encoded = encode_prefix(model, context).cache  # the shared prefix of batched decoding
    cache = _rows_of(encoded, g)
    heads = torch.tensor([head] * g, dtype=completions.dtype, device=device)
    suffix = torch.cat([heads, completions], dim=1)
    n, h = len(context), len(head)
    attention = torch.cat([torch.ones(g, n + h, dtype=mask.dtype, device=device), mask], dim=1)
    positions = torch.arange(n, n + h + c, device=device).expand(g, -1)
    active = {"alora_offsets": [h + c] * g} if invocation else {}
    with plain_lora(model, bool(invocation)):  # the adapter is on at every position here
        out = model(
            input_ids=suffix,
            attention_mask=attention,
            position_ids=positions,
            past_key_values=cache,
            use_cache=True,
            **active,
        )
    return out.logits[:, h - 1 : -1, :]


def _rows_of(encoded: Any, g: int) -> Any:
    """A new cache whose layers show ``encoded``'s keys and values to ``g`` rows (views, no
    copy); the forward pass grows the new cache, so ``encoded`` can serve another group."""
    from transformers.cache_utils import DynamicLayer

    from pipeline.decoding.preallocated_cache import cache_of

    layers = []
    for source in encoded.layers:
        layer = DynamicLayer()
        layer.lazy_initialization(source.keys, source.values)
        layer.keys = source.keys.expand(g, -1, -1, -1)
        layer.values = source.values.expand(g, -1, -1, -1)
        layers.append(layer)
    return cache_of(layers)


def context_grad_trainer(base: type, reuse_steps: int = 1) -> type:
    """A subclass of TRL's GRPOTrainer ``base`` whose log-probabilities take the prompt as fixed
    context (module docstring); images, Liger kernels and MoE aux losses go to TRL unchanged.
    ``reuse_steps``: how many optimizer steps, from the sampling's, read the prompt from the
    sampling's encoding (``trainer_sampling.sampled_prefix``; 1: only the sampling's own)."""
    import torch
    from trl.trainer.utils import selective_log_softmax, selective_log_softmax_and_entropy

    from pipeline.decoding.trainer_sampling import sampled_prefix

    class ContextGradGRPOTrainer(base):  # type: ignore[misc, valid-type]
        """GRPOTrainer scoring each group against its prompt encoded once, without gradient."""

        context_reuse_steps = reuse_steps

        def _get_per_token_logps_and_entropies(
            self, model, *args, batch_size=None, compute_aux_loss=False, **kwargs
        ):
            names = ("input_ids", "attention_mask", "logits_to_keep", "compute_entropy")
            given = dict(zip(names, args, strict=False)) | kwargs
            extras = {k for k, v in given.items() if k not in names and v is not None}
            # trl <= 1.15 keeps Liger's fused loss behind `use_liger_kernel`; 1.16 dropped the
            # attribute (its fused LM head only runs when asked for, so the logits path below holds).
            liger = getattr(self, "use_liger_kernel", False)
            if compute_aux_loss or liger or extras:  # images, token types: TRL
                return super()._get_per_token_logps_and_entropies(
                    model, *args, batch_size=batch_size, compute_aux_loss=compute_aux_loss, **kwargs
                )
            input_ids, attention_mask = given["input_ids"], given["attention_mask"]
            keep = given["logits_to_keep"]
            completions, completion_mask = input_ids[:, -keep:], attention_mask[:, -keep:]
            groups = groups_by_prompt(input_ids[:, :-keep], attention_mask[:, :-keep])
            logps = [None] * input_ids.size(0)
            entropies = [None] * input_ids.size(0)
            for prompt, rows in groups.items():
                index = torch.tensor(rows, device=input_ids.device)
                logits = context_logits(
                    model,
                    prompt,
                    completions[index],
                    completion_mask[index],
                    encoded=sampled_prefix(self, prompt),
                )
                if given.get("compute_entropy"):
                    lp, ent = selective_log_softmax_and_entropy(
                        logits,
                        completions[index],
                        entropy_requires_grad=self._entropy_bonus_enabled,
                        temperature=self.temperature,
                        row_mask=completion_mask[index],
                    )
                else:
                    lp, ent = (
                        selective_log_softmax(
                            logits,
                            completions[index],
                            temperature=self.temperature,
                            row_mask=completion_mask[index],
                        ),
                        None,
                    )
                for i, row in enumerate(rows):
                    logps[row] = lp[i]
                    entropies[row] = ent[i] if ent is not None else None
            stacked = torch.stack(logps)
            ent_out = torch.stack(entropies) if given.get("compute_entropy") else None
            return stacked, ent_out, None

    return ContextGradGRPOTrainer


def context_sft_trainer(base: type) -> type:
    """A subclass of TRL's SFTTrainer ``base`` whose loss reads each example's prompt as fixed
    context (the steps warm start: ~3k-token prompts, ~60-token replies). Examples of one batch
    that share a prompt (a cut's two decisions, ``warmup.prompt_grouped``) share its encoding."""
    import torch
    from torch.nn.utils.rnn import pad_sequence

    class ContextSFTTrainer(base):  # type: ignore[misc, valid-type]
        """SFTTrainer whose completion-only loss encodes each distinct prompt once, without
        gradient, and runs that prompt's replies against the one encoding."""

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            replies: dict[tuple[int, ...], list[tuple[Any, Any]]] = {}
            for ids, labels in zip(inputs["input_ids"], inputs["labels"], strict=True):
                kept = (labels != -100).nonzero().flatten()
                if len(kept) == 0:
                    continue
                start, end = int(kept[0]), int(kept[-1]) + 1
                prompt = tuple(ids[:start].tolist())
                replies.setdefault(prompt, []).append((ids[start:end], labels[start:end]))
            total, count = 0.0, 0
            for prompt, group in replies.items():  # right-padded replies, on their device
                tokens = pad_sequence([reply for reply, _ in group], batch_first=True)
                targets = pad_sequence([t for _, t in group], batch_first=True, padding_value=-100)
                mask = pad_sequence([torch.ones_like(r) for r, _ in group], batch_first=True)
                logits = context_logits(model, prompt, tokens, mask)
                total = total + torch.nn.functional.cross_entropy(
                    logits.reshape(-1, logits.shape[-1]),
                    targets.reshape(-1),
                    ignore_index=-100,
                    reduction="sum",
                )
                count += int((targets != -100).sum())
            loss = total / max(count, 1)
            return (loss, None) if return_outputs else loss

    return ContextSFTTrainer
