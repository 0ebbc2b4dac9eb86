"""Steps mode on CPU, phase by phase: what encoding each case once saves in GRPO's sampling, in its
loss and in the held-out cut evaluation.

    OMP_NUM_THREADS=2 python benchmarks/bench_steps_phases.py      # ~10 min on 2 cores

SmolLM2-135M-Instruct (fp32, LoRA r=16) on AML-easy decision-cut prompts (compact styles, ~1.8k-3.7k
tokens that share only the ~680-token system message). Each phase is timed both ways on the same
inputs, nothing stopping early, so both ways do the same number of tokens:

- sampling: a GRPO batch of ``--prompts`` prompts x G samples, ``--tokens`` each. Decoded as one
  batch (the rows share only the system message: every row encodes its whole case, padded to the
  longest) vs ``generate_by_prompt`` (each prompt encoded once for its G rows).
- loss: the fixed-context log-probs + backward of those groups, each prompt encoded again vs read
  from the sampling's encoding (``trainer_sampling.sampled_prefix``).
- evaluation: greedy replies to ``--cuts`` held-out cuts in batches of 8, in seed order vs
  shortest first (``batch_generation.batch_order``); replies must agree.
"""

from __future__ import annotations

import argparse
import time

from benchmarks.results import machine, publish


def _setup(cuts: int):
    import torch

    from pipeline.evaluation.cuts import cut_rows
    from pipeline.training.config import load_config
    from pipeline.training.model import load_model_and_tokenizer

    cfg = load_config("configs/cpu_steps.yaml")
    model, tok = load_model_and_tokenizer(cfg.model, cfg.peft, "compact")
    rng = torch.Generator().manual_seed(0)
    for name, param in model.named_parameters():
        if "lora_B" in name:  # PEFT starts B at 0: give the adapter an effect
            param.data = torch.randn(param.shape, generator=rng) * 0.01
    rows = cut_rows("aml", ["easy"], cuts, "eval", "decision", "compact", "compact")
    texts = [
        tok.apply_chat_template(r["prompt"], add_generation_prompt=True, tokenize=False)
        for r in rows
    ]
    return model, tok, [tok(t, add_special_tokens=False)["input_ids"] for t in texts]


def _timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def sampling(model, prompts, group: int, tokens: int) -> list[tuple[str, float]]:
    import torch

    from pipeline.decoding.batch_generation import generate, sampling_choice
    from pipeline.decoding.trainer_sampling import generate_by_prompt

    batch = [p for p in prompts for _ in range(group)]
    choose = sampling_choice(torch.Generator().manual_seed(1))
    joint, _ = _timed(
        lambda: generate(model, batch, tokens, {-1}, 0, batch_size=len(batch), choose=choose)
    )
    grouped, _ = _timed(lambda: generate_by_prompt(model, batch, tokens, {-1}, 0, choose=choose))
    return [("one batch of every row", joint), ("each prompt once (generate_by_prompt)", grouped)]


def loss(model, prompts, group: int, tokens: int) -> list[tuple[str, float]]:
    import torch

    from pipeline.decoding.batch_generation import encode_prefix
    from pipeline.training.context_grad import context_logits

    model.train()
    rng = torch.Generator().manual_seed(2)
    replies = torch.randint(5, 1000, (group, tokens), generator=rng)
    mask = torch.ones_like(replies)
    encoded = {tuple(p): encode_prefix(model, p[:-1]).cache for p in prompts}

    def step(reuse: bool) -> None:
        model.zero_grad()
        for p in prompts:
            cache = encoded[tuple(p)] if reuse else None
            logits = context_logits(model, tuple(p), replies, mask, encoded=cache)
            logits.log_softmax(-1).gather(-1, replies[..., None]).sum().backward()

    again, _ = _timed(lambda: step(False))
    reused, _ = _timed(lambda: step(True))
    model.eval()
    return [("prompt encoded again", again), ("prompt read from the sampling", reused)]


def evaluation(model, prompts, tokens: int) -> tuple[list[tuple[str, float]], bool]:
    from pipeline.decoding.batch_generation import common_prefix, encode_prefix, generate

    prefix = encode_prefix(model, prompts[0][: common_prefix(prompts)])

    def seed_order():  # each batch of 8 as it comes (one batch per call: nothing to sort)
        out = []
        for start in range(0, len(prompts), 8):
            chunk = prompts[start : start + 8]
            out += generate(model, chunk, tokens, {-1}, 0, batch_size=8, prefix=prefix)
        return out

    ordered, first = _timed(seed_order)
    by_length, second = _timed(
        lambda: generate(model, prompts, tokens, {-1}, 0, batch_size=8, prefix=prefix)
    )
    return [("seed order", ordered), ("shortest first", by_length)], first == second


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompts", type=int, default=2, help="GRPO prompts per batch")
    parser.add_argument("--group", type=int, default=4, help="samples per prompt (G)")
    parser.add_argument("--tokens", type=int, default=64, help="tokens per reply")
    parser.add_argument("--cuts", type=int, default=16, help="held-out cuts evaluated")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()

    model, _, prompts = _setup(max(args.cuts, args.prompts))
    model.eval()
    lengths = sorted(len(p) for p in prompts)
    train = prompts[: args.prompts]
    phases = {
        f"sampling ({args.prompts} prompts x G={args.group})": sampling(
            model, train, args.group, args.tokens
        ),
        f"loss ({args.prompts} groups of {args.group})": loss(
            model, train, args.group, args.tokens
        ),
    }
    timings, agree = evaluation(model, prompts[: args.cuts], args.tokens)
    phases[f"evaluation ({args.cuts} cuts, batches of 8)"] = timings
    lines = [
        "## bench_steps_phases: encoding each case once (steps mode, CPU)",
        "",
        f"`OMP_NUM_THREADS=2 python benchmarks/bench_steps_phases.py --prompts {args.prompts} "
        f"--group {args.group} --tokens {args.tokens} --cuts {args.cuts}`; {machine()}.",
        f"SmolLM2-135M-Instruct fp32, LoRA r=16; AML-easy decision-cut prompts of {lengths[0]}-"
        f"{lengths[-1]} tokens; {args.tokens} tokens per reply, none stopping early.",
        "",
        "| phase | before | s | after | s | speed-up |",
        "|---|---|---|---|---|---|",
    ]
    for phase, ((old, old_s), (new, new_s)) in phases.items():
        lines.append(
            f"| {phase} | {old} | {old_s:.1f} | {new} | {new_s:.1f} | {old_s / new_s:.2f}x |"
        )
    lines += ["", f"Greedy evaluation replies identical in both orders: {agree}."]
    publish("bench_steps_phases", "\n".join(lines), write=not args.no_write)


if __name__ == "__main__":
    main()
