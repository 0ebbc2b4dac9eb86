"""pipeline.decoding.trainer_sampling: a GRPO batch of several groups is sampled group by group."""

from __future__ import annotations

import torch

from pipeline.decoding.batch_generation import generate, sampling_choice
from pipeline.decoding.trainer_sampling import generate_by_prompt

from conftest import tiny_model


def test_each_group_is_sampled_against_its_own_prompt_encoded_once() -> None:
    model, _ = tiny_model()
    model.eval()
    rng = torch.Generator().manual_seed(0)
    shared = torch.randint(5, 1000, (12,), generator=rng).tolist()
    first = shared + torch.randint(5, 1000, (20,), generator=rng).tolist()
    second = shared + torch.randint(5, 1000, (25,), generator=rng).tolist()
    batch = [first, second, first, second, first, second]  # two groups of G=3, interleaved
    columns: list[int] = []
    handle = model.register_forward_pre_hook(
        lambda _m, _a, kwargs: columns.append(kwargs["input_ids"].shape[1]), with_kwargs=True
    )
    try:
        out = generate_by_prompt(
            model, batch, 6, {-1}, 0, choose=sampling_choice(torch.Generator().manual_seed(5))
        )
    finally:
        handle.remove()
    # Each group: its prompt but the last token once, then 1 + 5 steps of one column each.
    assert columns == [31, 1, 1, 1, 1, 1, 1, 36, 1, 1, 1, 1, 1, 1]
    alone = sampling_choice(torch.Generator().manual_seed(5))
    expected_first = generate(model, [first] * 3, 6, {-1}, 0, batch_size=3, choose=alone)
    assert [out[0], out[2], out[4]] == expected_first
    greedy = generate_by_prompt(model, batch, 6, {-1}, 0)
    assert greedy == [generate(model, [p], 6, {-1}, 0)[0] for p in batch]
