"""What handing freed heap pages back costs and saves: the CPU steps warm start with a trim after
every optimizer step against none (``model.release_memory_above`` 0 and 1).

Each run is a fresh process (a heap's history is the point) that trains ``--steps`` SFT steps of
the steps recipe's decision-blind warm start (``configs/cpu_steps_held.yaml``: activated LoRA,
contexts in the bfloat16 store) on ``--cases`` AML-easy train cuts, so its first steps encode
their cases and the later ones read the store, as a learning run's warm start does. After every
optimizer step it records the resident memory before the trim callback acts (``on_optimizer_step``)
and after it (``on_step_end``), with the step's wall and CPU time; the process's peak resident
memory (``VmHWM``) at its end. Runs alternate between the variants.

    OMP_NUM_THREADS=2 python benchmarks/bench_memory_trim.py                 # ~10 min
    OMP_NUM_THREADS=2 python benchmarks/bench_memory_trim.py --steps 3 --cases 8 --no-write
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.bench_train_cpu import StepTimer
from benchmarks.results import machine, publish

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = {"a trim after every step": 0.0, "no trim": 1.0}

logger = logging.getLogger("bench_memory_trim")


def status_kb(field: str) -> int:
    """A ``/proc/self/status`` field in kB (VmRSS: resident now, VmHWM: peak resident)."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field + ":"))


class StepMemory(StepTimer):
    """``StepTimer``'s wall and CPU seconds per step, with the resident memory before the trim
    callback acts (``on_optimizer_step``) and after it (``on_step_end``: the trim callback is
    listed, and so runs, before this one)."""

    def __init__(self) -> None:
        super().__init__()
        self.resident: list[tuple[int, int]] = []  # kB before and after the trim, per step
        self._before = 0

    def on_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._before = status_kb("VmRSS")

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        super().on_step_end(args, state, control, **kwargs)
        self.resident.append((self._before, status_kb("VmRSS")))

    def steps(self) -> list[dict[str, float]]:
        """One record per step: seconds and resident GB."""
        return [
            {"wall": wall, "cpu": cpu, "rss_before_gb": before / 1e6, "rss_after_gb": after / 1e6}
            for (wall, cpu), (before, after) in zip(self.times, self.resident, strict=True)
        ]


def child(above: float, args: argparse.Namespace) -> dict[str, Any]:
    """One warm start in this process with the trim threshold ``above``."""
    from pipeline.training.config import load_config
    from pipeline.training.model import load_model_and_tokenizer
    from pipeline.training.trainer import build_datasets, build_grpo_config
    from pipeline.training.warmup import sft_batch_size, sft_warmup
    from rewards import build_reward_functions

    cfg = load_config(
        ROOT / "configs/cpu_steps_held.yaml",
        [
            f"model.release_memory_above={above}",
            f"data.n_train={args.cases}",
            f"output_dir={args.output_dir}",
            "logging.plots=false",
        ],
    )
    train, _ = build_datasets(cfg)
    _, weights = build_reward_functions(cfg.rewards.weights or None)
    model, tokenizer = load_model_and_tokenizer(cfg.model, cfg.peft, cfg.data.prompt_style)
    memory = StepMemory()
    grpo_args = build_grpo_config(cfg, weights)
    sft_warmup(model, tokenizer, train, args.steps, cfg, grpo_args, callbacks=[memory])
    return {
        "steps": memory.steps(),
        "peak_gb": status_kb("VmHWM") / 1e6,
        "batch": sft_batch_size(cfg),
    }


def run(above: float, args: argparse.Namespace) -> dict[str, Any]:
    """``child`` in a fresh process, its record read back from a JSON file."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.json"
        command = [sys.executable, "-m", "benchmarks.bench_memory_trim", "--child", str(above)]
        command += ["--steps", str(args.steps), "--cases", str(args.cases)]
        command += ["--output-dir", args.output_dir, "--record", str(out)]
        subprocess.run(command, check=True, cwd=ROOT)
        return json.loads(out.read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=12, help="SFT steps per run")
    parser.add_argument("--cases", type=int, default=16, help="train cuts (2 examples each)")
    parser.add_argument("--repeats", type=int, default=1, help="alternating runs of each")
    parser.add_argument("--output-dir", default="outputs/bench_memory_trim")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--child", type=float, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--record", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    if args.child is not None:
        Path(args.record).write_text(json.dumps(child(args.child, args)))
        return 0
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label in VARIANTS}
    for repeat in range(args.repeats):
        for label, above in VARIANTS.items():
            runs[label].append(run(above, args))
            logger.info("repeat %d, %s: peak %.2f GB", repeat, label, runs[label][-1]["peak_gb"])
    publish("bench_memory_trim", "\n".join(report(args, runs)), write=not args.no_write)
    return 0


def report(args: argparse.Namespace, runs: dict[str, list[dict[str, Any]]]) -> list[str]:
    """The section: per variant, resident memory at the steps' ends and peak, and step times
    (the first epoch's steps encode their cases, the rest read the store)."""
    batch = next(r["batch"] for records in runs.values() for r in records)
    per_epoch = max(1, args.cases * 2 // batch)
    lines = [
        "## bench_memory_trim: handing freed heap pages back after each CPU training step",
        "",
        f"`OMP_NUM_THREADS=2 python benchmarks/bench_memory_trim.py --steps {args.steps} "
        f"--cases {args.cases} --repeats {args.repeats}`; {machine()}. The decision-blind SFT "
        f"warm start of `configs/cpu_steps_held.yaml` on {args.cases} AML-easy train cuts "
        f"({batch} examples a step: steps 1-{per_epoch} encode their cases, the rest "
        "read the store), one fresh process per run, runs alternating. Resident memory in GB "
        "after each step's optimizer update (before a trim) and at its end (after one); medians "
        "over steps and runs.",
        "",
        "| variant | runs | resident after the update, GB | resident at the step's end, GB "
        "| last step's end, GB | peak resident, GB | step that encodes, s (wall / CPU) "
        "| step reading the store, s (wall / CPU) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    medians: dict[str, float] = {}
    for label, records in runs.items():
        steps = [s for r in records for s in r["steps"]]
        encoding = [s for r in records for s in r["steps"][:per_epoch]]
        stored = [s for r in records for s in r["steps"][per_epoch:]]
        medians[label] = statistics.median(s["wall"] for s in stored) if stored else float("nan")
        lines.append(
            f"| {label} | {len(records)} | {_median(steps, 'rss_before_gb'):.2f} "
            f"| {_median(steps, 'rss_after_gb'):.2f} "
            f"| {statistics.median(r['steps'][-1]['rss_after_gb'] for r in records):.2f} "
            f"| {statistics.median(r['peak_gb'] for r in records):.2f} "
            f"| {_times(encoding)} | {_times(stored)} |"
        )
    trim, plain = (medians[label] for label in VARIANTS)
    lines += ["", f"A stored step with a trim after it takes {trim / plain:.2f}x the time without."]
    return lines


def _median(steps: list[dict[str, float]], key: str) -> float:
    return statistics.median(s[key] for s in steps)


def _times(steps: list[dict[str, float]]) -> str:
    if not steps:
        return "-"
    return f"{_median(steps, 'wall'):.1f} / {_median(steps, 'cpu'):.1f}"


if __name__ == "__main__":
    raise SystemExit(main())
