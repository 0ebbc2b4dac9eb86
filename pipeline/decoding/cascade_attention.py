"""``sdpa_gqa``: attention of a decoding batch over one shared prefix, stored once.

A GRPO group, or a batch of plan prompts, shares a long prefix. Registered with transformers as an
attention function, ``sdpa_gqa`` scores each batch's queries against that one copy of the prefix's
keys and values in one matrix product per kv head ("cascade" attention) and against each row's own
suffix cache, with one softmax over both: the same attention as a cache holding the prefix in every
row, without the copies (``pipeline.decoding.batch_generation`` sets ``SHARED_PREFIX`` while it
decodes).
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

GQA_ATTENTION = "sdpa_gqa"
SHARED_PREFIX: ContextVar[list[tuple[Any, Any]] | None] = ContextVar(
    "shared_prefix_kv", default=None
)
"""Keys and values of the shared prefix per layer ([1, kv_heads, P, dim]) while decoding."""


def _sdpa_gqa(module: Any, query: Any, key: Any, value: Any, attention_mask: Any, **kwargs: Any):
    """Attention of a batch over the shared prefix (stored once) and each row's own suffix."""
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    prefix = SHARED_PREFIX.get()
    if prefix is None or kwargs.get("output_attentions"):
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    prefix_keys, prefix_values = prefix[module.layer_idx]
    batch, heads, q_len, dim = query.shape
    kv_heads, suffix = key.shape[1], key.shape[2]
    groups = heads // kv_heads  # query head h reads key/value head h // groups
    scale = kwargs.get("scaling") or dim**-0.5
    q = query.reshape(batch, kv_heads, groups * q_len, dim) * scale
    # Prefix: every row's queries against the one copy of the prefix, as one product per kv head.
    stacked = q.transpose(0, 1).reshape(kv_heads, batch * groups * q_len, dim)
    prefix_scores = (stacked @ prefix_keys[0].transpose(-1, -2)).reshape(
        kv_heads, batch, groups * q_len, -1
    )
    suffix_scores = (q @ key.transpose(-1, -2)).reshape(batch, kv_heads, groups, q_len, suffix)
    suffix_scores = suffix_scores + _additive_mask(attention_mask, q_len, suffix, query)
    scores = torch.cat(
        [prefix_scores.transpose(0, 1), suffix_scores.reshape(batch, kv_heads, -1, suffix)], -1
    )
    probs = scores.softmax(-1)
    prefix_probs, suffix_probs = probs.split([prefix_scores.shape[-1], suffix], -1)
    stacked_probs = prefix_probs.transpose(0, 1).reshape(kv_heads, batch * groups * q_len, -1)
    out = (stacked_probs @ prefix_values[0]).reshape(kv_heads, batch, groups * q_len, dim)
    out = out.transpose(0, 1) + suffix_probs @ value
    return out.reshape(batch, heads, q_len, dim).transpose(1, 2).contiguous(), None


def _additive_mask(mask: Any, q_len: int, kv_len: int, like: Any) -> Any:
    """[batch, 1, 1, q_len, kv_len] additive mask from transformers' (boolean or float) mask."""
    import torch

    if mask is None:  # transformers skips the mask when causal alone is enough
        allowed = torch.ones(q_len, kv_len, dtype=torch.bool, device=like.device).tril(
            kv_len - q_len
        )
        mask = allowed[None, None]
    mask = mask[:, :, :, :kv_len]
    if mask.dtype == torch.bool:
        mask = torch.zeros(mask.shape, dtype=like.dtype, device=like.device).masked_fill(
            ~mask, torch.finfo(like.dtype).min
        )
    return mask.unsqueeze(2)


def register_gqa_attention() -> str:
    """Register ``sdpa_gqa`` with transformers (idempotent); returns its name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    AttentionInterface.register(GQA_ATTENTION, _sdpa_gqa)
    ALL_MASK_ATTENTION_FUNCTIONS.register(GQA_ATTENTION, sdpa_mask)
    return GQA_ATTENTION
