"""Build a GRPO prompt dataset from seeded episodes and save it (optionally push it to the Hub).

    python scripts/build_dataset.py --env aml --tasks easy,medium,hard --n 500 --split train \
        --out data/aml_train [--mode plan|interactive] [--push-to-hub USER/NAME]

Rows: prompt [system, user], env, task, seed, split. ``--env`` takes a comma list to mix
environments (interleaved, ``--n`` rows each). Train and eval seeds never overlap.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time

from pipeline.data.dataset import build_dataset

logger = logging.getLogger("build_dataset")


def _split_list(text: str | None) -> list[str] | None:
    if text is None or text.strip() in ("", "all"):
        return None
    return [part.strip() for part in text.split(",") if part.strip()]


def push(dataset, repo: str) -> None:
    """Push to the Hub, or raise SystemExit with a message that says what is missing."""
    if os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes"):
        raise SystemExit(
            f"cannot push to {repo}: HF_HUB_OFFLINE is set (the dataset was saved locally; "
            "unset it and rerun with --push-to-hub)"
        )
    from huggingface_hub import get_token

    if not get_token():
        raise SystemExit(
            f"cannot push to {repo}: no Hugging Face token (set HF_TOKEN or run "
            "`huggingface-cli login`); the dataset was saved locally"
        )
    try:
        dataset.push_to_hub(repo)
    except Exception as exc:  # network, permissions: say so, keep the local copy
        raise SystemExit(f"push to {repo} failed: {type(exc).__name__}: {exc}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="aml", help="environment name(s), comma separated")
    parser.add_argument("--tasks", default=None, help="comma list of tasks, or all (default)")
    parser.add_argument("--n", type=int, default=100, help="rows per environment")
    parser.add_argument("--split", default="train", choices=["train", "eval", "test"])
    parser.add_argument("--seed-offset", type=int, default=0, help="start within the split")
    parser.add_argument("--mode", default="plan", choices=["plan", "interactive"])
    parser.add_argument("--out", required=True, help="folder for Dataset.save_to_disk")
    parser.add_argument("--push-to-hub", default=None, metavar="REPO", help="also push here")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    start = time.perf_counter()
    dataset = build_dataset(
        _split_list(args.env) or ["aml"],
        tasks=_split_list(args.tasks),
        n=args.n,
        split=args.split,
        seed_offset=args.seed_offset,
        mode=args.mode,
    )
    dataset.save_to_disk(args.out)
    logger.info(
        "%d rows (%s, %s, mode %s) saved to %s in %.1f s",
        len(dataset),
        args.env,
        args.split,
        args.mode,
        args.out,
        time.perf_counter() - start,
    )
    if args.push_to_hub:
        push(dataset, args.push_to_hub)
        logger.info("pushed to https://huggingface.co/datasets/%s", args.push_to_hub)
    return 0


if __name__ == "__main__":
    sys.exit(main())
