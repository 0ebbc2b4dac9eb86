"""pipeline.cpu_generation: TRL's GRPOTrainer samples CPU groups through the shared-prefix decoder."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from pipeline.config import load_config
from pipeline.cpu_generation import fast_sampling_applies
from pipeline.training import build_trainer

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
