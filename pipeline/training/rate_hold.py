"""``rewards.decision_rate: held``: the decision's rate learned as one offset, the adapter kept off it.

With decision branches every group holds one case's replies split across ``close_alert`` and
``file_sar``, and ``decision_likelihood`` credit pushes each case's log-odds ``d`` (closing over
filing, where the two calls' names part) toward the decision its evidence called for, weighted by
how wrong the policy still is there. On SmolLM2 those pushes move every case's ``d`` nearly
together (the cases' gradients of ``d`` have cosine ~0.98): a few updates swing the share of
filings between all and none while the ranking of cases, the reading of the evidence, moves
little. The diagnostic of ``benchmarks/reply_adapter.py`` (variant ``adam_rate_held``) separated
the two, and reward alone then taught the decision on 96 cases (RESULTS.md, ``reply_adapter``).
This carries that recipe into the trainer:

- The policy's decision is ``d + offset``, with ``offset`` one learned scalar
  (``pipeline.decoding.decision_rate``); the likelihood weights use ``P = sigmoid(d + offset)``.
- Each optimizer step's gradient loses its component along the gradient of the step's mean ``d``
  (the rate) before the optimizer sees it: what is left can only move cases apart.
- The offset moves by its own gradient of the same loss (SGD, ``rewards.rate_lr``), in closed
  form: per branch row, its weighted decision advantage times the derivative of its decision's
  log-probability by the offset.
- After the step, the adapter's measured move of the batch's mean ``d`` (Adam's per-weight
  scaling turns an orthogonal gradient into a step that still moves it) is taken back into the
  offset, so the batch's mean log-odds end where the offset's own step put them.

``d`` is read with the adapter on from the reply's assistant turn and the context from the run's
store (``peft.activated``): a case costs a forward and backward of ~12 tokens. The offset is saved
beside the adapter (``decision_rate.json``), read back on resume and by every evaluation decoder.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from transformers import TrainerCallback


def decision_log_odds(model: Any, prompt: Sequence[int], opening: Sequence[int], rate: Any) -> Any:
    """``d`` = logit(first) - logit(second) after ``prompt`` + ``opening`` (no offset), the adapter
    on from the prompt's assistant turn, the context read from the run's store; differentiable."""
    import torch

    from pipeline.decoding.activation import (
        activation_start,
        invocation_of,
        plain_lora,
        store_of,
    )

    invocation = invocation_of(model)
    if invocation is None:
        raise ValueError("a held decision rate needs an activated adapter (peft.activated)")
    start = activation_start(prompt, invocation)
    context, tail = list(prompt[:start]), [*prompt[start:], *opening]
    device = next(model.parameters()).device
    cache = store_of(model).get(model, context)
    with plain_lora(model):  # the tail is the reply's: the adapter on at every position
        out = model(
            input_ids=torch.tensor([tail], device=device),
            position_ids=torch.arange(start, start + len(tail), device=device)[None],
            past_key_values=cache,
            use_cache=True,
            logits_to_keep=1,
            alora_offsets=[len(tail)],
        )
    logits = out.logits[0, -1].float()
    return logits[rate.first] - logits[rate.second]


def held_weights(advantages: Any, branches: Sequence[int], p_first: Any) -> tuple[Any, Any]:
    """``decision_likelihood``'s weights with ``P`` from ``d + offset``: a row pushing its decision
    up (advantage > 0) is weighted ``2 (1 - P(its decision))``, one pushing it down ``2 P``.
    Returns the weighted advantages and, per row, the derivative of its loss by the offset (the
    advantage in units of the batch's mean absolute one, so the offset's step does not depend on
    how TRL scales a token's advantage)."""
    import torch

    branch = torch.tensor(list(branches), device=advantages.device)
    p_mine = torch.where(branch == 0, p_first, 1.0 - p_first)
    weight = torch.where(advantages > 0, 2.0 * (1.0 - p_mine), 2.0 * p_mine)
    weighted = advantages * weight
    unit = advantages.abs().mean().clamp(min=1e-8)
    dlogp = torch.where(branch == 0, 1.0 - p_first, -p_first)  # d log P(its decision) / d offset
    return weighted, -(weighted / unit) * dlogp


def rate_hold_trainer(base: type, rate_lr: float = 1.0) -> type:
    """A subclass of ``base`` (the branching, ``decision_tokens``-credit GRPOTrainer) that holds
    the decision rate apart (module docstring)."""
    import torch

    from pipeline.decoding.decision_rate import DecisionRate
    from pipeline.decoding.trainer_sampling import branch_openings
    from pipeline.training.branch_credit import branch_of
    from pipeline.training.context_grad import groups_by_prompt

    class RateHoldGRPOTrainer(base):  # type: ignore[misc, valid-type]
        """GRPOTrainer whose decision rate is one learned offset, kept off the adapter."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.decision_rate = DecisionRate.of(self._tokenizer, sorted(self.decision_tools))
            self.rate_lr = rate_lr
            self._window = _Window()
            self.add_callback(_HoldRate(self))

        def _compute_loss(self, model, inputs):
            openings = branch_openings(self._tokenizer, self.decision_rate.tools)
            column = len(self.decision_rate.opening)
            groups = groups_by_prompt(inputs["prompt_ids"], inputs["prompt_mask"])
            prompt_of = {row: prompt for prompt, mine in groups.items() for row in mine}
            rows, branches, prompts = [], [], []
            for row, completion in enumerate(inputs["completion_ids"].tolist()):
                branch = branch_of(completion, openings)
                if branch is not None:
                    rows.append(row)
                    branches.append(branch)
                    prompts.append(prompt_of[row])
            if not rows or not torch.is_grad_enabled():  # evaluation: no step to hold
                return super()._compute_loss(model, inputs)
            cases = list(dict.fromkeys(prompts))
            d = torch.stack(
                [
                    decision_log_odds(model, p, self.decision_rate.opening, self.decision_rate)
                    for p in cases
                ]
            )
            params = [p for p in model.parameters() if p.requires_grad]
            grads = torch.autograd.grad(d.sum(), params, allow_unused=True)
            offset = self.decision_rate.offset
            p_case = torch.sigmoid(d.detach() + offset)
            p_first = torch.stack([p_case[cases.index(p)] for p in prompts])
            advantages = inputs["advantages"].clone()
            index = torch.tensor(rows, device=advantages.device)
            weighted, offset_grads = held_weights(advantages[index, column], branches, p_first)
            advantages[index, column] = weighted
            self._window.add(params, grads, cases, d.detach() + offset, offset_grads)
            return super()._compute_loss(model, dict(inputs) | {"advantages": advantages})

        def _save(self, output_dir: str | None = None, state_dict: Any = None) -> None:
            super()._save(output_dir, state_dict)
            self.decision_rate.save(output_dir or self.args.output_dir)

        def _load_from_checkpoint(self, resume_from_checkpoint: str, model: Any = None) -> None:
            super()._load_from_checkpoint(resume_from_checkpoint, model)
            saved = DecisionRate.load(resume_from_checkpoint)
            if saved is not None:
                self.decision_rate.offset = saved.offset

    return RateHoldGRPOTrainer


class _Window:
    """What one optimizer step's micro-batches measured: the rate's gradient, the cases and their
    log-odds with the offset, the offset's gradient."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.rate_grad: list[Any] | None = None
        self.cases: list[tuple[int, ...]] = []
        self.log_odds: list[float] = []
        self.offset_grads: list[float] = []

    def add(self, params, grads, cases, log_odds, offset_grads) -> None:
        import torch

        grads = [
            torch.zeros_like(p) if g is None else g for p, g in zip(params, grads, strict=True)
        ]
        if self.rate_grad is None:
            self.rate_grad = grads
        else:
            self.rate_grad = [a + b for a, b in zip(self.rate_grad, grads, strict=True)]
        self.cases += cases
        self.log_odds += log_odds.tolist()
        self.offset_grads += offset_grads.tolist()


class _HoldRate(TrainerCallback):
    """Before each optimizer step: the rate's gradient projected out of the adapter's, the offset
    moved by its own; after it: the adapter's measured move of the batch's rate taken back."""

    def __init__(self, trainer: Any) -> None:
        self.trainer = trainer
        self.target: float | None = None

    def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        import torch

        window, rate = self.trainer._window, self.trainer.decision_rate
        self.target = None
        if window.rate_grad is None:
            return control
        params = [p for p in self.trainer.model.parameters() if p.requires_grad]
        with torch.no_grad():
            dot = sum(
                float((p.grad * r).sum())
                for p, r in zip(params, window.rate_grad, strict=True)
                if p.grad is not None
            )
            norm = sum(float((r * r).sum()) for r in window.rate_grad)
            if norm > 0:
                for p, r in zip(params, window.rate_grad, strict=True):
                    if p.grad is not None:
                        p.grad -= (dot / norm) * r
        moved = -self.trainer.rate_lr * sum(window.offset_grads) / len(window.offset_grads)
        self.target = sum(window.log_odds) / len(window.log_odds) + moved
        rate.offset += moved
        return control

    def on_optimizer_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        import torch

        window, rate = self.trainer._window, self.trainer.decision_rate
        if self.target is not None:
            model = self.trainer.model
            with torch.no_grad():
                after = [
                    float(decision_log_odds(model, c, rate.opening, rate)) for c in window.cases
                ]
            rate.offset = self.target - sum(after) / len(after)
            metrics = self.trainer._metrics["train"]
            metrics["decision/rate_offset"].append(rate.offset)
            metrics["decision/batch_log_odds"].append(self.target)
        window.clear()
        return control
