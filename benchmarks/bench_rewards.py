"""Reward and dataset throughput: the CPU cost a GRPO step pays outside the model.

    python benchmarks/bench_rewards.py [--env aml] [--completions 1024] [--rows 10000]

1. All reward components over 1,024 distinct completions of up to 16 calls (honest plans,
   plans with extra calls, truncated plans, random-policy plans), from a cold replay cache, so
   every completion is parsed and replayed once and the other components reuse that replay.
   Target: <= 2 s on one core.
2. The same in steps mode: 1,024 replies at cut points of reference trajectories (the rest of the
   reference, its terminal call alone, a random call before the rest, half the rest), each scored by
   replaying its row's prefix and then the reply. Target: <= 2 s on one core.
3. ``build_dataset`` of 10,000 prompt rows (reset + render per row). Target: <= 20 s.

Pinned to one core where the OS allows it. Writes the RESULTS.md section "bench_rewards".

``--fresh-model K`` instead samples G=4 completions for K eval prompts from the untrained CPU
default model (SmolLM2-135M-Instruct) and reports how often a group's rewards are all equal (no
GRPO signal); RESULTS.md section "bench_rewards_fresh". Slow on CPU (minutes per prompt).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time

from benchmarks.results import machine, write_section
from env.registry import env_class, make, policies
from env.rollout import play, replay
from env.seeds import split_seeds
from pipeline.data.dataset import build_dataset
from rewards import build_reward_functions
from rewards.parsing import parse_tool_calls
from rewards.protocol import render_completion
from rewards.replay import CACHE

MAX_CALLS = 16


def make_completions(env_name: str, n: int, rng: random.Random) -> list[dict]:
    """``n`` distinct rows {env, task, seed, completion} of up to ``MAX_CALLS`` calls."""
    tasks = list(env_class(env_name).tasks)
    env, factories = make(env_name), policies(env_name)
    n_seeds = max(1, n // 4)
    plans = {}
    for i, seed in enumerate(split_seeds("eval", n_seeds)):
        task = tasks[i % len(tasks)]
        honest = play(env, factories["heuristic"](seed), task, seed).plan
        noisy = play(env, factories["random"](seed), task, seed).plan
        plans[seed] = (task, honest, noisy)
    rows = []
    for i in range(n):
        seed = split_seeds("eval", n_seeds)[i % n_seeds]
        task, honest, noisy = plans[seed]
        variant = i // n_seeds
        if variant == 0:
            calls = honest
        elif variant == 1:
            calls = rng.sample(noisy, min(len(noisy), 4)) + honest
        elif variant == 2:
            calls = honest[: max(1, len(honest) // 2)]
        else:
            calls = noisy
        rows.append(
            {
                "env": env_name,
                "task": task,
                "seed": seed,
                "completion": render_completion(calls[-MAX_CALLS:]),
            }
        )
    return rows


def make_step_replies(env_name: str, n: int, rng: random.Random) -> list[dict]:
    """``n`` distinct steps rows {env, task, seed, prefix, completion}: four replies per cut."""
    from pipeline.data.dataset import build_rows
    from pipeline.data.steps import reference

    env, rows = make(env_name), []
    cuts = build_rows(env_name, None, max(1, n // 16), "eval", mode="steps", cuts="all")
    for row in cuts:
        ref = reference(env, row["task"], row["seed"])
        rest = ref.rest(row["cut"])
        noisy = play(env, policies(env_name)["random"](row["seed"]), row["task"], row["seed"]).plan
        for calls in (
            rest,
            rest[-1:],
            rng.sample(noisy, min(1, len(noisy))) + rest,
            rest[: max(1, len(rest) // 2)],
        ):
            rows.append(
                {
                    **{k: row[k] for k in ("env", "task", "seed", "prefix")},
                    "completion": render_completion(calls),
                }
            )
    rng.shuffle(rows)
    return rows[:n]


def bench_step_rewards(rows: list[dict]) -> dict[str, float]:
    """All components over steps rows from a cold cache (prefix replayed for each reply)."""
    funcs, _ = build_reward_functions({"os_mechanics": 1.0})
    kwargs = {key: [row[key] for row in rows] for key in ("env", "task", "seed", "prefix")}
    completions = [row["completion"] for row in rows]
    CACHE.clear()
    start = time.perf_counter()
    for fn in funcs:
        fn([None] * len(rows), completions, **kwargs)
    prefix_calls = [row["prefix"].count('"tool"') for row in rows]
    return {
        "completions": len(rows),
        "mean_prefix": sum(prefix_calls) / len(prefix_calls),
        "replays": CACHE.replays,
        "components": len(funcs),
        "all_components_s": time.perf_counter() - start,
    }


def bench_rewards(rows: list[dict]) -> dict[str, float]:
    funcs, _ = build_reward_functions({"os_mechanics": 1.0})
    kwargs = {key: [row[key] for row in rows] for key in ("env", "task", "seed")}
    completions = [row["completion"] for row in rows]
    prompts = [None] * len(rows)
    start = time.perf_counter()
    for text in completions:
        parse_tool_calls(text)
    parse_s = time.perf_counter() - start
    env_name = rows[0]["env"]
    env, plans = make(env_name), [parse_tool_calls(text).calls for text in completions]
    start = time.perf_counter()
    for row, plan in zip(rows, plans, strict=True):
        replay(env, row["task"], row["seed"], plan)
    replay_s = time.perf_counter() - start
    CACHE.clear()
    start = time.perf_counter()
    for fn in funcs:
        fn(prompts, completions, **kwargs)
    total_s = time.perf_counter() - start
    calls = [len(parse_tool_calls(text).calls) for text in completions]
    return {
        "completions": len(rows),
        "mean_calls": sum(calls) / len(calls),
        "max_calls": max(calls),
        "replays": CACHE.replays,
        "parse_s": parse_s,
        "replay_s": replay_s,
        "components": len(funcs),
        "all_components_s": total_s,
    }


def bench_dataset(env_name: str, n_rows: int) -> dict[str, float]:
    start = time.perf_counter()
    ds = build_dataset(env_name, n=n_rows, split="train")
    return {"rows": len(ds), "build_s": time.perf_counter() - start}


def fresh_model_signal(env_name: str, k: int, group: int = 4, max_new_tokens: int = 256) -> str:
    """Score an untrained model's sampled groups: does a fresh model get any GRPO signal?"""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from pipeline.training.model import smollm2_path
    from rewards.score import score_batch

    torch.manual_seed(0)
    torch.set_num_threads(1)  # a shared machine: one core, like the rest of this benchmark
    path = smollm2_path()
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    rows = []
    for row in build_dataset(env_name, n=k, split="eval"):
        inputs = tokenizer.apply_chat_template(
            row["prompt"], add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
        with torch.no_grad():
            out = model.generate(
                **inputs,
                do_sample=True,
                temperature=1.0,
                max_new_tokens=max_new_tokens,
                num_return_sequences=group,
                pad_token_id=tokenizer.pad_token_id,
            )
        for seq in out:
            text = tokenizer.decode(seq[inputs["input_ids"].shape[1] :], skip_special_tokens=True)
            rows.append({**{c: row[c] for c in ("env", "task", "seed")}, "completion": text})
    scored = score_batch(rows)
    groups = [scored[i : i + group] for i in range(0, len(scored), group)]
    flat = sum(len({r["total"] for r in g}) == 1 for g in groups)
    with_calls = sum(r["n_calls"] > 0 for r in scored)
    attempts = sum(r["rewards"]["format"] > 0 for r in scored)
    return (
        f"`python benchmarks/bench_rewards.py --env {env_name} --fresh-model {k}` on {machine()}: "
        f"SmolLM2-135M-Instruct, untrained, plan-mode prompts, G={group}, "
        f"{max_new_tokens} new tokens, temperature 1.0.\n\n"
        f"| completions | with >= 1 parsed call | format > 0 | groups | all-equal groups |\n"
        f"|---|---|---|---|---|\n"
        f"| {len(scored)} | {with_calls} | {attempts} | {len(groups)} | {flat} |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="aml")
    parser.add_argument("--completions", type=int, default=1024)
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    parser.add_argument("--fresh-model", type=int, default=0, metavar="K", help="see docstring")
    args = parser.parse_args(argv)
    if args.fresh_model:
        body = fresh_model_signal(args.env, args.fresh_model)
        print(body)
        if not args.no_write:
            write_section("bench_rewards_fresh", body)
        return 0
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})

    rows = make_completions(args.env, args.completions, random.Random(0))
    rewards = bench_rewards(rows)
    steps = bench_step_rewards(make_step_replies(args.env, args.completions, random.Random(0)))
    dataset = bench_dataset(args.env, args.rows)
    ok_s = steps["all_components_s"] <= 2.0
    ok_r = rewards["all_components_s"] <= 2.0
    ok_d = dataset["build_s"] <= 20.0
    body = "\n".join(
        [
            f"`python benchmarks/bench_rewards.py --env {args.env}` on {machine()}, one core.",
            "",
            "| measure | value | target |",
            "|---|---|---|",
            f"| all {rewards['components']} reward components, {rewards['completions']} completions "
            f"(mean {rewards['mean_calls']:.1f}, max {rewards['max_calls']} calls), cold cache "
            f"| {rewards['all_components_s']:.2f} s ({rewards['replays']} replays) "
            f"| <= 2 s {'ok' if ok_r else 'MISSED'} |",
            f"| steps mode: all {steps['components']} components, {steps['completions']} replies "
            "at cut points "
            f"(prefix mean {steps['mean_prefix']:.1f} calls), cold cache "
            f"| {steps['all_components_s']:.2f} s ({steps['replays']} replays) "
            f"| <= 2 s {'ok' if ok_s else 'MISSED'} |",
            f"| parsing only, same completions | {rewards['parse_s'] * 1000:.0f} ms | - |",
            f"| env replays only (reset + steps + report), same plans "
            f"| {rewards['replay_s']:.2f} s | - |",
            f"| build_dataset, {dataset['rows']} rows | {dataset['build_s']:.2f} s "
            f"| <= 20 s {'ok' if ok_d else 'MISSED'} |",
        ]
    )
    print(body)
    if not args.no_write:
        write_section("bench_rewards", body)
    return 0 if ok_r and ok_d and ok_s else 1


if __name__ == "__main__":
    sys.exit(main())
