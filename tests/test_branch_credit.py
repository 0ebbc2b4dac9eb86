"""pipeline.training.branch_credit: between decision branches only the decision earns credit."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from pipeline.training.branch_credit import (
    branch_of,
    decision_credit,
    decision_share,
    decision_token_advantages,
    decision_token_mask,
    likelihood_weighted,
)

ROOT = Path(__file__).resolve().parents[1]
NAN = float("nan")


def test_branch_of_reads_the_opening_a_completion_starts_with() -> None:
    openings = [[7, 8], [9]]
    assert branch_of([7, 8, 1, 2], openings) == 0
    assert branch_of([9, 3], openings) == 1
    assert branch_of([7, 9], openings) is None
    assert branch_of([], openings) is None


def test_an_unfinished_reply_gets_its_branch_decision_and_other_parts_rank_within_branch() -> None:
    # Columns: format, decision. Branch 0 is right; its second reply never decided (paid -1).
    rewards = torch.tensor([[1.0, 1.0], [0.9, -1.0], [0.2, -1.0], [0.7, -1.0]])
    out = decision_credit(rewards, [0, 1, 0, 1], [True, True, False, True], 1, 4, 2)
    assert out[:, 1].tolist() == [1.0, -1.0, 1.0, -1.0]
    fmt = out[:, 0]
    assert float(fmt[[0, 2]].mean()) == pytest.approx(float(fmt[[1, 3]].mean()))
    assert float(fmt.mean()) == pytest.approx(float(rewards[:, 0].mean()))  # logged mean kept
    assert float(fmt[0] - fmt[2]) == pytest.approx(0.8)  # within-branch ranking unchanged
    assert float(fmt[1] - fmt[3]) == pytest.approx(0.2)
    assert rewards[2, 1] == -1.0  # the input is not modified


def test_one_decision_known_wrong_makes_the_other_right_and_undecided_groups_stay() -> None:
    # Group 1: only a branch-0 reply decided, wrongly; branch 1's undecided replies are right.
    # Group 2: nobody decided: no branch knows its credit, the rewards stay as they were.
    rewards = torch.tensor(
        [[0.5, -1.0], [0.1, -1.0], [0.5, -1.0], [0.3, -1.0]]
        + [[0.1, -1.0], [0.2, -1.0], [0.3, -1.0], [0.4, -1.0]]
    )
    decided = [True, False, False, False] + [False] * 4
    out = decision_credit(rewards, [0, 1, 0, 1] * 2, decided, 1, 4, 2)
    assert out[:4, 1].tolist() == [-1.0, 1.0, -1.0, 1.0]
    assert torch.equal(out[4:], rewards[4:])


def test_rows_outside_branches_and_unscorable_values_are_left_alone() -> None:
    rewards = torch.tensor([[0.5, 1.0], [NAN, NAN], [0.3, -1.0], [0.1, -1.0]])
    plain = decision_credit(rewards, [None] * 4, [True, False, False, True], 1, 4, 2)
    assert torch.equal(plain[[0, 2, 3]], rewards[[0, 2, 3]])
    out = decision_credit(rewards, [0, 1, 0, 1], [True, False, False, True], 1, 4, 2)
    assert out[[0, 2, 3], 1].tolist() == [1.0, 1.0, -1.0]
    assert out[1].isnan().all()  # unscorable stays unscorable: TRL gives it no advantage


def _trl_advantages(rewards: torch.Tensor, weights: torch.Tensor, group: int) -> torch.Tensor:
    """TRL's sum-then-normalize advantages, group scaling (written out, as the check)."""
    totals = (rewards * weights).nansum(dim=1)
    totals[rewards.isnan().all(dim=1)] = NAN
    grouped = totals.view(-1, group)
    mean = torch.nanmean(grouped, dim=1).repeat_interleave(group)
    std = torch.stack([g[~g.isnan()].std() for g in grouped]).repeat_interleave(group)
    return torch.nan_to_num((totals - mean) / (std + 1e-4))


def test_decision_share_is_the_decision_columns_part_of_trls_advantage() -> None:
    # Columns: format, decision (weight 2). Group 1 branched, group 2 not; one row unscorable.
    rewards = torch.tensor(
        [[0.9, 1.0], [0.5, -1.0], [0.1, 1.0], [NAN, NAN]]
        + [[0.2, 1.0], [0.4, -1.0], [0.8, -1.0], [0.6, 1.0]]
    )
    weights = torch.tensor([1.0, 2.0])
    branches = [0, 1, 0, 1, None, None, None, None]
    shares = decision_share(rewards, weights, 1, 4, "group", branches)
    scored = torch.tensor([0.9 + 2, 0.5 - 2, 0.1 + 2])
    decision = torch.tensor([2.0, -2.0, 2.0])
    expected = (decision - decision.mean()) / (scored.std() + 1e-4)
    assert shares[:3].tolist() == pytest.approx(expected.tolist(), abs=1e-5)
    assert shares[3:].tolist() == [0.0] * 5  # unscorable and unbranched rows: no share
    rest = _trl_advantages(rewards, weights, 4)[:3] - shares[:3]
    fmt = torch.tensor([0.9, 0.5, 0.1])
    assert rest.tolist() == pytest.approx(
        ((fmt - fmt.mean()) / (scored.std() + 1e-4)).tolist(), abs=1e-5
    )
    unscaled = decision_share(rewards, weights, 1, 4, "none", branches)
    assert unscaled[:3].tolist() == pytest.approx((decision - decision.mean()).tolist())


def test_decision_tokens_carry_the_decision_share_and_the_rest_trains_the_other_tokens() -> None:
    openings = [[1, 2, 3, 7], [1, 2, 3, 8, 9]]  # three shared tokens, then the decision
    advantages = torch.tensor([1.5, -0.5, 0.25])
    shares = torch.tensor([1.0, -1.0, 0.0])
    mask = torch.tensor([[1] * 10, [1] * 8 + [0] * 2, [1] * 6 + [0] * 4])
    out = decision_token_advantages(advantages, shares, mask, [0, 1, None], openings)
    assert out.shape == (3, 10)
    mean_length = (10 + 8) / 2  # of the branch rows, not each row's own
    assert out[0, 3].item() == pytest.approx(1.0 * mean_length)
    assert out[0, [0, 1, 2, *range(4, 10)]].tolist() == pytest.approx([0.5] * 9)
    assert out[1, 3].item() == pytest.approx(-1.0 * mean_length)  # only the parting token
    assert out[1, [0, 1, 2, *range(4, 8)]].tolist() == pytest.approx([0.5] * 7)
    assert out[2].tolist() == pytest.approx([0.25] * 10)  # outside a branch: as TRL gave it


def test_decision_token_pushes_do_not_depend_on_a_replys_own_length() -> None:
    """Two cases, one calling for each decision, whose replies differ only in length: the push
    toward the right decision is the same size on both, so the batch teaches no rate."""
    openings = [[1, 7], [1, 8]]
    shares = torch.tensor([0.7, -0.7, -0.7, 0.7])  # case A: close right; case B: file right
    mask = torch.tensor([[1] * 12, [1] * 6 + [0] * 6, [1] * 4 + [0] * 8, [1] * 6 + [0] * 6])
    out = decision_token_advantages(shares.clone(), shares, mask, [0, 1, 0, 1], openings)
    toward_close = out[0, 1] - out[1, 1]  # case A: close up, file down
    toward_file = out[3, 1] - out[2, 1]  # case B: file up, close down
    assert float(toward_close) == pytest.approx(float(toward_file))
    assert float(out[:, 1].sum()) == pytest.approx(0.0)


def test_likelihood_weights_each_decision_token_by_how_wrong_the_policy_still_is() -> None:
    advantages = torch.tensor([[0.1, 3.0, 0.1], [0.2, -3.0, 0.2], [0.5, 0.5, 0.5]])
    p = torch.tensor([[0.9, 0.8, 0.9], [0.9, 0.2, 0.9], [0.9, 0.5, 0.9]])
    mask = decision_token_mask(torch.ones(3, 3), [0, 1, None], [[4, 7], [4, 8]])
    assert mask.tolist() == [[False, True, False], [False, True, False], [False] * 3]
    out = likelihood_weighted(advantages, p.log(), mask)
    assert out[0, 1].item() == pytest.approx(3.0 * 2 * (1 - 0.8))  # right branch: 2 (1 - p)
    assert out[1, 1].item() == pytest.approx(-3.0 * 2 * 0.2)  # wrong branch: 2 p
    keep = torch.tensor([[1, 0, 1], [1, 0, 1], [1, 1, 1]], dtype=torch.bool)
    assert torch.equal(out[keep], advantages[keep])  # every other token as it was
    even = likelihood_weighted(advantages, torch.full((3, 3), 0.5).log(), mask)
    assert torch.allclose(even, advantages)  # p = 0.5: decision_tokens credit


def test_likelihood_credit_pulls_a_drifted_rate_back_where_constant_credit_does_not() -> None:
    """Two cases, one calling for each decision, on a policy drifted toward closing (P(close)
    0.9 on both): with equal pushes the batch's net push on the closing token is 0, so nothing
    pulls the rate back; weighted, the case calling for filing weighs more and the net push
    goes toward filing."""
    openings = [[1, 7], [1, 8]]  # close, file
    shares = torch.tensor([0.7, -0.7, -0.7, 0.7])  # case A: close right; case B: file right
    mask = torch.ones(4, 3)
    tokens = decision_token_advantages(shares.clone(), shares, mask, [0, 1, 0, 1], openings)
    p_close = 0.9
    p_own = torch.tensor([p_close, 1 - p_close, p_close, 1 - p_close]).unsqueeze(1).expand(4, 3)
    weighted = likelihood_weighted(
        tokens, p_own.log(), decision_token_mask(mask, [0, 1, 0, 1], openings)
    )

    def toward_close(adv: torch.Tensor) -> float:  # close rows' pushes up, file rows' down
        return float(adv[0, 1] + adv[2, 1] - adv[1, 1] - adv[3, 1])

    assert toward_close(tokens) == pytest.approx(0.0)
    assert toward_close(weighted) == pytest.approx(2 * 0.7 * 3 * (2 * 0.1 - 2 * 0.9))
    assert toward_close(weighted) < 0


@pytest.mark.slow
def test_a_decision_credit_trainer_pays_each_branch_its_decision_on_real_replays(
    tmp_path: Path,
) -> None:
    """Real AML rows, real replays: a finished and an unfinished reply in each branch."""
    from trl import GRPOTrainer

    from env.registry import make
    from pipeline.data.steps import reference
    from pipeline.training.config import load_config
    from pipeline.training.trainer import build_trainer
    from rewards.protocol import render_completion

    cfg = load_config(
        ROOT / "configs/cpu_steps.yaml",
        [
            "model.backend=tiny",
            "data.n_train=8",
            "data.decision_branches=true",
            "rewards.branch_credit=decision",
            "rewards.weights.decision=2.0",
            "training.num_generations=4",
            "training.per_device_train_batch_size=8",
            "training.max_steps=1",
            "logging.log_completions=false",
            f"output_dir={tmp_path}",
        ],
    )
    bundle = build_trainer(cfg)
    trainer, tokenizer = bundle.trainer, bundle.tokenizer
    env = make("aml")
    for row in bundle.train_dataset:  # a case where the coin-flip decision is the wrong one
        honest = reference(env, row["task"], row["seed"]).rest(row["cut"])[-1]
        blind = reference(env, row["task"], row["seed"], policy="blind_decision")
        coin = blind.rest(row["cut"])[-1]
        if coin["tool"] != honest["tool"]:
            break
    else:
        pytest.fail("every coin flip matched the reference")
    by_tool = {c["tool"]: render_completion([c]) for c in (honest, coin)}
    texts = [by_tool["close_alert"], by_tool["file_sar"]]
    texts += [t[: len('<tool_call>{"name": "file_sar", "argu')] for t in texts]  # unfinished
    ids = [tokenizer.encode(t, add_special_tokens=False) for t in texts]
    completions = [[{"role": "assistant", "content": t}] for t in texts]
    inputs = [dict(row) for _ in texts]
    trainer.model.train()
    credited = trainer._calculate_rewards(inputs, [row["prompt"]] * 4, completions, ids)
    plain = GRPOTrainer._calculate_rewards(trainer, inputs, [row["prompt"]] * 4, completions, ids)
    decision = list(trainer.reward_func_names).index("decision_reward")
    right = 1 if honest["tool"] == "file_sar" else 0  # close_alert is branch 0 (sorted)
    assert plain[:, decision].tolist()[2 + right] == -1.0  # undecided: paid as wrong
    expected = [-1.0, -1.0]
    expected[right] = 1.0
    assert credited[:, decision].tolist() == expected * 2
    for column in range(credited.shape[1]):
        if column != decision:
            means = [float(torch.nanmean(credited[[k, k + 2], column])) for k in (0, 1)]
            assert means[0] == pytest.approx(means[1], abs=1e-5)
            for k in (0, 1):  # within a branch the replies rank as before
                gap = credited[k, column] - credited[k + 2, column]
                assert float(gap) == pytest.approx(float(plain[k, column] - plain[k + 2, column]))


@pytest.mark.slow
def test_a_decision_tokens_trainer_hands_trl_token_advantages_that_add_up(tmp_path: Path) -> None:
    """Real rows, real branched sampling on a tiny model: TRL's loss gets [rows, tokens]
    advantages whose decision part, spread back over the reply, plus the rest gives TRL's own."""
    from pipeline.decoding.trainer_sampling import branch_openings

    trainer, out = _branched_batch(tmp_path, "decision_tokens")
    advantages, mask = out["advantages"], out["completion_mask"]
    assert advantages.shape == mask.shape and advantages.shape[0] == 8
    scalar = list(trainer._logs["advantages"])[-8:]  # TRL's own, before the split
    openings = branch_openings(trainer._tokenizer, trainer.decision_tools)
    start = 0
    while len({o[start] for o in openings}) == 1:
        start += 1
    mean_length = float(mask.sum(dim=1).float().mean())
    for r in range(8):
        rest = advantages[r, 0]
        others = torch.cat([advantages[r, :start], advantages[r, start + 1 :]])
        assert torch.allclose(others, rest.expand_as(others))
        share = float(advantages[r, start]) / mean_length
        assert share + float(rest) == pytest.approx(scalar[r], abs=1e-5)
    trainer.current_gradient_accumulation_steps = 1  # set by the training loop
    loss = trainer.compute_loss(trainer.model, out)
    loss.backward()  # TRL's loss takes them as they are
    assert torch.isfinite(loss)


@pytest.mark.slow
def test_a_decision_likelihood_trainer_weighs_the_decision_tokens_in_trls_loss(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Real branched sampling on a tiny model: the batch carries the decision-token mask, and
    TRL's loss sees the decision tokens' advantages weighted by the policy's own probabilities
    (the batch itself left as it was), every other token's as before."""
    import trl

    trainer, out = _branched_batch(tmp_path, "decision_likelihood")
    mask = out["decision_token"]
    assert mask.sum(dim=1).tolist() == [1] * 8  # every row opens a branch
    # A tiny random model's replies reach no decision (no credit); give each pair one right and
    # one wrong branch, as a decided group has.
    pushes = torch.tensor([3.0, -3.0] * 4).unsqueeze(1).expand_as(mask)
    out["advantages"] = torch.where(mask, pushes, out["advantages"])
    before = out["advantages"].clone()
    seen = {}
    original = trl.GRPOTrainer._compute_loss

    def spy(self, model, inputs):  # TRL's own loss; what it read once its forward pass ran
        loss = original(self, model, inputs)
        seen["advantages"] = inputs["advantages"]
        return loss

    monkeypatch.setattr(trl.GRPOTrainer, "_compute_loss", spy)
    trainer.current_gradient_accumulation_steps = 1  # set by the training loop
    loss = trainer.compute_loss(trainer.model, out)
    monkeypatch.undo()
    loss.backward()
    assert torch.isfinite(loss)
    assert torch.equal(out["advantages"], before)  # the batch itself is not changed
    with torch.no_grad():
        logps = trainer._get_per_token_logps_and_entropies(
            trainer.model,
            torch.cat([out["prompt_ids"], out["completion_ids"]], dim=1),
            torch.cat([out["prompt_mask"], out["completion_mask"]], dim=1),
            out["completion_ids"].size(1),
        )[0]
    expected = likelihood_weighted(before, logps, mask)
    assert torch.allclose(seen["advantages"], expected, atol=1e-5)
    assert torch.equal(seen["advantages"][~mask], before[~mask])


def _branched_batch(tmp_path: Path, credit: str) -> tuple:
    """A tiny-model trainer with ``credit`` and one scored batch of two cases, four replies each
    (two per decision branch), as its training loop would hand to the loss."""
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
            "logging.log_completions=false",
            f"output_dir={tmp_path}",
        ],
    )
    trainer = build_trainer(cfg).trainer
    rows = list(trainer.train_dataset)[:2]
    trainer.model.train()
    out = trainer._generate_and_score_completions([rows[0]] * 4 + [rows[1]] * 4)
    return trainer, out
