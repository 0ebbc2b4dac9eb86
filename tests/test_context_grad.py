"""``model.context_grad: false``: the GRPO loss reads each group's prompt from a cache encoded once
without gradient (pipeline/training/context_grad.py). Its log-probabilities must be TRL's, its gradient
close to the full one, and a real GRPOTrainer run must train with it."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest
import torch

from pipeline.training.config import ConfigError, load_config
from pipeline.training.context_grad import context_logits, groups_by_prompt
from pipeline.training.model import load_model_and_tokenizer
from pipeline.training.trainer import train

ROOT = Path(__file__).resolve().parents[1]
PROMPT, REPLY, ROWS = 300, 20, 4


@pytest.fixture(scope="module")
def batch() -> dict:
    """A tiny model with a non-zero adapter, one prompt and four replies (one padded)."""
    cfg = load_config(ROOT / "configs/cpu_steps.yaml", ["model.backend=tiny"])
    model, _ = load_model_and_tokenizer(cfg.model, cfg.peft, "compact")
    rng = torch.Generator().manual_seed(0)
    for name, param in model.named_parameters():
        if "lora_B" in name:  # PEFT starts B at 0: the adapter would change nothing yet
            param.data = torch.randn(param.shape, generator=rng) * 0.05
    model.train()
    prompt = torch.randint(0, 1000, (PROMPT,), generator=rng).tolist()
    replies = torch.randint(0, 1000, (ROWS, REPLY), generator=rng)
    mask = torch.ones_like(replies)
    mask[1, 15:] = 0
    ids = torch.cat([torch.tensor(prompt).expand(ROWS, -1), replies], 1)
    full_mask = torch.cat([torch.ones(ROWS, PROMPT, dtype=torch.long), mask], 1)
    return {
        "model": model,
        "prompt": prompt,
        "replies": replies,
        "mask": mask,
        "ids": ids,
        "full_mask": full_mask,
    }


def _logps(logits: torch.Tensor, replies: torch.Tensor) -> torch.Tensor:
    return logits.log_softmax(-1).gather(-1, replies[..., None])[..., 0]


def _full(batch: dict) -> torch.Tensor:
    out = batch["model"](input_ids=batch["ids"], attention_mask=batch["full_mask"], use_cache=False)
    return _logps(out.logits[:, PROMPT - 1 : -1], batch["replies"])


def _context(batch: dict) -> torch.Tensor:
    logits = context_logits(batch["model"], tuple(batch["prompt"]), batch["replies"], batch["mask"])
    return _logps(logits, batch["replies"])


def _gradient(batch: dict, logps: torch.Tensor) -> torch.Tensor:
    model = batch["model"]
    model.zero_grad()
    (logps * batch["mask"]).sum().backward()
    return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])


def test_log_probabilities_equal_the_full_forward(batch: dict) -> None:
    with torch.no_grad():
        full, context = _full(batch), _context(batch)
    diff = ((full - context) * batch["mask"]).abs().max().item()
    assert diff < 1e-4, diff


def test_a_prompt_encoded_by_the_sampling_gives_the_same_logits_and_stays_reusable(
    batch: dict,
) -> None:
    from pipeline.decoding.batch_generation import encode_prefix

    model, prompt = batch["model"], tuple(batch["prompt"])
    encoded = encode_prefix(model, list(prompt[:-1])).cache
    own = context_logits(model, prompt, batch["replies"], batch["mask"])
    for _ in range(2):  # a second group reading the same encoding sees it unchanged
        reused = context_logits(model, prompt, batch["replies"], batch["mask"], encoded=encoded)
        assert torch.equal(reused, own)
    assert encoded.layers[0].keys.shape[0] == 1


def test_a_sampled_prompt_is_reused_only_in_the_step_that_sampled_it() -> None:
    from types import SimpleNamespace

    from pipeline.decoding.trainer_sampling import sampled_prefix

    trainer = SimpleNamespace(state=SimpleNamespace(global_step=3))
    assert sampled_prefix(trainer, (1, 2, 3)) is None  # nothing sampled yet
    trainer._sampled_prefixes = (3, {(1, 2): "cache"})
    assert sampled_prefix(trainer, (1, 2, 3)) == "cache"
    assert sampled_prefix(trainer, (1, 2, 4)) == "cache"  # only the last token differs
    assert sampled_prefix(trainer, (1, 5, 3)) is None
    trainer.state.global_step = 4  # a later optimizer step (num_iterations > 1): new weights
    assert sampled_prefix(trainer, (1, 2, 3)) is None
    trainer.context_reuse_steps = 2  # model.context_reuse=generation with num_iterations=2
    assert sampled_prefix(trainer, (1, 2, 3)) == "cache"
    trainer.state.global_step = 5  # past the steps that train on those samples
    assert sampled_prefix(trainer, (1, 2, 3)) is None
    trainer.state.global_step = 2  # before the sampling (a resumed run's counter)
    assert sampled_prefix(trainer, (1, 2, 3)) is None


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["model.context_reuse=always"], "choose step or generation"),
        (["model.context_grad=true", "model.context_reuse=generation"], "context_grad=false"),
    ],
)
def test_context_reuse_is_checked(overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(ROOT / "configs/cpu_steps.yaml", overrides)


def test_gradient_points_the_same_way_as_the_full_one(batch: dict) -> None:
    full = _gradient(batch, _full(batch))
    context = _gradient(batch, _context(batch))
    cosine = torch.nn.functional.cosine_similarity(full, context, dim=0).item()
    # 2-layer random model: measured 0.52 (0.80 with another draw). What is left out is the
    # prompt's own encoding; a reply read at wrong positions or a wrong mask gives ~0.
    assert 0.3 < cosine < 0.999, cosine
    assert context.norm() > 0


def test_rows_are_grouped_by_their_unpadded_prompt() -> None:
    ids = torch.tensor([[0, 5, 6], [5, 6, 7], [0, 5, 6], [0, 0, 9]])
    mask = torch.tensor([[0, 1, 1], [1, 1, 1], [0, 1, 1], [0, 0, 1]])
    assert groups_by_prompt(ids, mask) == {(5, 6): [0, 2], (5, 6, 7): [1], (9,): [3]}


def test_gradient_checkpointing_is_refused_with_a_fixed_context() -> None:
    with pytest.raises(ConfigError, match="gradient_checkpointing"):
        load_config(
            ROOT / "configs/cpu_steps.yaml",
            ["model.context_grad=false", "training.gradient_checkpointing=true"],
        )


@pytest.mark.slow
def test_a_steps_run_trains_with_a_fixed_context(tmp_path: Path, monkeypatch) -> None:
    import pipeline.training.context_grad as module

    calls = []
    real = module.context_logits

    def counted(*args, **kwargs):
        calls.append(args[2].shape)
        reused.append(kwargs.get("encoded") is not None)
        return real(*args, **kwargs)

    reused: list[bool] = []

    monkeypatch.setattr(module, "context_logits", counted)
    cfg = load_config(
        ROOT / "configs/cpu_steps.yaml",
        [
            "model.backend=tiny",
            "model.context_grad=false",
            "training.gradient_checkpointing=false",
            "data.n_train=4",
            "training.num_generations=4",
            "training.per_device_train_batch_size=4",
            "training.max_completion_length=16",
            "training.max_steps=2",
            "training.save_steps=100",
            "logging.log_completions=false",
            f"output_dir={tmp_path}",
        ],
    )
    result = train(cfg, sft_steps=1)  # the decision-blind warm start, on a fixed context too
    assert result.global_step == 2
    with open(result.history_csv) as handle:
        losses = [float(row["loss"]) for row in csv.DictReader(handle) if row.get("loss")]
    assert len(losses) == 2 and all(math.isfinite(loss) for loss in losses)
    assert (tmp_path / "final/adapter_model.safetensors").exists()
    groups = [shape for shape in calls if shape[0] == 4]  # GRPO: one group of 4 per step
    # SFT: 1 step of 2 rows, one cut's two decisions (warmup.prompt_grouped), one encoding.
    assert len(groups) >= 2 and [shape[0] for shape in calls if shape[0] != 4] == [2]
    # Every GRPO group read its prompt from the step's sampling; the SFT pair encoded its own.
    assert [r for r, shape in zip(reused, calls, strict=True) if shape[0] == 4] == [True] * len(
        groups
    )
    assert not any(r for r, shape in zip(reused, calls, strict=True) if shape[0] == 2)


def test_sft_loss_with_a_fixed_context_equals_the_full_completion_loss(
    batch: dict, monkeypatch
) -> None:
    """Two examples with one prompt (a cut's two decisions): the loss is the full completion
    loss, and the prompt is encoded once for both."""
    import pipeline.decoding.batch_generation as decoding
    from pipeline.training.context_grad import context_sft_trainer

    encodings = []
    real = decoding.encode_prefix
    monkeypatch.setattr(
        decoding, "encode_prefix", lambda *a, **k: encodings.append(1) or real(*a, **k)
    )
    ids = batch["ids"][:2]
    labels = ids.clone()
    labels[:, :PROMPT] = -100  # completion-only loss, as TRL's collator writes it
    labels[1, PROMPT + 15 :] = -100  # right padding
    with torch.no_grad():
        logits = batch["model"](input_ids=ids, use_cache=False).logits[:, :-1]
        full = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1), ignore_index=-100
        )
        trainer = context_sft_trainer(object)
        fixed = trainer.compute_loss(None, batch["model"], {"input_ids": ids, "labels": labels})
    assert abs(full.item() - fixed.item()) < 1e-4, (full.item(), fixed.item())
    assert len(encodings) == 1


@pytest.mark.slow
@pytest.mark.parametrize(
    ("reuse", "reused"), [("step", [True, True, False]), ("generation", [True] * 3)]
)
def test_later_iterations_read_the_sampled_context_only_when_asked(
    tmp_path: Path, monkeypatch, reuse: str, reused: list[bool]
) -> None:
    """num_iterations=2: each sampling serves two optimizer steps. Per sampling TRL scores the
    group three times (its old log-probabilities, then the loss of each step); with ``step`` the
    second step encodes the prompt again, with ``generation`` it reads the sampling's cache."""
    import pipeline.training.context_grad as module

    seen: list[bool] = []
    real = module.context_logits

    def counted(*args, **kwargs):
        seen.append(kwargs.get("encoded") is not None)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, "context_logits", counted)
    cfg = load_config(
        ROOT / "configs/cpu_steps.yaml",
        [
            "model.backend=tiny",
            "model.context_grad=false",
            f"model.context_reuse={reuse}",
            "data.n_train=4",
            "training.num_generations=4",
            "training.per_device_train_batch_size=4",
            "training.num_iterations=2",
            "training.max_completion_length=16",
            "training.max_steps=4",
            "training.save_steps=100",
            "logging.log_completions=false",
            f"output_dir={tmp_path}",
        ],
    )
    result = train(cfg)
    assert result.global_step == 4
    with open(result.history_csv) as handle:
        losses = [float(row["loss"]) for row in csv.DictReader(handle) if row.get("loss")]
    assert len(losses) == 4 and all(math.isfinite(loss) for loss in losses)
    assert seen == reused * 2  # two samplings, three scorings each
