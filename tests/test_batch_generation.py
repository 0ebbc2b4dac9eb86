"""pipeline.batch_generation: the prefix-cached batch decodes exactly what one-by-one greedy does."""

from __future__ import annotations

import torch
from transformers import AutoTokenizer

from pipeline.batch_generation import GQA_ATTENTION, generate_greedy
from pipeline.model import build_tiny_model, smollm2_path


def _tiny():
    tokenizer = AutoTokenizer.from_pretrained(smollm2_path())
    model = build_tiny_model(tokenizer).eval()
    assert model.config.num_key_value_heads < model.config.num_attention_heads  # GQA path
    return model, tokenizer


def _one_by_one(model, prompt: list[int], n: int, stops: set[int]) -> list[int]:
    out = model.generate(
        torch.tensor([prompt]), max_new_tokens=n, do_sample=False, eos_token_id=sorted(stops)
    )[0, len(prompt) :].tolist()
    return [t for t in out if t not in stops]


def test_batched_prefix_cached_decoding_equals_one_by_one_greedy() -> None:
    model, _ = _tiny()
    rng = torch.Generator().manual_seed(0)
    prefix = torch.randint(5, 1000, (40,), generator=rng).tolist()
    prompts = [prefix + torch.randint(5, 1000, (k,), generator=rng).tolist() for k in (3, 9, 5)]
    stops = {0}
    batched = generate_greedy(model, prompts, 12, stops, pad_id=7, batch_size=2)
    assert batched == [_one_by_one(model, p, 12, stops) for p in prompts]
    assert all(len(b) == 12 for b in batched)
    assert model.config._attn_implementation != GQA_ATTENTION  # restored afterwards


def test_decoding_stops_at_a_stop_token_per_sequence() -> None:
    model, _ = _tiny()
    prompts = [[11, 12, 13, 14], [11, 12, 13, 15, 16]]
    free = generate_greedy(model, prompts, 8, {-1}, pad_id=0)
    stops = {free[0][-1]}  # a token the first prompt does produce
    stopped = generate_greedy(model, prompts, 8, stops, pad_id=0)
    for free_row, stopped_row in zip(free, stopped, strict=True):
        cut = next((i for i, t in enumerate(free_row) if t in stops), len(free_row))
        assert stopped_row == free_row[:cut]
    assert len(stopped[0]) < 8
