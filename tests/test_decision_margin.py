"""benchmarks.decision_margin: the opening log-probabilities and the rate-free reading figures."""

from __future__ import annotations

import pytest
import torch

from benchmarks.decision_margin import auc, opening_margins, summary

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
