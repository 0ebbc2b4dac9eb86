"""Replies to many prompts that share a long prefix, fast on a CPU: greedy or sampled.

Plan-mode prompts of one environment share their whole system message (hundreds to ~1.4k tokens)
and differ only in the case; a GRPO group is one prompt repeated G times. On a 2-core CPU,
decoding is bound by reading the KV cache, and ``model.generate`` on a batch pays for the shared
prefix over and over: every row re-encodes it, every row keeps its own copy in the cache, and every
decoded token of every row reads that copy again (after ``repeat_kv`` has copied it once per query
head). Here the shared prefix is encoded once and kept once; ``sdpa_gqa`` (an attention function
registered with transformers) scores each batch's queries against it in one matrix product
("cascade" attention), and only each row's own suffix lives in a per-row, preallocated cache.
Scores over prefix and suffix share one softmax, so the result is the same attention.

Greedy ``generate`` output is the same as one-prompt-at-a-time ``model.generate`` (``tests/test_batch_generation.py``
checks it token for token); figures in benchmarks/RESULTS.md (``decode_cpu``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pipeline.decoding.activation import (
    activation_start,
    adapter_kwargs,
    all_active,
    context_kwargs,
    invocation_of,
    plain_lora,
)
from pipeline.decoding.cascade_attention import GQA_ATTENTION, SHARED_PREFIX, register_gqa_attention
from pipeline.decoding.kv_rows import RowKV, SharedPrefix, capture, place, preload
from pipeline.decoding.preallocated_cache import keep_rows_of, row_view, suffix_cache


def common_prefix(rows: Sequence[Sequence[int]]) -> int:
    """Length of the token prefix every row shares, leaving each row at least one token."""
    shortest = min(len(r) for r in rows)
    n = 0
    while n < shortest - 1 and all(r[n] == rows[0][n] for r in rows):
        n += 1
    return n


Finished = Callable[[list[int]], bool] | Sequence[Callable[[list[int]], bool]]
"""When a reply is done: one check for every row, or one per row."""

PREFILL_CHUNK = 256
"""Suffix tokens encoded per forward pass before decoding starts. An interactive turn's suffix is
the whole conversation so far (thousands of tokens); encoded at once for 16 rows, its attention
scores alone take tens of GB (an interactive evaluation was OOM-killed at 24 GB). In chunks they
take rows x heads x 256 x length floats. The replies are the same as from one pass
(``tests/test_batch_generation.py``)."""

RAGGED_BELOW = 0.5
"""Each row's new tokens are encoded on their own when together they fill less than this share of
the batch's padded rectangle (rows x the longest new part). A batch encodes the same columns for
every row, so in an interactive turn one row's ~2k-token tool result made every row encode ~2k
columns against its whole conversation (~75% of a lockstep evaluation's time in attention)."""

COMPACT_BELOW = 0.75
"""A batch drops its finished rows once fewer than this share of them are still decoding: a
finished row costs as much as a live one at every step, and a batch otherwise runs as long as its
longest reply (one plan rambling to the cap kept 49 finished ones decoding)."""


def greedy_choice(logits: Any) -> Any:
    """The most likely next token of each row."""
    return logits.argmax(-1)


def sampling_choice(
    generator: Any, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0
) -> Callable[[Any], Any]:
    """Next-token sampler (temperature, then top-k, then top-p) drawing from ``generator``."""
    import torch

    def choose(logits: Any) -> Any:
        logits = logits.float() / max(temperature, 1e-5)
        if top_k and top_k < logits.shape[-1]:
            kth = logits.topk(top_k, -1).values[:, -1:]
            logits = logits.masked_fill(logits < kth, float("-inf"))
        if top_p < 1.0:
            ordered, order = logits.sort(-1, descending=True)
            cumulative = ordered.softmax(-1).cumsum(-1)
            drop = cumulative - ordered.softmax(-1) > top_p  # keep the token that crosses top_p
            logits = logits.masked_fill(drop.scatter(-1, order, drop), float("-inf"))
        return torch.multinomial(logits.softmax(-1), 1, generator=generator).squeeze(-1)

    return choose


def no_repeat_ngram(n: int) -> Callable[[list[int]], list[int]]:
    """``banned(reply)``: the tokens that would repeat an ``n``-gram already in ``reply`` (the
    reply only, never the prompt, whose ids a reply must be free to cite). What transformers'
    ``no_repeat_ngram_size`` does, for the shared-prefix decoder: a small model's greedy replies
    otherwise loop in a terminal call's id list until the token cap (RESULTS.md,
    "steps_sft_ceiling"). Pick ``n`` above the longest legitimate repeat: two tool calls in one
    reply share ``"}}</tool_call>`` ... ``{"name": "``."""
    if n < 2:
        raise ValueError(f"no_repeat_ngram needs n >= 2, got {n}")

    def banned(reply: list[int]) -> list[int]:
        if len(reply) < n:
            return []
        tail = reply[len(reply) - n + 1 :]
        return [reply[i + n - 1] for i in range(len(reply) - n + 1) if reply[i : i + n - 1] == tail]

    return banned


def generate(
    model: Any,
    prompts: Sequence[Sequence[int]],
    max_new_tokens: int,
    stop_ids: set[int],
    pad_id: int,
    batch_size: int = 16,
    choose: Callable[[Any], Any] = greedy_choice,
    keep_stop: bool = False,
    finished: Finished | None = None,
    prefix: SharedPrefix | None = None,
    resume: Sequence[RowKV | None] | None = None,
    states: list[RowKV] | None = None,
    ban: Callable[[list[int]], list[int]] | None = None,
    decide: Callable[[list[int], int, Any], int] | None = None,
) -> list[list[int]]:
    """Continuations of token-id ``prompts``, in order.

    Args:
        model: A causal LM (or PEFT model); it is switched to ``sdpa_gqa`` while decoding.
        prompts: Token ids of each prompt (chat template applied, generation prompt added).
        max_new_tokens: Most tokens generated per prompt.
        stop_ids: Token ids that end a reply (eos, end of turn).
        pad_id: Any token id: padded positions are masked out.
        batch_size: Prompts decoded together.
        choose: Next token from the last logits: ``greedy_choice`` or ``sampling_choice(...)``.
        keep_stop: Keep the stop token that ended a reply (a GRPO completion is trained to end).
        finished: ``finished(reply_so_far)`` ends a reply early (an evaluation stops at the
            decision, whose replay ignores anything after it); or one such check per prompt.
        prefix: The shared prefix to decode after (``encode_prefix``; every prompt starts with
            it), instead of the prompts' longest common prefix encoded anew.
        resume: Per prompt, the keys and values its previous turn left (``pipeline.decoding.kv_rows``)
            or None; a batch whose rows all have one encodes only what is new. Needs ``prefix``.
        states: If a list, each prompt's ``RowKV`` (prompt and reply after the prefix) is
            appended to it, in order, for the next turn's ``resume``. Needs ``prefix``.
        ban: ``ban(reply_so_far)`` lists tokens a row may not write next (``no_repeat_ngram``).
        decide: ``decide(reply_so_far, token, logits)`` may replace a chosen token (a held
            decision rate's rule, ``pipeline.decoding.decision_rate``).

    With an activated adapter (``pipeline.decoding.activation``) each row's adapter acts from its
    prompt's last assistant turn on; the shared prefix must end before every row's, and a resumed
    row may hold only context (a kept turn's reply was read with the adapter on, which the next
    turn's prompt reads with it off: ``states`` hold it, and their keeper cuts it off).
    """
    import torch

    register_gqa_attention()
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    previous = base.config._attn_implementation
    base.set_attn_implementation(GQA_ATTENTION)
    if prefix is None and (resume is not None or states is not None):
        raise ValueError("resume and states need a fixed shared prefix")
    invocation = invocation_of(model)
    starts = [activation_start(p, invocation) for p in prompts] if invocation else None
    if starts is not None and resume is not None and prefix is not None:
        for row, start in zip(resume, starts, strict=True):  # kept keys: read adapter off
            if row is not None and len(prefix.ids) + len(row.ids) > start:
                raise ValueError("a resumed row reaches past its prompt's activation start")
    replies: list[list[int]] = [[] for _ in prompts]
    try:
        with torch.no_grad():
            if prefix is None:
                shared = common_prefix(prompts)
                if starts is not None:  # the shared prefix is context: the adapter off
                    shared = min(shared, *starts)
                prefix = encode_prefix(model, list(prompts[0][:shared])) if shared else None
            elif not all(prefix.starts(p) for p in prompts):
                raise ValueError("every prompt must start with the shared prefix")
            shared = len(prefix.ids) if prefix else 0
            if starts is not None and shared > min(starts):
                raise ValueError("the shared prefix runs past a row's activation start")
            order = batch_order(prompts, keyed=resume is not None or states is not None)
            for start in range(0, len(prompts), batch_size):
                chosen = order[start : start + batch_size]
                batch = [list(prompts[i][shared:]) for i in chosen]
                out, kept = _decode_batch(
                    model,
                    batch,
                    shared,
                    prefix.cache if prefix else None,
                    max_new_tokens,
                    stop_ids,
                    pad_id,
                    choose,
                    keep_stop,
                    finished
                    if finished is None or callable(finished)
                    else [finished[i] for i in chosen],
                    [resume[i] for i in chosen] if resume is not None else None,
                    states is not None,
                    ban,
                    [starts[i] for i in chosen] if starts is not None else None,
                    decide,
                )
                for i, reply in zip(chosen, out, strict=True):
                    replies[i] = reply
                if states is not None:
                    states += kept
    finally:
        base.set_attn_implementation(previous)
    return replies


def batch_order(prompts: Sequence[Sequence[int]], keyed: bool) -> list[int]:
    """The order rows are batched in: shortest first, so a batch of left-padded rows pays for
    about its own lengths rather than for the longest prompt of a random mix (held-out decision
    cuts run 1.8k-3.7k tokens). ``keyed`` (per-row states travel with the rows): as given."""
    if keyed:
        return list(range(len(prompts)))
    return sorted(range(len(prompts)), key=lambda i: len(prompts[i]))


def encode_prefix(model: Any, ids: list[int]) -> SharedPrefix:
    """Encode the tokens every prompt starts with, once, for ``generate(prefix=...)``."""
    import torch

    device = next(model.parameters()).device
    with torch.no_grad():
        result = model(
            input_ids=torch.tensor([ids], device=device),
            use_cache=True,
            logits_to_keep=1,
            **context_kwargs(model),
        )
    return SharedPrefix(list(ids), result.past_key_values)


def _step(
    model: Any,
    ids: Any,
    mask: Any,
    positions: Any,
    cache: Any,
    starts: Sequence[int] | None = None,
) -> tuple[Any, Any]:
    """One forward pass over new tokens: the last position's logits and the grown cache.
    ``starts``: each row's activation start (absolute) for an activated adapter; None: the
    tokens follow the prompts (decoding), the adapter on."""
    activation = adapter_kwargs(model, positions, starts)
    with plain_lora(model, all_active(activation, ids.shape[1])):
        result = model(
            input_ids=ids,
            attention_mask=mask,
            position_ids=positions,
            past_key_values=cache,
            use_cache=True,
            logits_to_keep=1,
            **activation,
        )
    return result.logits[:, -1], result.past_key_values


def _decode_batch(
    model: Any,
    suffixes: list[list[int]],
    shared: int,
    prefix_cache: Any,
    max_new_tokens: int,
    stop_ids: set[int],
    pad_id: int,
    choose: Callable[[Any], Any],
    keep_stop: bool,
    finished: Finished | None,
    resume: Sequence[RowKV | None] | None = None,
    keep_states: bool = False,
    ban: Callable[[list[int]], list[int]] | None = None,
    starts: Sequence[int] | None = None,
    decide: Callable[[list[int], int, Any], int] | None = None,
) -> tuple[list[list[int]], list[RowKV]]:
    """Left-pad the suffixes after the shared prefix and decode them together; with
    ``keep_states``, also return each row's keys and values (suffix and reply) for its next turn."""
    import torch

    device = next(model.parameters()).device
    width = max(len(s) for s in suffixes)
    batch = len(suffixes)
    ids = torch.full((batch, width), pad_id, dtype=torch.long, device=device)
    mask = torch.zeros((batch, width), dtype=torch.long, device=device)
    for row, suffix in enumerate(suffixes):
        ids[row, width - len(suffix) :] = torch.tensor(suffix, device=device)
        mask[row, width - len(suffix) :] = 1
    positions = shared + (mask.cumsum(-1) - 1).clamp(min=0)
    offsets = [width - len(s) for s in suffixes]
    cache, token_prefix, encoded_from, per_row = None, None, 0, None
    if prefix_cache is not None:
        cache = suffix_cache(prefix_cache, batch, width + max_new_tokens)
        token_prefix = SHARED_PREFIX.set(
            [(layer.keys, layer.values) for layer in prefix_cache.layers]
        )
        kept_rows = list(resume) if resume is not None else [None] * batch
        reuse = [r.reusable(s) if r else 0 for r, s in zip(kept_rows, suffixes, strict=True)]
        new = [len(s) - n for s, n in zip(suffixes, reuse, strict=True)]
        if min(new) > 0 and sum(new) < RAGGED_BELOW * batch * max(new):  # each row has logits
            per_row, encoded_from = (kept_rows, reuse), width
        elif all(r is not None for r in kept_rows):
            encoded_from = preload(cache, kept_rows, reuse, offsets)
    out: list[list[int]] = [[] for _ in suffixes]
    rows = list(range(batch))  # the reply each decoding row writes to
    fed = [0] * batch  # reply tokens of each row whose keys and values are in the cache
    kept: dict[int, RowKV] = {}
    done = torch.zeros(batch, dtype=torch.bool, device=device)
    stops = torch.tensor(sorted(stop_ids), device=device)

    def keep(index: int, row: int) -> None:  # batch index -> this row's RowKV
        if keep_states and cache is not None:
            held = suffixes[row] + out[row][: fed[row]]
            kept[row] = capture(cache, index, held, offsets[row])

    try:
        if per_row is not None:
            logits = _prefill_rows(model, cache, suffixes, offsets, shared, *per_row, starts)
        for begin in range(encoded_from, width, PREFILL_CHUNK):
            end = begin + PREFILL_CHUNK
            logits, cache = _step(
                model, ids[:, begin:end], mask[:, :end], positions[:, begin:end], cache, starts
            )
        for step in range(max_new_tokens):
            if ban is not None:
                for index, row in enumerate(rows):
                    if not done[index] and (banned := ban(out[row])):
                        logits[index, banned] = float("-inf")
            token = choose(logits)
            if decide is not None:
                for index, row in enumerate(rows):
                    if not done[index]:
                        token[index] = decide(out[row], int(token[index]), logits[index])
            stopped = torch.isin(token, stops)
            for i in (~done & (~stopped | keep_stop)).nonzero().flatten().tolist():
                out[rows[i]].append(int(token[i]))
                check = finished if finished is None or callable(finished) else finished[rows[i]]
                if check is not None and check(out[rows[i]]):
                    stopped[i] = True
            done |= stopped
            if bool(done.all()):
                break
            if step == max_new_tokens - 1 and not keep_states:  # its logits would go unused
                break
            ids = token.unsqueeze(-1)
            positions = positions[:, -1:] + 1
            mask = torch.cat([mask, mask.new_ones((len(rows), 1))], -1)
            live = (~done).nonzero().flatten()
            if len(live) < COMPACT_BELOW * len(rows):
                for index in done.nonzero().flatten().tolist():
                    keep(index, rows[index])
                rows = [rows[i] for i in live.tolist()]
                ids, positions, mask, done = ids[live], positions[live], mask[live], done[live]
                keep_rows_of(cache, live)
            logits, cache = _step(model, ids, mask, positions, cache)
            for row in rows:
                fed[row] = min(fed[row] + 1, len(out[row]))  # a finished row's extra tokens: no
        for index, row in enumerate(rows):
            keep(index, row)
    finally:
        if token_prefix is not None:
            SHARED_PREFIX.reset(token_prefix)
    return out, [kept[row] for row in sorted(kept)]


def _prefill_rows(
    model: Any,
    cache: Any,
    suffixes: list[list[int]],
    offsets: list[int],
    shared: int,
    kept_rows: Sequence[RowKV | None],
    reuse: Sequence[int],
    starts: Sequence[int] | None = None,
) -> Any:
    """Encode each row's new tokens alone, after its kept ones, into its left-padded place in the
    batch's suffix cache; returns every row's last logits. No row encodes another row's length."""
    import torch

    device = next(model.parameters()).device
    width = max(len(s) for s in suffixes)
    last = []
    for row, (suffix, offset, n) in enumerate(zip(suffixes, offsets, reuse, strict=True)):
        place(cache, row, kept_rows[row], offset, n)
        view = row_view(cache, row, offset, n)
        for begin in range(n, len(suffix), PREFILL_CHUNK):
            end = min(begin + PREFILL_CHUNK, len(suffix))
            ids = torch.tensor([suffix[begin:end]], device=device)
            mask = torch.ones((1, end), dtype=torch.long, device=device)
            positions = torch.arange(shared + begin, shared + end, device=device)[None]
            begins = [starts[row]] if starts is not None else None
            logits, view = _step(model, ids, mask, positions, view, begins)
        last.append(logits)
    for layer in cache.layers:
        layer.keys, layer.values = layer._keys[:, :, :width], layer._values[:, :, :width]
    return torch.cat(last)
