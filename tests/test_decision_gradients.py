"""benchmarks/decision_gradients.py: the first-order effects of one decision-branch update."""

from __future__ import annotations

import pytest
import torch

from benchmarks.decision_gradients import (
    case_weights,
    group_indices,
    parse_groups,
    parting_tokens,
    update_effects,
)


def test_parting_tokens_are_where_the_two_openings_part() -> None:
    assert parting_tokens([[5, 6, 7, 1], [5, 6, 9, 2, 3]]) == ([5, 6], 7, 9)


def test_case_weights_constant_and_likelihood() -> None:
    assert case_weights([0, 1], [3.0, 3.0], "constant") == [1.0, -1.0]
    clean, suspicious = case_weights([0, 1], [0.0, 0.0], "likelihood")
    assert (clean, suspicious) == pytest.approx((1.0, -1.0))  # undecided policy: as constant
    clean, suspicious = case_weights([0, 1], [2.0, 2.0], "likelihood")  # drifted toward close
    assert clean == pytest.approx(2 / (1 + torch.e**2))  # right already: weighs little
    assert suspicious == pytest.approx(-2 / (1 + torch.e**-2))  # wrong: weighs more


def test_parallel_gradients_of_unequal_length_move_the_rate_under_constant_credit() -> None:
    """Every case's gradient along one shared direction plus a small case-specific part: a
    balanced batch with equal pushes moves every held-out case's log-odds together (the rate)
    as soon as one class's gradients are a little longer; the likelihood credit, on a policy
    drifted toward closing, moves the rate back toward filing."""
    shared, reading = torch.tensor([1.0, 0.0, 0.0]), torch.tensor([0.0, 1.0, 0.0])
    grads = [10.5 * shared + reading, 10.0 * shared - reading]  # clean, suspicious
    labels = [0, 1]
    rate_grad, reading_grad = shared, reading
    even = update_effects(grads, labels, [0.0, 0.0], rate_grad, reading_grad)
    assert even["cos_clean_suspicious"] == pytest.approx(104 / (111.25 * 101) ** 0.5)
    assert even["constant_sgd"]["rate"] > 0  # toward closing: the clean gradients are longer
    assert even["constant_sgd"]["reading"] > 0
    assert even["grad_norm_clean"] > even["grad_norm_suspicious"]
    drifted = update_effects(grads, labels, [3.0, 3.0], rate_grad, reading_grad)
    assert drifted["constant_sgd"] == even["constant_sgd"]  # constant credit ignores the drift
    assert drifted["likelihood_sgd"]["rate"] < 0  # pulled back
    assert drifted["likelihood_sgd"]["reading"] > 0


def test_layer_groups_pick_the_positions_of_their_layers_weights() -> None:
    groups = parse_groups("0-1,2")
    assert groups == {"0-1": (0, 1), "2": (2, 2)}
    shapes = [
        ("base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight", 2),
        ("base_model.model.model.layers.1.mlp.up_proj.lora_B.default.weight", 3),
        ("base_model.model.model.layers.2.mlp.up_proj.lora_A.default.weight", 1),
        ("base_model.model.model.layers.12.mlp.up_proj.lora_A.default.weight", 2),
    ]
    assert group_indices(shapes, groups) == {"0-1": [0, 1, 2, 3, 4], "2": [5]}
    with pytest.raises(ValueError, match="hold no LoRA weights"):
        group_indices(shapes, parse_groups("3-5"))
    with pytest.raises(ValueError, match="first layer is after its last"):
        parse_groups("9-2")
