"""An activated adapter's steps run on CPU: what encoding contexts in bfloat16 and decoding both
decision branches in one batch save.

    OMP_NUM_THREADS=2 python benchmarks/bench_context_store.py      # ~10 min on 2 cores

SmolLM2-135M-Instruct (fp32, activated LoRA r=16, random B so the adapter has an effect, or a saved
adapter with ``--adapter``) on AML-easy held-out decision cuts (compact styles):

- encoding: each cut's context (everything before the reply's assistant turn) into a fresh
  ``ContextStore``, by the model itself (fp32) vs by its bfloat16 copy (``peft.context_dtype``);
  then greedy replies from each store, compared token for token and by the decision they open.
- sampling: a GRPO batch of ``--cases`` cases x the two decision branches (``close_alert``,
  ``file_sar``), ``--tokens`` per reply, none stopping early, contexts already stored: one call
  per branch (before) vs every row in one call (``trainer_sampling._decode_stored`` now).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from benchmarks.results import machine, publish

TOOLS = ("close_alert", "file_sar")


def _setup(cuts: int, adapter: Path | None):
    import torch

    from pipeline.decoding.activation import activation_start, invocation_of
    from pipeline.evaluation.cuts import cut_rows
    from pipeline.training.config import load_config
    from pipeline.training.model import load_adapter_weights, load_model_and_tokenizer

    cfg = load_config("configs/cpu_steps.yaml", ["peft.activated=true"])
    model, tok = load_model_and_tokenizer(cfg.model, cfg.peft, "compact")
    if adapter is not None:
        load_adapter_weights(model, adapter)
    else:
        rng = torch.Generator().manual_seed(0)
        for name, param in model.named_parameters():
            if "lora_B" in name:  # PEFT starts B at 0: give the adapter an effect
                param.data = torch.randn(param.shape, generator=rng) * 0.01
    model.eval()
    rows = cut_rows("aml", ["easy"], cuts, "eval", "decision", "compact", "compact")
    prompts = [
        tok(
            tok.apply_chat_template(r["prompt"], add_generation_prompt=True, tokenize=False),
            add_special_tokens=False,
        )["input_ids"]
        for r in rows
    ]
    invocation = invocation_of(model)
    contexts = [p[: activation_start(p, invocation)] for p in prompts]
    return model, tok, prompts, contexts


def _timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def _fresh_store(model, dtype):
    """A new process store for ``model`` that encodes in ``dtype`` (None: the model's own)."""
    from pipeline.decoding import activation

    activation._STORES.clear()
    return activation.store_of(model, 2**34, dtype)


def encoding(model, tok, prompts, contexts, tokens: int):
    import torch

    from pipeline.decoding.activation import invocation_of, stored_rows
    from pipeline.decoding.batch_generation import generate
    from pipeline.decoding.trainer_sampling import branch_openings

    opens = branch_openings(tok, TOOLS)
    results = {}
    for label, dtype in (("fp32 (the model)", None), ("bf16 copy", torch.bfloat16)):
        store = _fresh_store(model, dtype)
        seconds, _ = _timed(lambda store=store: [store.get(model, c) for c in contexts])
        prefix, kept = stored_rows(model, prompts, invocation_of(model))
        replies = generate(
            model, prompts, tokens, {-1}, tok.pad_token_id, 16, prefix=prefix, resume=kept
        )
        results[label] = (seconds, replies)
    (fp_s, fp), (bf_s, bf) = results.values()

    def opened(reply):  # the decision a reply opens, if any
        return next((k for k, o in enumerate(opens) if reply[: len(o)] == o), None)

    same = sum(a == b for a, b in zip(fp, bf, strict=True))
    decisions = sum(opened(a) == opened(b) for a, b in zip(fp, bf, strict=True))
    return fp_s, bf_s, same, decisions


def sampling(model, tok, prompts, cases: int, tokens: int):
    from pipeline.decoding.trainer_sampling import branch_openings, generate_by_prompt

    opens = branch_openings(tok, TOOLS)
    batch = prompts[:cases]
    _fresh_store(model, None)
    for p in batch:  # contexts stored before timing, as in a run's later steps
        generate_by_prompt(model, [p], len(opens[1]) + 1, {-1}, tok.pad_token_id, openings=[[]])

    def per_branch():
        return [
            generate_by_prompt(model, batch, tokens, {-1}, tok.pad_token_id, openings=[o])
            for o in opens
        ]

    def together():
        rows = [p for p in batch for _ in opens]
        return generate_by_prompt(model, rows, tokens, {-1}, tok.pad_token_id, openings=opens)

    before, split = _timed(per_branch)
    after, joint = _timed(together)
    agree = all(joint[2 * i + k] == split[k][i] for i in range(len(batch)) for k in range(2))
    return before, after, agree


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cuts", type=int, default=16, help="held-out cuts encoded")
    parser.add_argument("--cases", type=int, default=8, help="GRPO cases per batch")
    parser.add_argument("--tokens", type=int, default=128, help="tokens per reply")
    parser.add_argument("--adapter", type=Path, default=None, help="saved LoRA adapter")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()

    model, tok, prompts, contexts = _setup(max(args.cuts, args.cases), args.adapter)
    lengths = sorted(len(c) for c in contexts[: args.cuts])
    fp_s, bf_s, same, decisions = encoding(
        model, tok, prompts[: args.cuts], contexts[: args.cuts], args.tokens
    )
    before, after, agree = sampling(model, tok, prompts, args.cases, args.tokens)
    adapter = f"`--adapter {args.adapter}`" if args.adapter else "random LoRA B (std 0.01)"
    lines = [
        "## bench_context_store: bfloat16 contexts and one sampling batch (activated, CPU)",
        "",
        f"`OMP_NUM_THREADS=2 python benchmarks/bench_context_store.py --cuts {args.cuts} "
        f"--cases {args.cases} --tokens {args.tokens}`; {machine()}. SmolLM2-135M-Instruct fp32, "
        f"activated LoRA r=16, {adapter}; AML-easy held-out decision cuts, contexts of "
        f"{lengths[0]}-{lengths[-1]} tokens.",
        "",
        "| phase | before | s | after | s | speed-up |",
        "|---|---|---|---|---|---|",
        f"| encoding {args.cuts} contexts | the fp32 model | {fp_s:.1f} | its bf16 copy | "
        f"{bf_s:.1f} | {fp_s / bf_s:.2f}x |",
        f"| sampling {args.cases} cases x 2 branches x {args.tokens} tokens | a call per branch "
        f"| {before:.1f} | one call | {after:.1f} | {before / after:.2f}x |",
        "",
        f"Greedy {args.tokens}-token replies from the bf16-encoded contexts: {same} of "
        f"{args.cuts} identical to those from fp32 ones, {decisions} of {args.cuts} opening the "
        f"same decision (or none). Sampling: one call gives the per-branch calls' greedy replies: "
        f"{agree}.",
    ]
    publish("bench_context_store", "\n".join(lines), write=not args.no_write)


if __name__ == "__main__":
    main()
