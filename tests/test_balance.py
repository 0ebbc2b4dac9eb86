"""Balanced prompt order: clean and suspicious episodes alternate, GRPO trains in that order."""

from __future__ import annotations

import pytest

import env
from pipeline.data.balance import balanced, outcome
from pipeline.data.dataset import build_rows
from pipeline.training.config import load_config
from pipeline.training.trainer import build_datasets, build_grpo_config


def _rows(n: int = 16) -> list[dict]:
    return build_rows(
        "aml", ["easy"], n, "train", 0, "steps", "compact", "decision", 0.0, "compact"
    )


def _outcomes(rows: list[dict]) -> list[bool]:
    aml = env.make("aml")
    return [outcome(aml, r) for r in rows]


def test_every_pair_holds_both_outcomes_and_every_row_is_used():
    rows = _rows()
    flags = _outcomes(rows)
    assert 0 < sum(flags) < len(flags)  # the sample holds both outcomes, unevenly
    order = balanced(rows, seed=0)
    got = _outcomes(order)
    assert len(order) == 2 * max(sum(flags), len(flags) - sum(flags))
    assert all(got[k] != got[k + 1] for k in range(0, len(got), 2))
    assert {r["seed"] for r in order} == {r["seed"] for r in rows}


def test_order_is_seeded():
    rows = _rows()
    seeds = lambda order: [r["seed"] for r in order]  # noqa: E731
    assert seeds(balanced(rows, 0)) == seeds(balanced(rows, 0))
    assert seeds(balanced(rows, 0)) != seeds(balanced(rows, 1))


def test_one_outcome_only_is_a_clear_error():
    rows = _rows()
    suspicious = [r for r, clean in zip(rows, _outcomes(rows), strict=True) if not clean]
    with pytest.raises(ValueError, match="both clean and suspicious"):
        balanced(suspicious, 0)


def test_training_keeps_the_balanced_order():
    overrides = ["data.n_train=12", "model.backend=tiny", "logging.report_to=none"]
    cfg = load_config("configs/cpu_steps.yaml", [*overrides, "data.balance=true"])
    train, _ = build_datasets(cfg)
    got = _outcomes(train.to_list())
    assert all(got[k] != got[k + 1] for k in range(0, len(got), 2))
    assert build_grpo_config(cfg, [1.0] * 5).shuffle_dataset is False
    plain = load_config("configs/cpu_steps.yaml", overrides)
    assert build_grpo_config(plain, [1.0] * 5).shuffle_dataset is True
