"""pipeline.decoding.trainer_sampling: a GRPO batch of several groups is sampled group by group."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from pipeline.decoding.batch_generation import generate, sampling_choice
from pipeline.decoding.trainer_sampling import branch_openings, generate_by_prompt
from rewards.protocol import render_call

from conftest import smollm2_tokenizer, tiny_model

ROOT = Path(__file__).resolve().parents[1]


def test_each_group_is_sampled_against_its_own_prompt_encoded_once() -> None:
    model, _ = tiny_model()
    model.eval()
    rng = torch.Generator().manual_seed(0)
    shared = torch.randint(5, 1000, (12,), generator=rng).tolist()
    first = shared + torch.randint(5, 1000, (20,), generator=rng).tolist()
    second = shared + torch.randint(5, 1000, (25,), generator=rng).tolist()
    batch = [first, second, first, second, first, second]  # two groups of G=3, interleaved
    columns: list[int] = []
    handle = model.register_forward_pre_hook(
        lambda _m, _a, kwargs: columns.append(kwargs["input_ids"].shape[1]), with_kwargs=True
    )
    try:
        out = generate_by_prompt(
            model, batch, 6, {-1}, 0, choose=sampling_choice(torch.Generator().manual_seed(5))
        )
    finally:
        handle.remove()
    # Each group: its prompt but the last token once, then 1 + 5 steps of one column each.
    assert columns == [31, 1, 1, 1, 1, 1, 1, 36, 1, 1, 1, 1, 1, 1]
    alone = sampling_choice(torch.Generator().manual_seed(5))
    expected_first = generate(model, [first] * 3, 6, {-1}, 0, batch_size=3, choose=alone)
    assert [out[0], out[2], out[4]] == expected_first
    greedy = generate_by_prompt(model, batch, 6, {-1}, 0)
    assert greedy == [generate(model, [p], 6, {-1}, 0)[0] for p in batch]


def test_a_branch_opening_is_what_the_model_writes_for_the_whole_call() -> None:
    tokenizer = smollm2_tokenizer()
    openings = branch_openings(tokenizer, {"file_sar", "close_alert"})
    calls = [
        render_call("close_alert", {"reason": "Salary from a known employer (TX-1)."}),
        render_call(
            "file_sar", {"findings": "x", "typology": "structuring", "entities_involved": []}
        ),
    ]
    for opening, call, name in zip(openings, calls, ["close_alert", "file_sar"], strict=True):
        whole = tokenizer.encode(call, add_special_tokens=False)
        assert whole[: len(opening)] == opening
        assert tokenizer.decode(opening) == f'<tool_call>{{"name": "{name}'


def test_decision_branches_split_each_group_and_finish_on_the_whole_completion() -> None:
    model, _ = tiny_model()
    model.eval()
    rng = torch.Generator().manual_seed(1)
    first = torch.randint(5, 1000, (20,), generator=rng).tolist()
    second = torch.randint(5, 1000, (17,), generator=rng).tolist()
    batch = [first] * 4 + [second] * 4  # two groups of G=4, as TRL lays them out
    openings = [[7, 8], [9]]
    seen: list[list[int]] = []

    def finished(completion: list[int]) -> bool:
        seen.append(completion)
        return completion[0] == 9 and len(completion) >= 3  # the [9] branch stops early

    choose = sampling_choice(torch.Generator().manual_seed(3))
    out = generate_by_prompt(
        model, batch, 6, {-1}, 0, choose=choose, openings=openings, finished=finished
    )
    for row, completion in enumerate(out):
        opening = openings[row % 2]
        assert completion[: len(opening)] == opening
        assert len(completion) == (6 if opening == [7, 8] else 3)
    assert all(c[:1] in ([7], [9]) for c in seen)
    with pytest.raises(ValueError, match="completion budget"):
        generate_by_prompt(model, batch, 2, {-1}, 0, openings=openings)


@pytest.mark.slow
@pytest.mark.parametrize("credit", ["total", "decision", "decision_tokens", "decision_likelihood"])
def test_a_branched_steps_run_gives_every_group_both_decisions(tmp_path: Path, credit: str) -> None:
    from pipeline.training.config import load_config
    from pipeline.training.trainer import build_trainer

    cfg = load_config(
        ROOT / "configs/cpu_steps.yaml",
        [
            "model.backend=tiny",
            "data.n_train=4",
            "data.decision_branches=true",
            f"rewards.branch_credit={credit}",
            "rewards.weights.decision=2.0",
            "training.num_generations=4",
            "training.per_device_train_batch_size=8",
            "training.max_completion_length=24",
            "training.max_steps=1",
            "training.save_steps=100",
            "logging.log_completions=false",
            f"output_dir={tmp_path}",
        ],
    )
    bundle = build_trainer(cfg)
    seen: list[list[str]] = []
    first = bundle.trainer.reward_funcs[0]

    def recorded(prompts, completions, **kwargs):
        seen.append([c[-1]["content"] if isinstance(c, list) else c for c in completions])
        return first(prompts, completions, **kwargs)

    recorded.__name__ = first.__name__
    bundle.trainer.reward_funcs[0] = recorded
    bundle.trainer.train()
    assert len(seen) == 1 and len(seen[0]) == 8  # two groups of 4
    names = [text.split('"name": "')[1][:8] for text in seen[0]]
    assert names == ["close_al", "file_sar"] * 4
