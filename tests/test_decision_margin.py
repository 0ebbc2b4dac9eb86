"""benchmarks.decision_margin: the opening log-probabilities and the rate-free reading figures."""

from __future__ import annotations

import json

import pytest
import torch

from benchmarks import decision_margin
from benchmarks.decision_margin import auc, opening_margins, paired_auc_difference, summary

from conftest import tiny_model


def test_opening_scores_equal_a_full_forward_of_prompt_and_opening() -> None:
    model, _ = tiny_model()
    model.eval()
    rng = torch.Generator().manual_seed(0)
    prompts = [torch.randint(5, 1000, (n,), generator=rng).tolist() for n in (9, 14)]
    openings = [[11, 12, 13], [40]]
    scores = opening_margins(model, prompts, openings)
    for prompt, row in zip(prompts, scores, strict=True):
        for opening, score in zip(openings, row, strict=True):
            ids = torch.tensor([prompt + opening])
            with torch.no_grad():
                logp = model(input_ids=ids).logits[0].float().log_softmax(-1)
            start = len(prompt) - 1
            full = sum(float(logp[start + i, t]) for i, t in enumerate(opening))
            assert score == pytest.approx(full, abs=1e-4)


def test_auc_reads_the_ordering_not_the_rate() -> None:
    assert auc([3.0, 2.5], [2.0, 1.0]) == 1.0
    assert auc([1.0], [1.0]) == 0.5
    assert auc([0.0, 2.0], [1.0, 3.0]) == 0.25
    shifted = summary([5.0, 4.0, 3.0, 2.0, 1.5, 1.0], [0, 0, 0, 1, 1, 1])
    assert shifted["auc"] == 1.0 and shifted["auc_low"] == 1.0
    assert shifted["accuracy_at_0"] == 0.5  # closes everything: the rate is wrong
    assert shifted["accuracy_best_threshold"] == 1.0  # the reading is perfect
    assert shifted["mean_margin_clean"] == 4.0 and shifted["mean_margin_suspicious"] == 1.5


def test_paired_auc_difference_reads_one_stage_against_another_on_the_same_cuts() -> None:
    verdicts = [0] * 10 + [1] * 10
    reading = [float(10 - i) for i in range(20)]  # every clean cut above every suspicious one
    blind = [float(i % 2) for i in range(20)]  # the same margins whatever the verdict
    same = paired_auc_difference(reading, reading, verdicts)
    assert same == {"auc_difference": 0.0, "low": 0.0, "high": 0.0}
    gain = paired_auc_difference(reading, blind, verdicts)
    assert gain["auc_difference"] == 0.5
    assert 0.0 < gain["low"] <= gain["auc_difference"] <= gain["high"] <= 1.0
    assert paired_auc_difference(blind, reading, verdicts)["auc_difference"] == -0.5


def test_saved_stages_are_paired_only_with_the_same_cuts(tmp_path, capsys) -> None:
    verdicts = decision_margin_verdicts(6)
    stages = {
        "untrained": {"auc": 0.5, "margins": [0.0] * 6},
        "warm": {"auc": 0.5, "margins": [1.0, -1.0, 1.0, -1.0, 1.0, -1.0]},
    }
    saved = tmp_path / "margins.json"
    saved.write_text(json.dumps({"episodes": 6, "stages": stages, "verdicts": verdicts}))
    out = tmp_path / "again.json"
    args = ["--episodes", "6", "--saved", str(saved), "--compare", "warm:untrained"]
    assert decision_margin.main([*args, "--output", str(out)]) == 0  # nothing left to score
    again = json.loads(out.read_text())
    assert again["stages"] == stages
    expected = paired_auc_difference(stages["warm"]["margins"], [0.0] * 6, verdicts)
    assert again["comparisons"] == {"warm-untrained": expected}
    with pytest.raises(SystemExit, match="scored other cuts"):
        decision_margin.main(["--episodes", "5", "--saved", str(saved)])
    with pytest.raises(SystemExit, match="--compare"):
        decision_margin.main([*args[:4], "--compare", "warm:grpo"])


def decision_margin_verdicts(episodes: int) -> list[int]:
    from benchmarks.probe_decision import decision_rows

    return [r["verdict"] for r in decision_rows(episodes, "eval")]
