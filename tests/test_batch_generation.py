"""pipeline.decoding.batch_generation: the prefix-cached batch decodes exactly what one-by-one greedy does."""

from __future__ import annotations

import pytest
import torch

from pipeline.decoding.batch_generation import (
    GQA_ATTENTION,
    generate,
    no_repeat_ngram,
    sampling_choice,
)

from conftest import tiny_model


def _tiny():
    model, tokenizer = tiny_model()
    model.eval()
    assert model.config.num_key_value_heads < model.config.num_attention_heads  # GQA path
    return model, tokenizer


def _tokens(rng: torch.Generator, n: int) -> list[int]:
    return torch.randint(5, 1000, (n,), generator=rng).tolist()


def _prompts(rng: torch.Generator, head: int, lengths: tuple[int, ...]):
    """A random shared head of ``head`` tokens and prompts that extend it by ``lengths`` tokens."""
    shared = _tokens(rng, head)
    return shared, [shared + _tokens(rng, k) for k in lengths]


def _one_by_one(model, prompt: list[int], n: int, stops: set[int]) -> list[int]:
    out = model.generate(
        torch.tensor([prompt]), max_new_tokens=n, do_sample=False, eos_token_id=sorted(stops)
    )[0, len(prompt) :].tolist()
    return [t for t in out if t not in stops]


def test_batched_prefix_cached_decoding_equals_one_by_one_greedy() -> None:
    model, _ = _tiny()
    rng = torch.Generator().manual_seed(0)
    prefix, prompts = _prompts(rng, 40, (3, 9, 5))
    stops = {0}
    batched = generate(model, prompts, 12, stops, pad_id=7, batch_size=2)
    assert batched == [_one_by_one(model, p, 12, stops) for p in prompts]
    assert all(len(b) == 12 for b in batched)
    assert model.config._attn_implementation != GQA_ATTENTION  # restored afterwards


def test_decoding_stops_at_a_stop_token_per_sequence() -> None:
    model, _ = _tiny()
    prompts = [[11, 12, 13, 14], [11, 12, 13, 15, 16]]
    free = generate(model, prompts, 8, {-1}, pad_id=0)
    stops = {free[0][-1]}  # a token the first prompt does produce
    stopped = generate(model, prompts, 8, stops, pad_id=0)
    for free_row, stopped_row in zip(free, stopped, strict=True):
        cut = next((i for i, t in enumerate(free_row) if t in stops), len(free_row))
        assert stopped_row == free_row[:cut]
    assert len(stopped[0]) < 8


def test_prompts_without_a_shared_prefix_decode_like_one_by_one() -> None:
    model, _ = _tiny()
    prompts = [[21, 12, 13], [22, 15, 16, 17]]  # differ at the first token: no cascade prefix
    assert generate(model, prompts, 6, {-1}, pad_id=0) == [
        _one_by_one(model, p, 6, {-1}) for p in prompts
    ]


def test_near_zero_temperature_sampling_is_greedy() -> None:
    model, _ = _tiny()
    prompts = [[11, 12, 13, 14], [11, 12, 13, 15, 16]]
    choose = sampling_choice(torch.Generator().manual_seed(1), temperature=1e-6)
    assert generate(model, prompts, 8, {-1}, 0, choose=choose) == generate(
        model, prompts, 8, {-1}, 0
    )


def test_keep_stop_keeps_the_ending_token_and_finished_ends_a_reply_early() -> None:
    model, _ = _tiny()
    prompts = [[11, 12, 13, 14], [11, 12, 13, 15, 16]]
    free = generate(model, prompts, 8, {-1}, pad_id=0)
    stops = {free[0][2]}
    kept = generate(model, prompts, 8, stops, 0, keep_stop=True)
    for free_row, kept_row in zip(free, kept, strict=True):
        cut = next((i + 1 for i, t in enumerate(free_row) if t in stops), len(free_row))
        assert kept_row == free_row[:cut]
    assert kept[0][-1] in stops
    early = generate(model, prompts, 8, {-1}, 0, finished=lambda reply: len(reply) >= 3)
    assert early == [row[:3] for row in free]


def test_sampling_is_seeded_and_keeps_to_top_k_and_top_p() -> None:
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]] * 400))
    draws = [sampling_choice(torch.Generator().manual_seed(3))(logits).tolist() for _ in range(2)]
    assert draws[0] == draws[1] and len(set(draws[0])) == 4
    top_k = sampling_choice(torch.Generator().manual_seed(3), top_k=2)(logits)
    assert set(top_k.tolist()) == {0, 1}
    top_p = sampling_choice(torch.Generator().manual_seed(3), top_p=0.7)(logits)
    assert set(top_p.tolist()) == {0, 1}  # 0.5 < 0.7: the token that crosses 0.7 is kept
    shares = torch.bincount(torch.tensor(draws[0]), minlength=4) / 400
    assert abs(float(shares[0]) - 0.5) < 0.08 and abs(float(shares[3]) - 0.05) < 0.04


def test_finished_rows_leave_the_batch_and_the_rest_decode_unchanged() -> None:
    model, _ = _tiny()
    rng = torch.Generator().manual_seed(2)
    prefix, prompts = _prompts(rng, 30, (2, 6, 4, 3))
    for shared in (prompts, [[21 + i, *p] for i, p in enumerate(prompts)]):  # cascade and plain
        free = generate(model, shared, 10, {-1}, pad_id=7, batch_size=4)
        lengths = {0: 2, 1: 3, 2: 10, 3: 4}  # three rows end early: the batch shrinks twice
        early = generate(
            model,
            shared,
            10,
            {-1},
            pad_id=7,
            batch_size=4,
            finished=lambda reply, n=lengths, f=free: any(
                len(reply) == n[i] and reply == row[: n[i]] for i, row in enumerate(f)
            ),
        )
        assert early == [row[: lengths[i]] for i, row in enumerate(free)]
        assert free == [_one_by_one(model, p, 10, {-1}) for p in shared]


def test_long_suffixes_prefilled_in_chunks_decode_like_one_by_one(monkeypatch) -> None:
    """Interactive turns carry the whole conversation after the shared prefix: it is encoded a
    chunk at a time (bounded attention memory), with the same replies as one pass."""
    import pipeline.decoding.batch_generation as batch_generation

    model, _ = _tiny()
    rng = torch.Generator().manual_seed(3)
    prefix, prompts = _prompts(rng, 20, (13, 6, 22))
    whole = generate(model, prompts, 8, {-1}, pad_id=7, batch_size=3)
    monkeypatch.setattr(batch_generation, "PREFILL_CHUNK", 4)  # 22-token suffixes: 6 chunks
    for shared in (prompts, [[21 + i, *p] for i, p in enumerate(prompts)]):  # cascade and plain
        assert generate(model, shared, 8, {-1}, pad_id=7, batch_size=3) == [
            _one_by_one(model, p, 8, {-1}) for p in shared
        ]
    assert generate(model, prompts, 8, {-1}, pad_id=7, batch_size=3) == whole


def _encoded_columns(model) -> tuple[list[int], object]:
    """Count the token columns each forward pass encodes (prefill chunks and decoding steps)."""
    columns: list[int] = []
    handle = model.register_forward_pre_hook(
        lambda _m, _a, kwargs: columns.append(kwargs["input_ids"].shape[1]), with_kwargs=True
    )
    return columns, handle


def test_a_turn_resumed_from_kept_keys_and_values_decodes_the_same_and_encodes_only_what_is_new(
    monkeypatch,
) -> None:
    """Interactive turns: the second turn's prompt is the first turn's prompt, its reply and a
    new message; kept keys and values give the same replies as encoding it all again."""
    import pipeline.decoding.batch_generation as batch_generation
    from pipeline.decoding.batch_generation import encode_prefix

    monkeypatch.setattr(batch_generation, "PREFILL_CHUNK", 4)
    model, _ = _tiny()
    rng = torch.Generator().manual_seed(4)
    head, first = _prompts(rng, 24, (9, 3, 14))
    prefix = encode_prefix(model, head)
    states: list = []
    replies = generate(model, first, 6, {-1}, pad_id=7, batch_size=3, prefix=prefix, states=states)
    assert [s.ids for s in states] == [p[24:] + r for p, r in zip(first, replies, strict=True)]
    # The next turn: the reply re-tokenized differently at its end, then a tool result.
    second = [
        p + r[:-1] + _tokens(rng, k) for p, r, k in zip(first, replies, (5, 8, 2), strict=True)
    ]
    columns, handle = _encoded_columns(model)
    try:
        resumed = generate(
            model, second, 6, {-1}, pad_id=7, batch_size=3, prefix=prefix, resume=states
        )
        prefill = sum(columns[: len(columns) - 5])  # then 5 passes decode one token each
        columns.clear()
        again = generate(model, second, 6, {-1}, pad_id=7, batch_size=3, prefix=prefix)
        prefill_again = sum(columns[: len(columns) - 5])
    finally:
        handle.remove()
    assert resumed == again == [_one_by_one(model, p, 6, {-1}) for p in second]
    width = max(len(p) - 24 for p in second)
    assert prefill_again == width
    assert prefill == 8  # the longest new part: the turn's message (the reply's tokens are kept)


def test_resume_needs_a_fixed_prefix_that_every_prompt_starts_with() -> None:
    from pipeline.decoding.batch_generation import encode_prefix

    model, _ = _tiny()
    prefix = encode_prefix(model, [11, 12, 13])
    with pytest.raises(ValueError, match="fixed shared prefix"):
        generate(model, [[11, 12, 13, 14]], 2, {-1}, pad_id=7, states=[])
    with pytest.raises(ValueError, match="start with the shared prefix"):
        generate(model, [[11, 12, 99, 14]], 2, {-1}, pad_id=7, prefix=prefix)


def test_ragged_new_parts_are_encoded_row_by_row_and_decode_like_one_by_one(monkeypatch) -> None:
    """One row's long tool result must not make every row encode its length: rows whose new
    tokens fill under half the padded batch are encoded alone, with the same replies."""
    import pipeline.decoding.batch_generation as batch_generation
    from pipeline.decoding.batch_generation import encode_prefix

    monkeypatch.setattr(batch_generation, "PREFILL_CHUNK", 4)
    model, _ = _tiny()
    rng = torch.Generator().manual_seed(5)
    head, prompts = _prompts(rng, 16, (2, 3, 30))
    prefix = encode_prefix(model, head)
    columns, handle = _encoded_columns(model)
    try:
        replies = generate(model, prompts, 5, {-1}, pad_id=7, batch_size=3, prefix=prefix)
    finally:
        handle.remove()
    assert replies == [_one_by_one(model, p, 5, {-1}) for p in prompts]
    prefill = sum(columns[: len(columns) - 4])  # then 4 passes (the 5th token needs none)
    assert prefill == 2 + 3 + 30  # not 3 x 30


def test_a_resumed_turn_with_one_long_result_encodes_each_rows_new_part_alone(monkeypatch) -> None:
    """Kept keys and values, one row without any (its cache was dropped): each row encodes only
    what it adds, and the replies are those of decoding every prompt alone."""
    import pipeline.decoding.batch_generation as batch_generation
    from pipeline.decoding.batch_generation import encode_prefix

    monkeypatch.setattr(batch_generation, "PREFILL_CHUNK", 4)
    model, _ = _tiny()
    rng = torch.Generator().manual_seed(6)
    head, first = _prompts(rng, 12, (6, 4, 5, 7))
    prefix = encode_prefix(model, head)
    states: list = []
    replies = generate(model, first, 4, {-1}, pad_id=7, batch_size=4, prefix=prefix, states=states)
    added = (2, 3, 40, 1)  # one row's tool result is long
    second = [p + r + _tokens(rng, k) for p, r, k in zip(first, replies, added, strict=True)]
    resume = [states[0], None, states[2], states[3]]
    columns, handle = _encoded_columns(model)
    try:
        resumed = generate(
            model, second, 4, {-1}, pad_id=7, batch_size=4, prefix=prefix, resume=resume
        )
    finally:
        handle.remove()
    assert resumed == [_one_by_one(model, p, 4, {-1}) for p in second]
    prefill = sum(columns[: len(columns) - 3])  # then 3 passes decode one token each
    assert prefill == 2 + (len(second[1]) - 12) + 40 + 1


def _first_repeat(reply: list[int], n: int) -> int | None:
    """Index of the first token that completes an n-gram already seen in ``reply``."""
    seen = set()
    for end in range(n, len(reply) + 1):
        gram = tuple(reply[end - n : end])
        if gram in seen:
            return end - 1
        seen.add(gram)
    return None


def test_no_repeat_ngram_bans_the_token_that_would_repeat_an_ngram_of_the_reply() -> None:
    banned = no_repeat_ngram(3)
    assert banned([5, 6]) == []
    assert banned([5, 6, 7, 5, 6]) == [7]  # "5 6 7" exists, so 7 may not follow "5 6" again
    assert sorted(banned([5, 6, 7, 5, 6, 9, 5, 6])) == [7, 9]
    with pytest.raises(ValueError, match="n >= 2"):
        no_repeat_ngram(1)


def test_guarded_decoding_never_repeats_an_ngram_and_matches_until_the_first_repeat() -> None:
    model, _ = _tiny()
    rng = torch.Generator().manual_seed(3)
    _, prompts = _prompts(rng, 20, (4, 6))
    free = generate(model, prompts, 40, {-1}, pad_id=0)
    guarded = generate(model, prompts, 40, {-1}, pad_id=0, ban=no_repeat_ngram(3))
    assert any(_first_repeat(row, 3) is not None for row in free)  # the tiny model does loop
    for free_row, guarded_row in zip(free, guarded, strict=True):
        assert _first_repeat(guarded_row, 3) is None
        cut = _first_repeat(free_row, 3)
        if cut is not None:
            assert guarded_row[:cut] == free_row[:cut] and guarded_row[cut] != free_row[cut]


def test_rows_are_batched_shortest_first_and_replies_come_back_in_order() -> None:
    """A left-padded batch encodes its longest row's columns for every row: mixed lengths are
    sorted into batches of like length, and each reply still lands at its own prompt."""
    model, _ = _tiny()
    rng = torch.Generator().manual_seed(4)
    prefix, prompts = _prompts(rng, 10, (30, 2, 31, 3))
    columns, handle = _encoded_columns(model)
    try:
        replies = generate(model, prompts, 1, {-1}, pad_id=7, batch_size=2)
    finally:
        handle.remove()
    assert replies == [_one_by_one(model, p, 1, {-1}) for p in prompts]
    # prefix (10 tokens, less the rows' one own token each) + a short batch + a long batch
    assert columns == [10, 3, 31]
