"""Config: YAML sections, --set overrides, and up-front rejection of what cannot run."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.training.config import ConfigError, build_config, load_config

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


@pytest.mark.parametrize("name", sorted(p.name for p in CONFIGS.glob("*.yaml")))
def test_shipped_configs_validate(name: str) -> None:
    cfg = load_config(CONFIGS / name)
    assert cfg.training["num_generations"] >= 2
    if name.endswith("_steps.yaml"):
        assert cfg.data.mode == "steps" and cfg.data.result_style == "compact"


def test_set_overrides_any_key_with_yaml_values() -> None:
    cfg = load_config(
        CONFIGS / "cpu.yaml",
        ["training.learning_rate=1e-6", "data.envs=[support, gang]", "model.backend=tiny"],
    )
    assert cfg.training["learning_rate"] == pytest.approx(1e-6)
    assert cfg.data.envs == ["support", "gang"]
    assert cfg.model.backend == "tiny" and cfg.model.on_cpu
    for backend, on_cpu in (("cpu", True), ("unsloth", False), ("transformers", False)):
        assert (
            load_config(CONFIGS / "cpu.yaml", [f"model.backend={backend}"]).model.on_cpu is on_cpu
        )


def test_later_overrides_win() -> None:
    cfg = load_config(CONFIGS / "cpu.yaml", ["data.n_train=8", "data.n_train=16"])
    assert cfg.data.n_train == 16


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("modle.backend=cpu", "did you mean 'model'"),
        ("model.bakend=cpu", "did you mean 'backend'"),
        ("training.learnig_rate=1e-5", "learning_rate"),
        ("model.backend=gpu", "choose one of"),
        ("data.n_train=many", "data.n_train"),
        ("data.mode=chat", "plan, interactive, steps"),
        ("rewards.weights={style: 1.0}", "unknown components"),
        ("training.use_vllm=true", "needs a CUDA backend"),
        ("training.fp16=true", "fp16 mixed precision needs a GPU"),
        ("training.report_to=wandb", "its own section"),
        ("hub.push=true", "hub_model_id"),
    ],
)
def test_bad_keys_and_values_fail_with_a_clear_message(override: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(CONFIGS / "cpu.yaml", [override])


def test_generation_batch_not_divisible_by_num_generations_is_rejected() -> None:
    with pytest.raises(ConfigError, match="not divisible by training.num_generations 3"):
        load_config(CONFIGS / "cpu.yaml", ["training.num_generations=3"])


def test_generation_batch_size_and_steps_per_generation_are_exclusive() -> None:
    with pytest.raises(ConfigError, match="not both"):
        load_config(
            CONFIGS / "cpu.yaml",
            ["training.generation_batch_size=8", "training.steps_per_generation=2"],
        )


def test_four_bit_backends_need_lora() -> None:
    with pytest.raises(ConfigError, match="peft.enabled=true"):
        build_config({"model": {"backend": "bnb4bit"}, "peft": {"enabled": False}})


def test_malformed_override_is_rejected() -> None:
    with pytest.raises(ConfigError, match="section.key=value"):
        load_config(CONFIGS / "cpu.yaml", ["learning_rate"])


def test_defaults_alone_make_a_valid_config() -> None:
    cfg = build_config({"training": {"num_generations": 4, "per_device_train_batch_size": 4}})
    assert cfg.model.name_or_path == "smollm2" and cfg.data.mode == "plan"


def test_cpu_runs_leave_bf16_autocast_and_checkpointing_off_unless_asked() -> None:
    from pipeline.training.trainer import build_grpo_config

    args = build_grpo_config(load_config(CONFIGS / "cpu.yaml", []), [1.0] * 5)
    assert (args.bf16, args.gradient_checkpointing, args.use_cpu) == (False, False, True)
    asked = load_config(CONFIGS / "cpu.yaml", ["training.gradient_checkpointing=true"])
    assert build_grpo_config(asked, [1.0] * 5).gradient_checkpointing is True
    with pytest.raises(ConfigError, match="prompt_style"):
        load_config(CONFIGS / "cpu.yaml", ["data.prompt_style=short"])


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["data.cuts=all"], "data.mode=steps and data.cuts=decision"),
        (["model.backend=transformers"], "backend cpu or tiny"),
        (["data.envs=[aml, fraud]"], "one of"),
        (["data.envs=[fraud]"], "one of"),
        (["training.num_generations=3", "training.per_device_train_batch_size=9"], "multiple"),
    ],
)
def test_decision_branches_are_refused_where_they_cannot_apply(
    overrides: list[str], message: str
) -> None:
    base = CONFIGS / "cpu_steps.yaml"
    assert load_config(base, ["data.decision_branches=true"]).data.decision_branches
    with pytest.raises(ConfigError, match=message):
        load_config(base, ["data.decision_branches=true", *overrides])


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["rewards.branch_credit=sum"], "one of total, decision, decision_tokens, decision_li"),
        (["rewards.branch_credit=decision"], "needs data.decision_branches"),
        (["rewards.branch_credit=decision_tokens"], "needs data.decision_branches"),
        (["rewards.branch_credit=decision_likelihood"], "needs data.decision_branches"),
        (
            ["rewards.branch_credit=decision", "data.decision_branches=true"],
            "rewards.weights.decision > 0",
        ),
        (
            [
                "rewards.branch_credit=decision_tokens",
                "data.decision_branches=true",
                "rewards.weights.decision=2.0",
                "training.multi_objective_aggregation=normalize_then_sum",
            ],
            "sum_then_normalize",
        ),
        (
            [
                "rewards.branch_credit=decision_likelihood",
                "data.decision_branches=true",
                "rewards.weights.decision=2.0",
                "training.multi_objective_aggregation=normalize_then_sum",
            ],
            "decision_likelihood splits TRL's summed advantage",
        ),
    ],
)
def test_decision_credit_needs_branches_and_a_weighted_decision(
    overrides: list[str], message: str
) -> None:
    base = CONFIGS / "cpu_steps.yaml"
    on = ["data.decision_branches=true", "rewards.weights.decision=2.0"]
    assert load_config(base, [*on, "rewards.branch_credit=decision"]).rewards.branch_credit
    assert load_config(base, [*on, "rewards.branch_credit=decision_tokens"]).rewards.branch_credit
    assert load_config(
        base, [*on, "rewards.branch_credit=decision_likelihood"]
    ).rewards.branch_credit
    with pytest.raises(ConfigError, match=message):
        load_config(base, overrides)
