"""benchmarks/reply_adapter.py: an adapter active from the assistant turn on, over a cached context."""

from __future__ import annotations

import pytest
import torch

from benchmarks.reply_adapter import (
    VARIANTS,
    encode_context,
    group_advantages,
    project_out,
    scores,
    split_invocation,
    tail_margin,
)

INVOCATION = [7, 8]


def test_split_invocation_cuts_before_the_last_assistant_turn() -> None:
    ids = [1, 7, 8, 3, 4, 7, 8, 9]
    assert split_invocation(ids, INVOCATION) == ([1, 7, 8, 3, 4], [7, 8, 9])
    with pytest.raises(ValueError, match="no assistant turn"):
        split_invocation([1, 2, 3], INVOCATION)


def test_group_advantages_are_zero_when_the_group_agrees_and_signed_when_it_parts() -> None:
    assert group_advantages([0.3, 0.3, 0.3]) == [0.0, 0.0, 0.0]
    right, wrong, also_right = group_advantages([0.9, 0.2, 0.9])
    assert right == also_right > 0 > wrong
    assert right + wrong + also_right == pytest.approx(0.0, abs=1e-6)


def test_project_out_leaves_nothing_along_the_direction() -> None:
    grads = [torch.tensor([3.0, 1.0]), torch.tensor([2.0])]
    direction = [torch.tensor([1.0, 0.0]), torch.tensor([1.0])]
    out = project_out(grads, direction)
    assert sum(float((g * d).sum()) for g, d in zip(out, direction, strict=True)) == 0.0
    assert torch.allclose(out[0], torch.tensor([0.5, 1.0]))
    assert project_out(grads, [torch.zeros(2), torch.zeros(1)]) == grads


def test_scores_count_decisions_by_the_log_odds_sign_and_ordered_pairs_ties_half() -> None:
    """``d`` is the log-odds of closing: a suspicious case (verdict 1) is read right below 0."""
    assert scores([-0.9, -0.8, -0.1], [1, 1, 0])["auc"] == 1.0
    assert scores([-0.1, -0.9], [1, 0])["auc"] == 0.0
    assert scores([-0.5, -0.5], [1, 0])["auc"] == 0.5
    right = scores([-0.9, 0.3, 0.2, -0.4], [1, 1, 0, 0])
    assert right["right"] == [1, 0, 1, 0]
    assert right["accuracy"] == 0.5 and right["file_share"] == 0.5


def _tiny_llama() -> torch.nn.Module:
    """A 2-layer Llama with random weights (seeded): vocabulary 32, grouped-query attention."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=32,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
    )
    return LlamaForCausalLM(config).eval()


def _tiny_alora_model():
    from peft import LoraConfig, get_peft_model

    lora = LoraConfig(
        r=4,
        lora_alpha=8,
        target_modules=["q_proj", "v_proj", "down_proj"],
        alora_invocation_tokens=INVOCATION,
        task_type="CAUSAL_LM",
    )
    model = get_peft_model(_tiny_llama(), lora).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)  # a trained adapter: it changes what the tail computes
    return model


def test_the_cached_context_path_is_peft_activated_lora() -> None:
    """The base model's context cache + the adapter on the tail gives PEFT's own aLoRA forward
    of the whole prompt: the cache never depends on the adapter, so one encoding serves a run."""
    model = _tiny_alora_model()
    ids = [1, 2, 3, 4, 5, 6, 9, 10, 11, 7, 8, 12, 13]
    close, file = 20, 21
    context, tail = split_invocation(ids, INVOCATION)
    cache = encode_context(model, context)
    with torch.no_grad():
        cached = float(tail_margin(model, cache, tail, close, file))
        logits = model(input_ids=torch.tensor([ids])).logits[0, -1]
        with model.disable_adapter():
            base = model(input_ids=torch.tensor([ids])).logits[0, -1]
    assert cached == pytest.approx(float(logits[close] - logits[file]), abs=0.02)  # bf16 cache
    assert float((logits - base).abs().max()) > 0.1  # the adapter did act on the tail


def _synthetic_cases(n: int, seed: int) -> tuple[list[list[int]], list[int]]:
    """Prompts whose one telling token (3: a clean case, 4: a suspicious one) sits among noise."""
    import random

    rng = random.Random(seed)
    prompts, verdicts = [], []
    for _ in range(n):
        verdict = rng.random() < 0.5
        noise = [rng.randrange(10, 30) for _ in range(6)]
        prompts.append([1, *noise[:3], 4 if verdict else 3, *noise[3:], *INVOCATION, 9])
        verdicts.append(int(verdict))
    return prompts, verdicts


def _toy_data(base: torch.nn.Module, n: int) -> dict:
    """Train and held-out synthetic cases (``n`` each), their contexts cached by ``base``."""
    data: dict = {"close": 20, "file": 21, "invocation": INVOCATION}
    for split, seed in (("train", 1), ("eval", 2)):
        prompts, verdicts = _synthetic_cases(n, seed)
        parts = [split_invocation(p, INVOCATION) for p in prompts]
        data[split] = ([encode_context(base, c) for c, _ in parts], [t for _, t in parts])
        data[f"{split}_verdicts"] = verdicts
    return data


def _toy_args(lr: float, steps: int):
    import argparse

    return argparse.Namespace(
        seed=0, lr=lr, rate_lr=1.0, batch=8, group=4, steps=steps, eval_every=steps, warm_steps=0
    )


@pytest.mark.parametrize("variant", VARIANTS)
def test_grpo_on_the_decision_learns_to_read_the_context_from_reward_alone(variant: str) -> None:
    """Rewards that favour the decision the telling token calls for, and nothing else: the
    adapter, active from the assistant turn only, learns to read the cached context (the order
    of its log-odds, AUC; where it sets its threshold is the rate, which this toy leaves off:
    accuracy is not asserted); the base model handed back is the one it was given."""
    from benchmarks.reply_adapter import train_variant

    base = _tiny_llama()
    weights = {k: v.clone() for k, v in base.state_dict().items()}
    data = _toy_data(base, 24)
    data["rewards"] = [
        {"file_sar": 0.9 if v else 0.1, "close_alert": 0.1 if v else 0.9}
        for v in data["train_verdicts"]
    ]
    result, handed_back = train_variant(variant, base, data, _toy_args(lr=1e-2, steps=60))
    first, last = result["curve"][0], result["curve"][-1]
    assert first["step"] == 0 and last["step"] == 60
    assert last["auc"] > max(0.8, first["auc"] + 0.3)
    assert result["train"]["auc"] > 0.8
    assert all(torch.equal(weights[k], v) for k, v in handed_back.state_dict().items())


def test_chosen_grade_grades_the_likelier_decision_and_selection_takes_the_best_earliest() -> None:
    from benchmarks.reply_adapter import chosen_grade
    from benchmarks.reply_adapter_report import selected

    grades = [{"file_sar": 0.9, "close_alert": 0.1}, {"file_sar": 0.2, "close_alert": 0.8}]
    assert chosen_grade([-1.0, 0.5], grades) == pytest.approx(0.85)  # both right
    assert chosen_grade([-1.0, -0.5], grades) == pytest.approx(0.55)  # files both
    curve = [{"step": s, "val_grade": g} for s, g in ((0, 0.5), (8, 0.7), (16, 0.7), (24, 0.6))]
    assert selected(curve)["step"] == 8


@pytest.mark.parametrize("variant", ["adam_neutral_rate", "adam_rate_held"])
def test_the_rate_variants_learn_their_scalar_when_the_adapter_cannot_help(variant: str) -> None:
    """Rewards that favour closing every case, whatever its context: the learned rate alone
    carries the policy to closing (the adapter's share of the rate is projected out)."""
    from benchmarks.reply_adapter import train_variant

    base = _tiny_llama()
    data = _toy_data(base, 16)
    data["rewards"] = [{"file_sar": 0.2, "close_alert": 0.8}] * 16
    result, _ = train_variant(variant, base, data, _toy_args(lr=1e-3, steps=30))
    last = result["curve"][-1]
    assert last["rate"] > 0.5 and last["file_share"] < 0.2


def _saved_run(command: str, right_last: list[int]) -> dict:
    """A saved result of one variant: two checkpoints on four held-out cuts, the first chosen
    on validation."""
    verdicts = [1, 1, 0, 0]
    curve = [
        {"step": 0, "seconds": 1.0, "accuracy": 0.5, "auc": 0.5, "file_share": 1.0},
        {"step": 8, "seconds": 2.0, "accuracy": sum(right_last) / 4, "auc": 0.9, "file_share": 0.5},
    ]
    curve[0] |= {"right": [1, 1, 0, 0], "val_grade": 0.8, "val_auc": 0.7}
    curve[1] |= {"right": right_last, "val_grade": 0.6, "val_auc": 0.6}
    return {
        "command": command,
        "n_train": 8,
        "n_val": 4,
        "encoding_s": 0.0,
        "rewards_not_favouring_the_verdict": 0,
        "eval_verdicts": verdicts,
        "measured": "a test",
        "variants": {"adam_rate_held": {"curve": curve, "train": {"accuracy": 1.0, "auc": 1.0}}},
    }


def test_saved_runs_render_one_summary_line_each_with_their_seed_and_chosen_checkpoint() -> None:
    from benchmarks.reply_adapter_report import markdown_runs

    runs = [
        _saved_run("python benchmarks/reply_adapter.py --seed 3", [1, 1, 1, 1]),
        _saved_run("python benchmarks/reply_adapter.py", [1, 1, 0, 0]),
    ]
    text = markdown_runs(runs)
    assert text.count("## reply_adapter") == 1 and "### Run 1" in text and "### Run 2" in text
    summary = [line for line in text.splitlines() if line.startswith("| 1 |")][0]
    # run 1: seed 3 from its command; last checkpoint 1.0 (always_file 0.5: +0.5); the one its
    # validation grade chose is step 0, which reads like always_file (+0.0)
    assert summary.startswith("| 1 | adam_rate_held | 3 | 8 | 1.000 | 0.500")
    assert "| 0 | 0.500 | 0.000" in summary
    assert [line for line in text.splitlines() if line.startswith("| 2 |")][0].startswith(
        "| 2 | adam_rate_held | 0 | 8 | 0.500 | 0.000"
    )
    assert markdown_runs(runs[:1]).count("### Run") == 0
