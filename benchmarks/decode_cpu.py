"""Decoding speed on CPU: ``model.generate``, transformers' continuous batching
(``model.generate_batch``, what TRL's ``use_transformers_continuous_batching`` calls) and
``pipeline.decoding.batch_generation.generate``.

    OMP_NUM_THREADS=2 python benchmarks/decode_cpu.py        # ~5 min on 2 cores

Two workloads of the CPU learning benchmark, on SmolLM2-135M-Instruct (fp32) with AML easy plan
prompts (compact style, ~880 tokens that share ~730):
- evaluation: greedy replies to a batch of different eval prompts;
- a GRPO group: G samples of one prompt (temperature 1).
Each is decoded a fixed number of tokens (no early stop) by transformers' ``generate`` on the
left-padded batch and by the shared-prefix decoder; continuous batching decodes the same prompts up
to the same number of tokens (it may stop a row at end of turn: its tokens per second count what
it generated). The table gives wall time and tokens per second (prefill included), and whether the
greedy outputs agree token for token with ``generate``'s.
"""

from __future__ import annotations

import argparse
import os
import time

from benchmarks.results import machine, publish


def _prompts(tokenizer, n: int) -> list[list[int]]:
    from pipeline.data.dataset import build_rows

    rows = build_rows("aml", ["easy"], n, "eval", 0, "plan", "compact")
    texts = [
        tokenizer.apply_chat_template(r["prompt"], add_generation_prompt=True, tokenize=False)
        for r in rows
    ]
    return [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]


def _with_generate(model, prompts, tokens: int, sample: bool, pad: int) -> list[list[int]]:
    import torch

    width = max(map(len, prompts))
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    with torch.no_grad():
        out = model.generate(
            input_ids=ids,
            attention_mask=mask,
            max_new_tokens=tokens,
            min_new_tokens=tokens,
            do_sample=sample,
            temperature=1.0 if sample else None,
            top_p=None,
            top_k=None,
            pad_token_id=pad,
        )
    return out[:, width:].tolist()


def _with_continuous_batching(model, prompts, tokens: int, sample: bool) -> list[list[int]]:
    """The prompts through transformers' continuous batching, replies in prompt order."""
    from transformers import GenerationConfig

    config = GenerationConfig(
        max_new_tokens=tokens, do_sample=sample, temperature=1.0 if sample else None
    )
    outputs = model.generate_batch(prompts, generation_config=config, progress_bar=False)
    ordered = sorted(outputs.values(), key=lambda o: int(str(o.request_id).rsplit("_", 1)[-1]))
    return [list(o.generated_tokens) for o in ordered]


def _continuous(fn) -> tuple[list[list[int]] | None, float | None, str]:
    """Run a continuous-batching decode; on CPU it may be unsupported: say why instead."""
    try:
        out, seconds = _timed(fn)
    except Exception as exc:  # noqa: BLE001 - recorded in the table, not hidden
        return None, None, f"failed: {type(exc).__name__}: {str(exc)[:120]}"
    return out, seconds, ""


def _timed(fn) -> tuple[list[list[int]], float]:
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=16, help="Eval prompts decoded together")
    parser.add_argument("--group", type=int, default=4, help="GRPO group size G")
    parser.add_argument("--tokens", type=int, default=64, help="Tokens decoded per reply")
    parser.add_argument("--no-results", action="store_true", help="Do not write RESULTS.md")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from pipeline.decoding.batch_generation import generate, sampling_choice
    from pipeline.training.model import smollm2_path

    path = smollm2_path()
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    prompts = _prompts(tokenizer, args.batch)
    n = args.tokens
    rows = []
    base, t_base = _timed(lambda: _with_generate(model, prompts, n, False, pad))
    fast, t_fast = _timed(lambda: generate(model, prompts, n, set(), pad, len(prompts)))
    same = sum(a == b for a, b in zip(base, fast, strict=True))
    cb, t_cb, why = _continuous(lambda: _with_continuous_batching(model, prompts, n, False))
    agree = f"{same}/{len(prompts)} replies"
    if cb is not None:
        agree += f"; CB {sum(a[: len(b)] == b for a, b in zip(base, cb, strict=True))}"
    rows.append(("eval, greedy", len(prompts), t_base, t_fast, cb, t_cb, why, agree))
    group = [prompts[0]] * args.group
    torch.manual_seed(0)
    _, g_base = _timed(lambda: _with_generate(model, group, n, True, pad))
    choose = sampling_choice(torch.Generator().manual_seed(0))
    _, g_fast = _timed(lambda: generate(model, group, n, set(), pad, len(group), choose=choose))
    gcb, g_cb, gwhy = _continuous(lambda: _with_continuous_batching(model, group, n, True))
    rows.append(("GRPO group, sampled", len(group), g_base, g_fast, gcb, g_cb, gwhy, "(sampled)"))
    lines = [
        "## decode_cpu",
        "",
        f"`python benchmarks/decode_cpu.py` on {machine()}. SmolLM2-135M-Instruct fp32, AML easy "
        f"compact plan prompts ({min(map(len, prompts))}-{max(map(len, prompts))} tokens), "
        f"{n} tokens per reply, prefill included.",
        "",
        "| workload | rows | `model.generate` | shared-prefix `generate` | speed-up | "
        "continuous batching | shared-prefix vs CB | greedy agrees |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, batch, slow, quick, cb, t_cb, why, agree in rows:
        if cb is None:
            cb_cell, versus = why, "-"
        else:
            made = sum(map(len, cb))
            cb_cell = f"{t_cb:.1f} s ({made / t_cb:.0f} tok/s)"
            versus = f"{(batch * n / quick) / (made / t_cb):.1f}x"
        lines.append(
            f"| {name} | {batch} | {slow:.1f} s ({batch * n / slow:.0f} tok/s) | "
            f"{quick:.1f} s ({batch * n / quick:.0f} tok/s) | {slow / quick:.1f}x | "
            f"{cb_cell} | {versus} | {agree} |"
        )
    text = "\n".join(lines)
    publish("decode_cpu", text, write=not args.no_results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
