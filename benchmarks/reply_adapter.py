"""Diagnostic: can reward-driven updates of an adapter that acts only on the reply learn the decision?

The steps learning runs (benchmarks/RESULTS.md, learning_cpu) give SmolLM2-135M ~24 GRPO steps on
2 cores, and its LoRA drifts to one decision; yet a linear probe of the untrained model's middle
layer reads the verdict of 92 of 100 held-out decision cuts (probe_decision), and the cases'
gradients share one direction (cos 0.98, decision_gradients). Two things limit a CPU run: every
step re-encodes 2-4k-token prompts (most of its time), and the few updates it affords go to the
rate before the reading.

This script tests a design that attacks both, before any pipeline change: an *activated* LoRA (the
aLoRA of PEFT, arXiv 2504.12397) that acts only from the assistant turn on. The context is then
read by the base model alone, so its KV cache is the same for the whole run: each decision-cut
prompt is encoded once (cached on disk), and an update costs a forward and backward of the few
reply tokens up to where ``file_sar`` and ``close_alert`` part. On that policy it runs GRPO on the
decision: per train case a group of ``--group`` decisions sampled from the policy, each rewarded
with the episode grade of the prefix + the reference's rest of the case for that decision (the
environment's own grading; ``blind_decision`` references fill the other fields), advantages
normalised within the group, loss ``-A log pi(decision)``. No label enters except through that
reward. Variants:

- ``adam``: the plain GRPO update, Adam.
- ``adam_neutral``: the same, with the batch's update made orthogonal to the gradient of the
  batch's mean log-odds (the rate) before Adam: what is left can only move cases apart.
- ``adam_locked``: the rate's gradient projected out of Adam's actual step instead (Adam's
  per-weight scaling turns an orthogonal gradient into a step that still moves the rate).
- ``adam_neutral_rate``: ``adam_neutral`` for the adapter (the reading), and the rate learned
  apart: one scalar added to every case's log-odds, moved by plain SGD (``--rate-lr``) along the
  same GRPO loss's gradient.
- ``adam_rate_held``: ``adam_neutral_rate``, and after each update the scalar also takes back
  what the adapter's step moved the batch's mean log-odds by (measured, not first-order), so the
  rate moves by its own GRPO gradient only.

``--n-val`` holds the last train cuts out as a validation split: at each checkpoint the policy's
likelier decision on them is graded by the environment (the reward, no label), and the checkpoint
with the best validation grade is reported against ``always_file`` on the held-out cuts (which
choose nothing), beside the last one. ``--render`` publishes saved runs (several: one line each,
then each in full).

``--warm-steps`` first trains on both decisions of every case equally, as the pipeline's
decision-blind warm start does: it pulls each case's log-odds toward even, teaching no decision.

Reported per variant: held-out decision accuracy (sign of the log-odds) and AUC along the run, the
train cases' accuracy, seconds. Floors beside it: ``always_file``, the untrained policy.

    OMP_NUM_THREADS=2 python benchmarks/reply_adapter.py --n-train 96 --n-val 32 --n-eval 100 \\
        --cache-dir /tmp/reply_kv --steps 96 --eval-every 8 --variants adam_rate_held --seed 0
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import random
import sys
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

logger = logging.getLogger("reply_adapter")
INVOCATION = "<|im_start|>assistant\n"
VARIANTS = ("adam", "adam_neutral", "adam_locked", "adam_neutral_rate", "adam_rate_held")
NEUTRAL = ("adam_neutral", "adam_neutral_rate", "adam_rate_held")  # the rate projected out
RATE_LEARNED = ("adam_neutral_rate", "adam_rate_held")  # a scalar rate of their own
SUMMARY = ("step", "seconds", "accuracy", "auc", "file_share", "rate", "val_grade")  # printed


def split_invocation(ids: list[int], invocation: list[int]) -> tuple[list[int], list[int]]:
    """``ids`` cut before its last occurrence of ``invocation``: (context, invocation onward)."""
    k = len(invocation)
    for start in range(len(ids) - k, -1, -1):
        if ids[start : start + k] == invocation:
            return ids[:start], ids[start:]
    raise ValueError("the prompt holds no assistant turn to activate the adapter at")


def encode_context(model: Any, context: list[int]) -> list[tuple[Any, Any]]:
    """The base model's KV cache of ``context`` (adapter off), per layer, stored in bfloat16."""
    import torch

    adapter_off = model.disable_adapter() if hasattr(model, "disable_adapter") else nullcontext()
    with torch.no_grad(), adapter_off:
        out = model(input_ids=torch.tensor([context]), use_cache=True)
    cache = out.past_key_values
    return [(layer.keys.bfloat16(), layer.values.bfloat16()) for layer in cache.layers]


def tail_margin(model: Any, cache: list[tuple[Any, Any]], tail: list[int], close: int, file: int):
    """``d = logit(close) - logit(file)`` after context + ``tail``, the adapter on the tail only."""
    import torch
    from transformers import DynamicCache

    past = DynamicCache(ddp_cache_data=[(k.float(), v.float()) for k, v in cache])
    logits = model(
        input_ids=torch.tensor([tail]), past_key_values=past, use_cache=True, logits_to_keep=1
    ).logits
    return logits[0, -1, close].float() - logits[0, -1, file].float()


def group_advantages(rewards: list[float]) -> list[float]:
    """GRPO's advantages within one group: reward minus the group mean, over the group's std."""
    mean = sum(rewards) / len(rewards)
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / max(1, len(rewards) - 1))
    return [(r - mean) / (std + 1e-4) for r in rewards]


def project_out(grads: list[Any], direction: list[Any]) -> list[Any]:
    """``grads`` less their component along ``direction`` (both lists of per-parameter tensors)."""
    dot = sum(float((g * d).sum()) for g, d in zip(grads, direction, strict=True))
    norm = sum(float((d * d).sum()) for d in direction)
    if norm == 0.0:
        return grads
    return [g - (dot / norm) * d for g, d in zip(grads, direction, strict=True)]


def branch_rewards(rows: list[dict[str, Any]]) -> list[dict[str, float]]:
    """Per row, the episode grade of its prefix + the rest of the case for each decision."""
    import env as registry
    from env.rollout import replay
    from pipeline.data.steps import reference

    aml, out = registry.make("aml"), []
    for row in rows:
        grades = {}
        for side in ("blind_decision", "blind_decision_flipped"):
            rest = reference(aml, row["task"], row["seed"], policy=side).rest(row["cut"])
            decision = rest[-1].get("tool") or rest[-1].get("name")
            calls = json.loads(row["prefix"]) + rest
            grades[decision] = replay(aml, row["task"], row["seed"], calls).grade.total
        out.append(grades)
    return out


def cached_contexts(
    model: Any, tok: Any, invocation: list[int], rows: list[dict], split: str, cache_dir: Path
) -> tuple[list[Any], list[list[int]], float]:
    """Each row's base-model context cache (loaded from ``cache_dir`` when there) and tail ids."""
    import torch

    from benchmarks.probe_decision import prompt_texts

    caches, tails, spent = [], [], 0.0
    cache_dir.mkdir(parents=True, exist_ok=True)
    for i, (row, text) in enumerate(zip(rows, prompt_texts(tok, rows), strict=True)):
        context, tail = split_invocation(
            tok(text, add_special_tokens=False)["input_ids"], invocation
        )
        path = cache_dir / f"{split}-{row['seed']}-{len(context)}.pt"
        if path.exists():
            cache = torch.load(path)
        else:
            started = time.perf_counter()
            cache = encode_context(model, context)
            spent += time.perf_counter() - started
            torch.save(cache, path)
        caches.append(cache)
        tails.append(tail)
        if (i + 1) % 20 == 0:
            logger.info("%s: %d/%d contexts (%.0f s encoding)", split, i + 1, len(rows), spent)
    return caches, tails, spent


def margins(
    model: Any, caches: list[Any], tails: list[list[int]], close: int, file: int, rate: float = 0.0
) -> list[float]:
    """Each case's log-odds of closing, plus the learned ``rate`` scalar, if any."""
    import torch

    with torch.no_grad():
        return [
            float(tail_margin(model, c, t, close, file)) + rate
            for c, t in zip(caches, tails, strict=True)
        ]


def chosen_grade(d: list[float], grades: list[dict[str, float]]) -> float:
    """Mean episode grade of the policy's likelier decision (d > 0: close) over the cases."""
    picks = [g["close_alert" if x > 0 else "file_sar"] for x, g in zip(d, grades, strict=True)]
    return sum(picks) / len(picks)


def scores(d: list[float], verdicts: list[int]) -> dict[str, float]:
    """Accuracy of the policy's likelier decision (d > 0: close) and the AUC of ``d``: P(a clean
    case's log-odds of closing exceed a suspicious case's), ties half."""
    from benchmarks.decision_gradients import by_class
    from benchmarks.decision_margin import auc

    right = [int((x > 0) == (not y)) for x, y in zip(d, verdicts, strict=True)]
    return {
        "accuracy": sum(right) / len(right),
        "file_share": sum(x <= 0 for x in d) / len(d),
        "auc": auc(*by_class(d, verdicts)),
        "right": right,
    }


def _batches(n_cases: int, size: int, rng: random.Random):
    """Endless batches of case indices, each epoch a fresh seeded shuffle."""
    order: list[int] = []
    while True:
        batch = []
        for _ in range(size):
            if not order:
                order = list(range(n_cases))
                rng.shuffle(order)
            batch.append(order.pop())
        yield batch


def grpo_losses(
    model: Any, data: dict[str, Any], batch: list[int], group: int, gen: Any, bias: Any = 0.0
):
    """The batch's GRPO loss on the decision (a sampled group per case, rewarded by the env's
    grade) and its mean log-odds (the rate), both differentiable; ``bias`` is added to every
    case's log-odds (the learned rate of ``adam_neutral_rate`` and ``adam_rate_held``)."""
    import torch
    from torch.nn.functional import logsigmoid

    caches, tails = data["train"]
    loss, rate = torch.zeros(()), torch.zeros(())
    for i in batch:
        d = tail_margin(model, caches[i], tails[i], data["close"], data["file"]) + bias
        draws = (torch.rand(group, generator=gen) < torch.sigmoid(d.detach())).tolist()
        grades = data["rewards"][i]
        rewards = [grades["close_alert" if c else "file_sar"] for c in draws]
        for c, a in zip(draws, group_advantages(rewards), strict=True):
            loss = loss - a * (logsigmoid(d) if c else logsigmoid(-d)) / (len(batch) * group)
        rate = rate + d / len(batch)
    return loss, rate


def blind_loss(model: Any, data: dict[str, Any], batch: list[int]):
    """The decision-blind warm start's loss: both decisions of every case, equally (as the
    pipeline's steps warm start teaches them): it moves each case's log-odds toward 0."""
    from torch.nn.functional import logsigmoid

    caches, tails = data["train"]
    total = 0.0
    for i in batch:
        d = tail_margin(model, caches[i], tails[i], data["close"], data["file"])
        total = total - (logsigmoid(d) + logsigmoid(-d)) / (2 * len(batch))
    return total


def train_variant(variant: str, base: Any, data: dict[str, Any], args: argparse.Namespace):
    """One GRPO run on the decision from a fresh adapter; held-out scores along the way.

    The ``NEUTRAL`` variants project the rate's gradient out of the batch's gradient before the
    optimizer; ``adam_locked`` projects it out of the optimizer's actual step (Adam's per-weight
    scaling turns an orthogonal gradient into a step that still moves the rate);
    ``adam_neutral_rate`` and ``adam_rate_held`` also learn a scalar rate by SGD, the latter
    taking back the adapter's measured move of the batch's rate. With ``data["val"]``, each
    checkpoint also holds the validation grade and AUC."""
    import torch
    from peft import LoraConfig, get_peft_model

    from pipeline.training.config import LORA_TARGETS

    torch.manual_seed(args.seed)
    lora = LoraConfig(  # PEFT's activated LoRA: on from the assistant turn, so the cache holds
        r=16,
        lora_alpha=32,
        target_modules=list(LORA_TARGETS),
        alora_invocation_tokens=data["invocation"],
        task_type="CAUSAL_LM",
    )
    model = get_peft_model(base, lora)
    params = [p for n, p in model.named_parameters() if "lora_" in n]
    optim = torch.optim.Adam(params, lr=args.lr)
    close, file = data["close"], data["file"]
    rng, gen = random.Random(args.seed), torch.Generator().manual_seed(args.seed)
    bias = torch.zeros((), requires_grad=variant in RATE_LEARNED)
    batches = _batches(len(data["train"][0]), args.batch, rng)
    curve, started = [], time.perf_counter()

    def checkpoint(step: int) -> None:
        rate = float(bias.detach())
        held_d = margins(model, *data["eval"], close, file, rate)
        held = scores(held_d, data["eval_verdicts"])
        point = {"step": step, "seconds": round(time.perf_counter() - started, 1), "rate": rate}
        point["margins"] = [round(x, 3) for x in held_d]
        if "val" in data:
            d = margins(model, *data["val"], close, file, rate)
            point["val_grade"] = chosen_grade(d, data["val_rewards"])
            point["val_margins"] = [round(x, 3) for x in d]
            point["val_auc"] = scores(d, data["val_verdicts"])["auc"]
        curve.append(point | held)
        logger.info(
            "%s step %d: held-out acc %.3f auc %.3f file share %.2f rate %+.2f val grade %s",
            variant,
            step,
            held["accuracy"],
            held["auc"],
            held["file_share"],
            rate,
            f"{point['val_grade']:.4f}" if "val" in data else "-",
        )

    if args.warm_steps:
        warm = torch.optim.Adam(params, lr=args.lr)
        for _ in range(args.warm_steps):
            blind_loss(model, data, next(batches)).backward()
            warm.step()
            warm.zero_grad(set_to_none=True)
    checkpoint(0)
    for step in range(1, args.steps + 1):
        batch = next(batches)
        loss, rate = grpo_losses(model, data, batch, args.group, gen, bias)
        learned = [*params, bias] if bias.requires_grad else params
        grads = list(torch.autograd.grad(loss, learned, retain_graph=variant != "adam"))
        if bias.requires_grad:
            moved = -args.rate_lr * float(grads.pop())
            target = float(rate.detach()) + moved  # the batch's mean log-odds, own step only
            with torch.no_grad():
                bias += moved
        rate_grad = list(torch.autograd.grad(rate, params)) if variant != "adam" else []
        if variant in NEUTRAL:
            grads = project_out(grads, rate_grad)
        before = [p.detach().clone() for p in params] if variant == "adam_locked" else []
        for p, g in zip(params, grads, strict=True):
            p.grad = g
        optim.step()
        optim.zero_grad(set_to_none=True)
        if before:
            steps = project_out(
                [p.detach() - b for p, b in zip(params, before, strict=True)], rate_grad
            )
            with torch.no_grad():
                for p, b, u in zip(params, before, steps, strict=True):
                    p.copy_(b + u)
        if variant == "adam_rate_held":
            caches, tails = data["train"]
            after = margins(
                model, [caches[i] for i in batch], [tails[i] for i in batch], close, file
            )
            with torch.no_grad():
                bias.fill_(target - sum(after) / len(after))
        if step % args.eval_every == 0 or step == args.steps:
            checkpoint(step)
    train_d = margins(model, *data["train"], close, file, float(bias.detach()))
    train = scores(train_d, data["train_verdicts"])
    base = model.unload()  # the base weights back, untouched, for the next variant
    return {"curve": curve, "train": {k: v for k, v in train.items() if k != "right"}}, base


def run(args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks.decision_gradients import parting_tokens
    from benchmarks.probe_decision import decision_rows, untrained_backend
    from pipeline.decoding.trainer_sampling import branch_openings

    backend = untrained_backend()
    tok, base = backend.tokenizer, backend.model
    prefix, close, file = parting_tokens(branch_openings(tok, ["close_alert", "file_sar"]))
    seen = decision_rows(args.n_train + args.n_val, "train")
    train, val = seen[: args.n_train], seen[args.n_train :]
    held = decision_rows(args.n_eval, "eval")
    invocation = tok(INVOCATION, add_special_tokens=False)["input_ids"]
    data: dict[str, Any] = {"close": close, "file": file, "invocation": invocation}
    spent = 0.0
    splits = (("train", train, "train"), ("val", val, "train"), ("eval", held, "eval"))
    for split, rows, seeds_of in splits:  # the validation cuts are train seeds' contexts
        if not rows:
            continue
        caches, tails, seconds = cached_contexts(
            base, tok, invocation, rows, seeds_of, args.cache_dir
        )
        data[split] = (caches, [t + prefix for t in tails])
        data[f"{split}_verdicts"] = [r["verdict"] for r in rows]
        spent += seconds
    data["rewards"] = branch_rewards(train)
    if val:
        data["val_rewards"] = branch_rewards(val)
    wrong_first = sum(
        g["file_sar" if r["verdict"] else "close_alert"]
        <= g["close_alert" if r["verdict"] else "file_sar"]
        for g, r in zip(data["rewards"], train, strict=True)
    )
    verdicts = data["eval_verdicts"]
    result: dict[str, Any] = {
        "encoding_s": round(spent, 1),
        "rewards_not_favouring_the_verdict": wrong_first,
        "always_file": sum(verdicts) / len(verdicts),
        "n_train": len(train),
        "n_val": len(val),
        "eval_verdicts": verdicts,
        "variants": {},
    }
    for variant in args.variants.split(","):
        if variant not in VARIANTS:
            raise ValueError(f"unknown variant {variant!r}; choose from {VARIANTS}")
        result["variants"][variant], base = train_variant(variant, base, data, args)
        last = result["variants"][variant]["curve"][-1]
        print(json.dumps({variant: {k: v for k, v in last.items() if k in SUMMARY}}))
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-train", type=int, default=64)
    parser.add_argument("--n-val", type=int, default=0, help="train-seed cuts held for selection")
    parser.add_argument("--n-eval", type=int, default=100)
    parser.add_argument("--cache-dir", type=Path, default=Path("/tmp/reply_kv"))
    parser.add_argument("--steps", type=int, default=48, help="GRPO updates per variant")
    parser.add_argument("--batch", type=int, default=8, help="train cases per update")
    parser.add_argument("--group", type=int, default=4, help="sampled decisions per case")
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument(
        "--rate-lr", type=float, default=1.0, help="the rate scalar's SGD step size"
    )
    parser.add_argument("--eval-every", type=int, default=8)
    parser.add_argument(
        "--warm-steps", type=int, default=0, help="decision-blind updates first (both decisions)"
    )
    parser.add_argument("--variants", default="adam,adam_neutral")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, help="JSON of every figure")
    parser.add_argument(
        "--render", type=Path, nargs="+", help="publish saved --output JSONs, run nothing"
    )
    parser.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    from benchmarks.reply_adapter_report import markdown_runs
    from benchmarks.results import machine, publish

    if args.render:
        results = [json.loads(path.read_text()) for path in args.render]
    else:
        result = run(args)
        result["command"] = "python benchmarks/reply_adapter.py " + " ".join(argv or sys.argv[1:])
        result["measured"], result["seed"] = machine(), args.seed
        if args.output:
            args.output.write_text(json.dumps(result, indent=1))
        results = [result]
    publish("reply_adapter", markdown_runs(results), write=not args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
