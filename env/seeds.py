"""Seed splits: train and evaluation episodes never share a seed.

Train seeds count up from 0; eval seeds from 10**9; test seeds from 2 * 10**9. A split of any size
below 10**9 stays inside its own range, so no run can leak evaluation worlds into training.
"""

from __future__ import annotations

SPLIT_BASES: dict[str, int] = {"train": 0, "eval": 1_000_000_000, "test": 2_000_000_000}
SPLIT_SIZE = 1_000_000_000


def split_seeds(split: str, n: int, offset: int = 0) -> list[int]:
    """``n`` seeds of ``split`` starting at ``offset`` within that split."""
    if split not in SPLIT_BASES:
        raise ValueError(f"unknown split {split!r}; choose from {', '.join(SPLIT_BASES)}")
    if n < 0 or offset < 0 or offset + n > SPLIT_SIZE:
        raise ValueError(f"seeds {offset}..{offset + n} fall outside the {split} range")
    base = SPLIT_BASES[split]
    return list(range(base + offset, base + offset + n))


def split_of(seed: int) -> str:
    """The split a seed belongs to."""
    for split, base in SPLIT_BASES.items():
        if base <= seed < base + SPLIT_SIZE:
            return split
    raise ValueError(f"seed {seed} belongs to no split")
