"""The GRPO loss of one steps-mode group on CPU: TRL's full forward and backward against the fixed
context of ``model.context_grad: false`` (pipeline/training/context_grad.py).

    OMP_NUM_THREADS=2 python benchmarks/bench_context_grad.py      # ~10 min on 2 cores

SmolLM2-135M-Instruct (fp32, LoRA r=16 with a non-zero B so the adapter matters), one AML-easy
decision-cut prompt (compact styles) and G sampled-length replies: the reference's own reply,
token-wise, cut to ``--reply-tokens``. For each path: wall time of log-probs + backward, peak RSS
growth, and the cosine between its gradient and the full one (the figure the trade-off rests on).
"""

from __future__ import annotations

import argparse
import resource
import time

from benchmarks.results import machine, publish


def _setup(reply_tokens: int, group: int, seed: int):
    import torch

    from pipeline.evaluation.cuts import cut_rows, scripted_replies
    from pipeline.training.config import load_config
    from pipeline.training.model import load_model_and_tokenizer

    cfg = load_config("configs/cpu_steps.yaml")
    model, tok = load_model_and_tokenizer(cfg.model, cfg.peft, "compact")
    rng = torch.Generator().manual_seed(seed)
    for name, param in model.named_parameters():
        if "lora_B" in name:
            param.data = torch.randn(param.shape, generator=rng) * 0.01
    model.train()
    row = cut_rows("aml", ["easy"], 1)[0]
    text = tok.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=False)
    prompt = tok(text, add_special_tokens=False)["input_ids"]
    reply = tok(scripted_replies([row], "reference")[0], add_special_tokens=False)["input_ids"]
    reply = (reply * (1 + reply_tokens // max(len(reply), 1)))[:reply_tokens]
    replies = torch.tensor([reply] * group)
    mask = torch.ones_like(replies)
    for g in range(group):  # replies of different lengths, as a sampled group has
        mask[g, reply_tokens - g * reply_tokens // (2 * group) :] = 0
    return model, prompt, replies, mask


def _run(model, prompt, replies, mask, fixed: bool):
    import torch

    from pipeline.training.context_grad import context_logits

    model.zero_grad()
    start = time.perf_counter()
    if fixed:
        logits = context_logits(model, tuple(prompt), replies, mask)
    else:
        ids = torch.cat([torch.tensor(prompt).expand(len(replies), -1), replies], 1)
        full = torch.cat([torch.ones(len(replies), len(prompt), dtype=torch.long), mask], 1)
        out = model(input_ids=ids, attention_mask=full, use_cache=False)
        logits = out.logits[:, len(prompt) - 1 : -1]
    logps = logits.log_softmax(-1).gather(-1, replies[..., None])[..., 0]
    (logps * mask).sum().backward()
    seconds = time.perf_counter() - start
    grad = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
    return seconds, grad


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--group", type=int, default=8, help="replies per prompt (G)")
    parser.add_argument("--reply-tokens", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    import torch

    model, prompt, replies, mask = _setup(args.reply_tokens, args.group, args.seed)
    rows, grads = [], {}
    for name, fixed in (("fixed context", True), ("full (TRL)", False)):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        seconds, grads[name] = _run(model, prompt, replies, mask, fixed)
        grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 2**20
        rows.append((name, seconds, grown))
    cosine = torch.nn.functional.cosine_similarity(
        grads["fixed context"], grads["full (TRL)"], dim=0
    ).item()
    full_s = rows[1][1]
    lines = [
        "## bench_context_grad: one steps-mode GRPO group's log-probs + backward",
        "",
        f"`OMP_NUM_THREADS=2 python benchmarks/bench_context_grad.py --group {args.group} "
        f"--reply-tokens {args.reply_tokens}`; {machine()}.",
        f"SmolLM2-135M-Instruct fp32, LoRA r=16; one AML-easy decision-cut prompt of "
        f"{len(prompt)} tokens; {args.group} replies of up to {args.reply_tokens} tokens.",
        "",
        "| path | seconds | speed-up | peak RSS growth (GB) |",
        "|---|---|---|---|",
        *(f"| {n} | {s:.1f} | {full_s / s:.1f}x | {g:.2f} |" for n, s, g in rows),
        "",
        f"Cosine between the fixed-context and the full gradient: {cosine:.3f}. The fixed "
        "context leaves out how the adapter changes the prompt's own encoding.",
    ]
    publish("bench_context_grad", "\n".join(lines), write=not args.no_write)


if __name__ == "__main__":
    main()
