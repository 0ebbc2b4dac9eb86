"""Greedy replies to many prompts that share a long prefix, fast on a CPU.

Plan-mode prompts of one environment share their whole system message (hundreds to ~1.4k tokens)
and differ only in the case. On a 2-core CPU, decoding is bound by reading the KV cache, and
``model.generate`` on a left-padded batch pays three times over: every prompt re-encodes the shared
prefix; the padding mask switches SDPA off its grouped-query path, so each layer copies its keys
and values to every query head (``repeat_kv``) at every decoded token; and the prompts' tokens are
re-read for every sequence. ``generate_greedy`` encodes the shared prefix once, copies its cache to
each batch, and decodes with ``sdpa_gqa``: SDPA with the query heads of each key/value head folded
into one group, which is exact for a single query token and never copies the cache.

The output is the same as one-prompt-at-a-time greedy decoding (``tests/test_batch_generation.py``
checks it token for token on a real model), only cheaper: figures in benchmarks/RESULTS.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

GQA_ATTENTION = "sdpa_gqa"


def _sdpa_gqa(module: Any, query: Any, key: Any, value: Any, attention_mask: Any, **kwargs: Any):
    """SDPA that decodes one token per sequence without expanding grouped keys and values."""
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    batch, heads, q_len, dim = query.shape
    groups = heads // key.shape[1]
    if q_len != 1 or groups == 1 or kwargs.get("output_attentions"):
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    # Query heads h = k * groups + j all attend with key/value head k: fold j into the query axis.
    folded = query.reshape(batch, key.shape[1], groups, dim)
    mask = attention_mask[:, :, :, : key.shape[2]] if attention_mask is not None else None
    out = torch.nn.functional.scaled_dot_product_attention(
        folded, key, value, attn_mask=mask, scale=kwargs.get("scaling")
    )
    return out.reshape(batch, heads, 1, dim).transpose(1, 2).contiguous(), None


def register_gqa_attention() -> str:
    """Register ``sdpa_gqa`` with transformers (idempotent); returns its name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    AttentionInterface.register(GQA_ATTENTION, _sdpa_gqa)
    ALL_MASK_ATTENTION_FUNCTIONS.register(GQA_ATTENTION, sdpa_mask)
    return GQA_ATTENTION


def _common_prefix(rows: Sequence[Sequence[int]]) -> int:
    """Length of the token prefix every row shares, leaving each row at least one token."""
    shortest = min(len(r) for r in rows)
    n = 0
    while n < shortest - 1 and all(r[n] == rows[0][n] for r in rows):
        n += 1
    return n


def _preallocated_cache(prefix_cache: Any, batch: int, capacity: int) -> Any:
    """A cache holding the prefix once per sequence, with room for ``capacity`` positions.

    ``DynamicCache`` grows with ``torch.cat``: every decoded token copies the whole cache, which on
    a CPU costs as much as the attention itself. These layers write into a buffer in place."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    class PreallocatedLayer(DynamicLayer):
        def __init__(self, keys: Any, values: Any) -> None:
            super().__init__()
            shape = (batch, keys.shape[1], capacity, keys.shape[3])
            self._keys, self._values = keys.new_empty(shape), values.new_empty(shape)
            self.dtype, self.device, self.is_initialized = keys.dtype, keys.device, True
            self._fill(keys.expand(batch, -1, -1, -1), values.expand(batch, -1, -1, -1), 0)

        def _fill(self, keys: Any, values: Any, start: int) -> tuple[Any, Any]:
            end = start + keys.shape[-2]
            self._keys[:, :, start:end] = keys
            self._values[:, :, start:end] = values
            self.keys, self.values = self._keys[:, :, :end], self._values[:, :, :end]
            return self.keys, self.values

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any):
            return self._fill(key_states, value_states, self.keys.shape[-2])

    cache = DynamicCache()
    cache.layers = [PreallocatedLayer(layer.keys, layer.values) for layer in prefix_cache.layers]
    return cache


def generate_greedy(
    model: Any,
    prompts: Sequence[Sequence[int]],
    max_new_tokens: int,
    stop_ids: set[int],
    pad_id: int,
    batch_size: int = 16,
) -> list[list[int]]:
    """Greedy continuations of token-id ``prompts`` (without their stop token), in order.

    Args:
        model: A causal LM (or PEFT model) in eval mode; it is switched to ``sdpa_gqa``.
        prompts: Token ids of each prompt (chat template applied, generation prompt added).
        max_new_tokens: Most tokens generated per prompt.
        stop_ids: Token ids that end a reply (eos, end of turn).
        pad_id: Any token id: padded positions are masked out.
        batch_size: Prompts decoded together.
    """
    import torch

    register_gqa_attention()
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    previous = base.config._attn_implementation
    base.set_attn_implementation(GQA_ATTENTION)
    device = next(model.parameters()).device
    shared = _common_prefix(prompts)
    replies: list[list[int]] = []
    try:
        with torch.no_grad():
            prefix = torch.tensor([list(prompts[0][:shared])], device=device)
            prefix_cache = (
                model(input_ids=prefix, use_cache=True).past_key_values if shared else None
            )
            for start in range(0, len(prompts), batch_size):
                batch = [list(p[shared:]) for p in prompts[start : start + batch_size]]
                replies += _decode_batch(
                    model, batch, shared, prefix_cache, max_new_tokens, stop_ids, pad_id
                )
    finally:
        base.set_attn_implementation(previous)
    return replies


def _decode_batch(
    model: Any,
    suffixes: list[list[int]],
    shared: int,
    prefix_cache: Any,
    max_new_tokens: int,
    stop_ids: set[int],
    pad_id: int,
) -> list[list[int]]:
    """Left-pad the suffixes after the shared prefix and decode them greedily together."""
    import torch

    device = next(model.parameters()).device
    width = max(len(s) for s in suffixes)
    batch = len(suffixes)
    ids = torch.full((batch, width), pad_id, dtype=torch.long, device=device)
    mask = torch.zeros((batch, shared + width), dtype=torch.long, device=device)
    mask[:, :shared] = 1
    for row, suffix in enumerate(suffixes):
        ids[row, width - len(suffix) :] = torch.tensor(suffix, device=device)
        mask[row, shared + width - len(suffix) :] = 1
    positions = (mask.cumsum(-1) - 1).clamp(min=0)[:, shared:]
    capacity = shared + width + max_new_tokens
    cache = _preallocated_cache(prefix_cache, batch, capacity) if prefix_cache is not None else None
    out: list[list[int]] = [[] for _ in suffixes]
    done = torch.zeros(batch, dtype=torch.bool, device=device)
    stops = torch.tensor(sorted(stop_ids), device=device)
    for _ in range(max_new_tokens):
        result = model(
            input_ids=ids,
            attention_mask=mask,
            position_ids=positions,
            past_key_values=cache,
            use_cache=True,
        )
        cache = result.past_key_values
        token = result.logits[:, -1].argmax(-1)
        done |= torch.isin(token, stops)
        for row in (~done).nonzero().flatten().tolist():
            out[row].append(int(token[row]))
        if bool(done.all()):
            break
        ids = token.unsqueeze(-1)
        positions = positions[:, -1:] + 1
        mask = torch.cat([mask, torch.ones((batch, 1), dtype=mask.dtype, device=device)], -1)
    return out
