"""``rewards.decision_rate: held`` (pipeline/training/rate_hold.py, pipeline/decoding/decision_rate.py):
the decision's rate as one learned offset, the adapter's updates kept off it, and the offset
applied wherever a reply is decoded."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from peft import LoraConfig, get_peft_model

from pipeline.decoding.activation import generation_prompt_tokens
from pipeline.decoding.batch_generation import generate
from pipeline.decoding.decision_rate import RATE_FILE, DecisionRate
from pipeline.training.config import ConfigError, load_config
from pipeline.training.rate_hold import _HoldRate, _Window, decision_log_odds, held_weights

from conftest import smollm2_tokenizer, tiny_model

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ["file_sar", "close_alert"]


def _activated(seed: int = 3):
    base, tok = tiny_model(seed=seed, style="compact")
    config = LoraConfig(
        r=4,
        lora_alpha=8,
        target_modules=["q_proj", "v_proj", "up_proj"],
        alora_invocation_tokens=generation_prompt_tokens(tok),
        init_lora_weights=False,
        task_type="CAUSAL_LM",
    )
    return get_peft_model(base, config), tok


def _prompt(tok, case: str) -> list[int]:
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": f"case {case}"}]
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return tok(text, add_special_tokens=False)["input_ids"]


def test_the_parting_point_is_where_the_decisions_calls_differ() -> None:
    tok = smollm2_tokenizer("compact")
    rate = DecisionRate.of(tok, TOOLS)
    assert rate.tools == ("close_alert", "file_sar")
    assert tok.decode(rate.opening).endswith('{"name": "')
    assert tok.decode([rate.first]).startswith("close") and tok.decode([rate.second]) == "file"
    with pytest.raises(ValueError, match="exactly two"):
        DecisionRate.of(tok, ["file_sar"])


def test_the_rule_decides_by_the_log_odds_plus_the_offset_only_at_the_parting_point() -> None:
    rate = DecisionRate([7, 8], first=1, second=2, offset=0.5)
    logits = torch.zeros(5)
    logits[1], logits[2] = 0.0, 1.0  # d = -1: with the offset, -0.5 -> the second
    assert rate.decide([3, 7, 8], 1, logits) == 2
    rate.offset = 1.5
    assert rate.decide([3, 7, 8], 2, logits) == 1
    assert rate.decide([3, 7], 2, logits) == 2  # not where the decisions part
    assert rate.decide([3, 7, 8], 4, logits) == 4  # not a decision: left alone


def test_a_saved_rate_round_trips_and_a_broken_one_is_refused(tmp_path) -> None:
    rate = DecisionRate([7, 8], 1, 2, -3.25, ("close_alert", "file_sar"))
    assert DecisionRate.load(rate.save(tmp_path).parent) == rate
    assert DecisionRate.load(tmp_path / "nowhere") is None
    (tmp_path / RATE_FILE).write_text(json.dumps({"opening": [1]}))
    with pytest.raises(ValueError, match="not a saved decision rate"):
        DecisionRate.load(tmp_path)


@pytest.mark.parametrize(("right", "expected"), [(0, "close"), (1, "file")])
def test_held_weights_make_the_offsets_gradient_a_logistic_regressions(right, expected) -> None:
    """A case's two branch rows (the right one pushed up, the wrong one down), P = P(first):
    the offset's gradient summed over them is 2 (P - y), y = 1 where the first is right."""
    p = torch.tensor([0.3, 0.3])
    advantages = torch.tensor([1.0, -1.0]) if right == 0 else torch.tensor([-1.0, 1.0])
    weighted, grads = held_weights(advantages, [0, 1], p)
    y = 1.0 if expected == "close" else 0.0
    assert math.isclose(float(grads.sum()), 2 * (0.3 - y), rel_tol=1e-6)
    p_wrong = 0.7 if right == 0 else 0.3  # the weights: 2 P(wrong decision) on both rows
    assert torch.allclose(weighted.abs(), torch.full((2,), 2 * p_wrong))


def test_the_step_keeps_the_adapter_off_the_rate_and_the_offset_takes_its_move_back() -> None:
    """Before the optimizer: the gradient has no component along the rate's, the offset moved by
    its own step. After Adam's step (which still moves the rate): the batch's mean log-odds plus
    the offset are where the offset's step put them."""
    model, tok = _activated()
    rate = DecisionRate.of(tok, TOOLS, offset=0.25)
    cases = [tuple(_prompt(tok, c)) for c in ("A", "B", "C")]
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(params, lr=0.1)
    d = torch.stack([decision_log_odds(model, c, rate.opening, rate) for c in cases])
    grads = torch.autograd.grad(d.sum(), params)
    window = _Window()
    window.add(params, grads, cases, d.detach() + rate.offset, torch.tensor([0.2, -0.6, 0.1]))
    generator = torch.Generator().manual_seed(0)
    for p in params:
        p.grad = torch.randn(p.shape, generator=generator)
    trainer = SimpleNamespace(
        model=model, decision_rate=rate, rate_lr=1.0, _window=window, _metrics={"train": {}}
    )
    trainer._metrics["train"] = {"decision/rate_offset": [], "decision/batch_log_odds": []}
    hold = _HoldRate(trainer)
    before = float((d.detach() + 0.25).mean())
    hold.on_pre_optimizer_step(None, None, None)
    dot = sum(float((p.grad * g).sum()) for p, g in zip(params, grads, strict=True))
    assert abs(dot) < 1e-4 * math.sqrt(sum(float((p.grad**2).sum()) for p in params))
    assert math.isclose(rate.offset, 0.25 + 0.1, rel_tol=1e-6)  # -lr * mean(0.2, -0.6, 0.1)
    assert math.isclose(hold.target, before + 0.1, rel_tol=1e-6)
    optimizer.step()
    with torch.no_grad():
        moved = [float(decision_log_odds(model, c, rate.opening, rate)) for c in cases]
    assert abs(sum(moved) / 3 - float(d.detach().mean())) > 1e-3  # Adam moved the rate
    hold.on_optimizer_step(None, None, None)
    assert math.isclose(sum(moved) / 3 + rate.offset, hold.target, rel_tol=1e-5, abs_tol=1e-5)
    assert window.rate_grad is None and trainer._metrics["train"]["decision/rate_offset"]


def test_decoders_apply_a_saved_rate(tmp_path) -> None:
    """``generate`` and the checkpoint backend both let the rate replace a decision token."""
    from pipeline.evaluation.backends import CheckpointBackend, GenerationSettings

    model, tok = _activated()
    model.eval()
    prompt = _prompt(tok, "A")
    plain = generate(model, [prompt], 1, set(), tok.pad_token_id)[0][0]
    other = plain + 1
    rate = DecisionRate([], first=other, second=plain, offset=1e4)  # every position a parting one
    assert generate(model, [prompt], 1, set(), tok.pad_token_id, decide=rate.decide) == [[other]]
    tiny_model(seed=3)[0].save_pretrained(tmp_path / "base")
    tok.save_pretrained(tmp_path / "base")
    model.peft_config["default"].base_model_name_or_path = str(tmp_path / "base")
    model.save_pretrained(tmp_path / "adapter")
    rate.save(tmp_path / "adapter")
    backend = CheckpointBackend(tmp_path / "adapter", GenerationSettings(plan_max_new_tokens=1))
    backend.stop_ids = set()
    assert backend.decision_rate == rate
    assert backend._decode(prompt, 1, torch.Generator()) == [other]


def _held_config(tmp_path: Path, *extra: str):
    return load_config(
        ROOT / "configs/cpu_steps.yaml",
        [
            "model.backend=tiny",
            "peft.activated=true",
            "data.n_train=2",
            "data.decision_branches=true",
            "rewards.branch_credit=decision_likelihood",
            "rewards.decision_rate=held",
            "rewards.weights.decision=2.0",
            "training.num_generations=4",
            "training.per_device_train_batch_size=4",
            "training.max_completion_length=16",
            "training.max_steps=3",
            "training.save_steps=2",
            "logging.log_completions=false",
            f"output_dir={tmp_path}",
            *extra,
        ],
    )


def test_a_held_run_saves_its_offset_with_every_checkpoint_and_resumes_from_it(tmp_path) -> None:
    """A real run (a tiny model's replies reach no decision, so nothing moves the offset): the
    offset is saved with each checkpoint and the final adapter, and a resumed run starts from the
    checkpoint's."""
    from pipeline.training.trainer import newest_checkpoint, read_history, train

    result = train(_held_config(tmp_path))
    assert result.global_step == 3
    saved = DecisionRate.load(tmp_path / "final")
    assert saved is not None and saved.offset == 0.0 and saved.tools == ("close_alert", "file_sar")
    checkpoint = newest_checkpoint(tmp_path)
    assert DecisionRate.load(checkpoint) == saved
    logged = read_history(result.history_csv)
    assert len([r for r in logged if "decision/rate_offset" in r]) == 3
    saved.offset = 2.5
    saved.save(checkpoint)
    resumed = train(_held_config(tmp_path, "training.max_steps=4"), resume=True)
    assert resumed.resumed_from == str(checkpoint) and resumed.global_step == 4
    assert DecisionRate.load(tmp_path / "final").offset == 2.5
    history = read_history(resumed.history_csv)
    offsets = [r["decision/rate_offset"] for r in history if "decision/rate_offset" in r]
    assert offsets[-1] == 2.5


@pytest.mark.slow
def test_the_loss_weighs_each_decision_token_by_the_held_log_odds(tmp_path, monkeypatch) -> None:
    """Real branched sampling: TRL's loss sees each decision token's push weighted by
    2 P(wrong decision) with P = sigmoid(d + offset), d read from the stored context; the step's
    window holds the cases and the offset's gradient."""
    import trl

    from pipeline.training.trainer import build_trainer

    trainer = build_trainer(_held_config(tmp_path)).trainer
    trainer.decision_rate.offset = -0.7
    rows = list(trainer.train_dataset)[:2]
    trainer.model.train()
    out = trainer._generate_and_score_completions([rows[0]] * 4 + [rows[1]] * 4)
    column = len(trainer.decision_rate.opening)
    pushes = torch.tensor([3.0, -3.0, 3.0, -3.0, -3.0, 3.0, -3.0, 3.0])  # case 0: close right
    out["advantages"][:, column] = pushes
    seen = {}
    original = trl.GRPOTrainer._compute_loss

    def spy(self, model, inputs):
        seen["advantages"] = inputs["advantages"]
        return original(self, model, inputs)

    monkeypatch.setattr(trl.GRPOTrainer, "_compute_loss", spy)
    trainer.current_gradient_accumulation_steps = 1
    loss = trainer.compute_loss(trainer.model, out)
    assert torch.isfinite(loss)
    rate = trainer.decision_rate
    with torch.no_grad():
        cases = [tuple(out["prompt_ids"][r][out["prompt_mask"][r].bool()].tolist()) for r in (0, 4)]
        p = [
            float(torch.sigmoid(decision_log_odds(trainer.model, c, rate.opening, rate) - 0.7))
            for c in cases
        ]
    expected = []
    for row, push in enumerate(pushes.tolist()):
        p_first = p[row // 4]
        p_mine = p_first if row % 2 == 0 else 1 - p_first  # branches alternate close, file
        expected.append(push * (2 * (1 - p_mine) if push > 0 else 2 * p_mine))
    assert torch.allclose(seen["advantages"][:, column], torch.tensor(expected), atol=1e-4)
    assert len(trainer._window.cases) == 2 and len(trainer._window.offset_grads) == 8
    assert trainer._window.rate_grad is not None


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["rewards.decision_rate=fixed"], "choose free or held"),
        (["rewards.decision_rate=held"], "decision_likelihood"),
        (
            [
                "rewards.decision_rate=held",
                "peft.activated=true",
                "data.decision_branches=true",
                "rewards.branch_credit=decision_likelihood",
                "rewards.weights.decision=2.0",
                "rewards.rate_lr=0",
            ],
            "rate_lr",
        ),
    ],
)
def test_a_held_rate_is_checked(overrides, message) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(ROOT / "configs/cpu_steps.yaml", overrides)


def test_an_evaluation_loss_holds_nothing(tmp_path) -> None:
    """Without gradients (TRL's evaluation) the loss is TRL's and no step's window fills."""
    from pipeline.training.trainer import build_trainer

    trainer = build_trainer(_held_config(tmp_path)).trainer
    rows = list(trainer.train_dataset)[:1]
    out = trainer._generate_and_score_completions([rows[0]] * 4)
    trainer.current_gradient_accumulation_steps = 1
    with torch.no_grad():
        loss = trainer.compute_loss(trainer.model, out)
    assert torch.isfinite(loss) and trainer._window.rate_grad is None
