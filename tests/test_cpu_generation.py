"""pipeline.decoding.trainer_sampling: TRL's GRPOTrainer samples CPU groups through the shared-prefix decoder."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from pipeline.decoding.trainer_sampling import (
    decision_reached,
    end_decided,
    fast_sampling_applies,
    terminal_tools,
)
from pipeline.training.config import load_config
from pipeline.training.trainer import build_trainer

ROOT = Path(__file__).resolve().parents[1]


def _trainer_like(**changes: object) -> SimpleNamespace:
    fields = dict(
        use_vllm=False,
        _is_vlm=False,
        min_p=None,
        repetition_penalty=1.0,
        args=SimpleNamespace(generation_kwargs=None),
    )
    return SimpleNamespace(**{**fields, **changes})


def test_fast_sampling_only_where_it_samples_what_generate_would() -> None:
    assert fast_sampling_applies(_trainer_like(), {}, None)
    assert not fast_sampling_applies(_trainer_like(use_vllm=True), {}, None)
    assert not fast_sampling_applies(_trainer_like(repetition_penalty=1.1), {}, None)
    assert not fast_sampling_applies(_trainer_like(min_p=0.05), {}, None)
    assert not fast_sampling_applies(
        _trainer_like(args=SimpleNamespace(generation_kwargs={"no_repeat_ngram_size": 3})), {}, None
    )
    assert not fast_sampling_applies(_trainer_like(), {"pixel_values": [1]}, None)


def test_cpu_trainer_samples_a_group_once_per_prompt_and_ends_with_end_of_turn(tmp_path) -> None:
    cfg = load_config(
        ROOT / "configs/cpu.yaml",
        [
            "model.backend=tiny",
            "data.envs=[support]",
            "data.n_train=4",
            "training.num_generations=2",
            "training.per_device_train_batch_size=2",
            "training.max_completion_length=12",
            "logging.log_completions=false",
            f"output_dir={tmp_path}",
        ],
    )
    trainer = build_trainer(cfg).trainer
    assert type(trainer).__name__ == "SharedPrefixGRPOTrainer"
    prompt = trainer._tokenizer("Case SUP-1: refund?", add_special_tokens=False)["input_ids"]
    first, logprobs = trainer._generate_single_turn([prompt, prompt], None, {}, 2)
    again, _ = trainer._generate_single_turn([prompt, prompt], None, {}, 2)
    assert logprobs is None and len(first) == 2
    for completion in first + again:
        assert 0 < len(completion) <= 12
        ends = [i for i, t in enumerate(completion) if t in trainer.eos_token_ids]
        assert ends in ([], [len(completion) - 1])  # only a last token may end the turn
    assert first != again  # one seeded generator goes on: a new group, new samples


def _smollm2_tokenizer():
    from transformers import AutoTokenizer

    from pipeline.training.model import resolve_name

    return AutoTokenizer.from_pretrained(resolve_name("smollm2"))


def test_terminal_tools_are_the_decisions_of_each_env() -> None:
    aml = terminal_tools(["aml"])
    assert {"file_sar", "close_alert"} <= aml
    assert "review_alert" not in aml and "query_transactions" not in aml
    assert terminal_tools(["aml", "support"]) > aml  # the support env's decisions join them


def test_a_plan_is_decided_once_its_terminal_call_closes() -> None:
    tokenizer = _smollm2_tokenizer()
    reached = decision_reached(tokenizer, terminal_tools(["aml"]))
    look = '<tool_call>{"name": "review_alert", "arguments": {"alert_id": "AL-1"}}</tool_call>\n'
    decide = '<tool_call>{"name": "file_sar", "arguments": {"typology": "structuring"}}</tool_call>'

    def ids(text: str) -> list[int]:
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    assert not reached(ids(look))  # a call, but not a decision
    assert not reached(ids(look + decide[:-12]))  # the decision is not closed yet
    assert reached(ids(look + decide))


def test_only_decided_completions_below_the_cap_get_the_end_of_turn_token() -> None:
    decided = lambda tokens: tokens[-1] == 7  # noqa: E731 (a stand-in test for "decision made")
    completions = [[1, 7], [1, 2], [1, 7, 0], [7, 7, 7, 7], []]
    assert end_decided(completions, decided, end=0, cap=4) == [
        [1, 7, 0],  # decided: the turn ends here
        [1, 2],  # still investigating (or cut at the cap): TRL sees it as truncated
        [1, 7, 0],  # already ended
        [7, 7, 7, 7],  # at the cap: no room for the end token
        [],
    ]


def test_a_plan_mode_trainer_ends_completions_at_the_decisions_of_its_envs(tmp_path) -> None:
    cfg = load_config(
        ROOT / "configs/cpu.yaml",
        [
            "model.backend=tiny",
            "data.n_train=2",
            "training.num_generations=2",
            "training.per_device_train_batch_size=2",
            "logging.log_completions=false",
            f"output_dir={tmp_path}",
        ],
    )
    assert type(build_trainer(cfg).trainer).decision_tools == terminal_tools(["aml"])
