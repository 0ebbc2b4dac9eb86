"""Decision-only credit between decision branches (``rewards.branch_credit: decision``).

With ``data.decision_branches`` every GRPO group holds the same case with its replies split
across the decisions (``pipeline.decoding.trainer_sampling``): half open ``close_alert``, half
``file_sar``. The advantage of a reply is its summed reward minus the group's mean, so whatever
differs on average between the branches trains the opening token, the decision itself. With the
plain sum (``total``) that is more than the decision: an unfinished reply has no decision and is
paid as a wrong one, and a filing's longer call is left unfinished more often than a closing's;
any format or execution gap between the two calls counts too. Those gaps are the same on every
case, so they teach the rate of each decision, not its dependence on the evidence (what the tenth
steps run learned, benchmarks/RESULTS.md).

``decision`` credit makes the decision the only difference between branches:

- A branch row that reached no decision is credited with its branch's decision anyway: the
  opening named it, and its sibling rows say whether it was right (the same decision on the same
  case is right or wrong for all of them; the decisions exclude each other, so one known right
  makes the others wrong, and all others known wrong makes the last right). Its failure to finish
  still costs it through the format and execution components, against its own branch.
- Every other component is centred within its branch and given the group's mean back: within a
  branch the replies are ranked exactly as before, but no branch gains or loses on average by them.

A group where no row decided is left as it is (no branch knows its credit), and so is a row no
component could score (the row, not the model, broke: TRL gives it no advantage). The transform
runs on the reward matrix TRL sums and normalizes; the logged per-component means stay those of
the replies, except that a credited row logs its branch's decision.

``decision_tokens`` credit goes one step further, to the tokens. With ``decision`` a reply's one
advantage still trains every token of it: the decision's share lands on the ~100-190 tokens of the
call's arguments as much as on the tool name that made the decision, and TRL's loss (``dapo``:
summed over tokens, divided by the batch's token count) gives the name tokens ~1% of the gradient,
the rest being the arguments' share, noise as far as the decision is concerned (run 11 moved the
opening log-odds of no case by its evidence, benchmarks/RESULTS.md "decision_margin"). Here each
reply's advantage is split (``decision_share``): the decision's share goes to the one token where
the branch openings part (``close`` vs ``file``), the rest of the advantage (the within-branch
components) trains every other token. The decision token's share is scaled by the mean length of
the batch's branch rows, so that the batch's decision weighs as much as it did spread over its
replies; the same scale for every row, not the row's own length: the length of a reply depends on
its case (a closing's reason runs longer on some cases than on others), and a push toward a
decision weighted by it is larger on those cases whichever decision is right there, which trains
the rate of that decision rather than its reading (the drift of runs 13 and 14, which scaled by
the row's own length). The tokens after the parting one (``_alert``, ``_sar``) follow from it
with probability ~1 and get the rest like the others. TRL takes ``[rows, tokens]`` advantages as
they are (``_compute_loss``).

``decision_likelihood`` credit is ``decision_tokens`` with each parting token's push weighted by
how wrong the policy still is on that case: ``2 P(wrong decision)``, read at the loss from the
row's own probability of its parting token (the right branch's row ``2 (1 - p)``, the wrong
branch's ``2 p``). With the two decisions holding that token's mass, a group's pair of pushes is
then the gradient of the log-likelihood of the right decision between the two, instead of the
same push on every case. Why it matters: at the parting token the cases' gradients point almost
the same way (cosine ~0.98 between the clean and the suspicious cases' sums,
``benchmarks/decision_gradients.py``), so with equal pushes a balanced batch's update is the
small difference of two large, nearly equal vectors, and its effect on every case's log-odds
together (the rate) is of the size of its effect on their difference (the reading), with a sign
set by small differences between the cases' gradients. Nothing pulls the rate back. Weighted,
a drift toward one decision makes the cases calling for the other weigh more (their policy is
now wronger), and the rate is pulled back, as a logistic regression's bias is; a case the policy
already gets right with confidence stops pushing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from pipeline.decoding.trainer_sampling import shared_opening

RIGHT, WRONG = 1.0, -1.0  # rewards.decision_reward of a right / wrong decision


def branch_of(completion: Sequence[int], openings: Sequence[Sequence[int]]) -> int | None:
    """Index of the opening ``completion`` starts with, or None (not a branch row)."""
    for k, opening in enumerate(openings):
        if opening and list(completion[: len(opening)]) == list(opening):
            return k
    return None


def decision_credit(
    rewards: Any,
    branches: Sequence[int | None],
    decided: Sequence[bool],
    decision: int,
    group: int,
    n_branches: int,
) -> Any:
    """``rewards`` ([rows, components], groups of ``group`` consecutive rows) with decision-only
    credit between branches (module docstring). ``decision`` is the decision component's column;
    ``branches`` each row's branch (None: not branched), ``decided`` whether its episode reached a
    decision. Returns a new tensor; rows outside any branch are left as they are."""
    out = rewards.clone()
    for start in range(0, out.shape[0], group):
        rows = range(start, min(start + group, out.shape[0]))
        if any(branches[r] is None for r in rows):
            continue
        known = _known_decisions(out, rows, branches, decided, decision, n_branches)
        if not known:
            continue
        for r in rows:
            unscorable = bool(out[r].isnan().all())  # TRL gives such a row no advantage: kept
            if not decided[r] and branches[r] in known and not unscorable:
                out[r, decision] = known[branches[r]]
        _centre_within_branches(out, rows, branches, decision)
    return out


def _known_decisions(
    rewards: Any,
    rows: range,
    branches: Sequence[int | None],
    decided: Sequence[bool],
    decision: int,
    n_branches: int,
) -> dict[int, float]:
    """Branch -> its decision's reward, from the rows that decided, then by exclusion."""
    known: dict[int, float] = {}
    for r in rows:
        if decided[r] and not math.isnan(float(rewards[r, decision])):
            known[branches[r]] = float(rewards[r, decision])
    if not known:
        return known
    if any(v == RIGHT for v in known.values()):
        return {k: known.get(k, WRONG) for k in range(n_branches)}
    missing = [k for k in range(n_branches) if k not in known]
    if len(missing) == 1:  # every other decision is wrong: this one is right
        known[missing[0]] = RIGHT
    return known


def _centre_within_branches(
    rewards: Any, rows: range, branches: Sequence[int | None], decision: int
) -> None:
    """Give each non-decision component the same mean in every branch: the group's (in place)."""
    import torch

    index = torch.tensor(list(rows))
    labels = torch.tensor([branches[r] for r in rows])
    for column in range(rewards.shape[1]):
        if column == decision:
            continue
        values = rewards[index, column]
        group_mean = torch.nanmean(values)
        for k in labels.unique().tolist():
            mine = index[labels == k]
            branch_mean = torch.nanmean(rewards[mine, column])
            if not torch.isnan(branch_mean):
                rewards[mine, column] = rewards[mine, column] - branch_mean + group_mean


def decision_share(
    rewards: Any,
    weights: Any,
    decision: int,
    group: int,
    scale: str,
    branches: Sequence[int | None],
) -> Any:
    """Per row, the decision column's share of the advantage TRL derives from ``rewards``
    ([rows, components], weighted by ``weights``; ``scale``: TRL's ``scale_rewards``): the
    decision's weighted deviation from its group's mean over the rows TRL scores, divided as TRL
    divides the summed deviation. 0 for rows outside a branch and for unscorable rows."""
    import torch
    from trl.trainer.utils import nanstd

    values = torch.nan_to_num(rewards[:, decision]) * float(weights[decision])  # nansum's zeros
    totals = (rewards * weights.unsqueeze(0)).nansum(dim=1)
    unscorable = rewards.isnan().all(dim=1)
    totals[unscorable], values[unscorable] = torch.nan, torch.nan
    values = values - torch.nanmean(values.view(-1, group), dim=1).repeat_interleave(group)
    if scale == "group":
        std = nanstd(totals.view(-1, group), dim=1).repeat_interleave(group)
        values = values / (std + 1e-4)
    elif scale == "batch":
        values = values / (nanstd(totals) + 1e-4)
    in_branch = torch.tensor([b is not None for b in branches], device=values.device)
    return torch.where(in_branch, torch.nan_to_num(values), torch.zeros_like(values))


def decision_token_advantages(
    advantages: Any,
    shares: Any,
    completion_mask: Any,
    branches: Sequence[int | None],
    openings: Sequence[Sequence[int]],
) -> Any:
    """``[rows, tokens]`` advantages: a branch row's decision token (the first where the openings
    part) gets its decision share times the mean length of the branch rows, its other tokens the
    rest of its advantage; rows outside a branch keep their advantage on every token."""
    common = shared_opening(openings)
    out = (advantages - shares).unsqueeze(1).repeat(1, completion_mask.shape[1])
    rows = [row for row, branch in enumerate(branches) if branch is not None]
    if rows:
        scale = completion_mask[rows].sum(dim=1).float().mean()
        for row in rows:
            out[row, common] = shares[row] * scale
    return out


def likelihood_weighted(advantages: Any, logps: Any, decision_token: Any) -> Any:
    """``advantages`` ([rows, tokens]) with each decision token's push weighted by ``2 P(wrong
    decision)``: ``2 (1 - p)`` where the push is positive (the right branch), ``2 p`` where it is
    negative (the wrong one), ``p`` the row's probability of the token (``logps``, detached);
    every other token as it was. At p = 0.5 the weights are 1 (``decision_tokens`` credit)."""
    import torch

    p = logps.detach().exp()
    weight = torch.where(advantages > 0, 2.0 * (1.0 - p), 2.0 * p)
    return torch.where(decision_token.bool(), advantages * weight, advantages)


def decision_token_mask(
    completion_mask: Any, branches: Sequence[int | None], openings: Sequence[Sequence[int]]
) -> Any:
    """``[rows, tokens]`` booleans: True at each branch row's decision token."""
    out = completion_mask.new_zeros(completion_mask.shape, dtype=bool)
    common = shared_opening(openings)
    for row, branch in enumerate(branches):
        if branch is not None:
            out[row, common] = True
    return out


def branch_credit_trainer(base: type, tokens: bool = False, likelihood: bool = False) -> type:
    """A subclass of ``base`` (the branching GRPOTrainer of ``trainer_sampling``) whose reward
    matrix gets ``decision_credit``; with ``tokens`` its advantages are split over the tokens
    (``decision_tokens`` credit), with ``likelihood`` too the decision tokens' pushes are weighted
    at the loss by ``2 P(wrong decision)`` (``decision_likelihood``, module docstring)."""
    if likelihood and not tokens:
        raise ValueError("likelihood weighting acts on the decision tokens: it needs tokens=True")
    from accelerate.utils import gather_object

    from pipeline.decoding.trainer_sampling import branch_openings
    from rewards import decisions_reached

    class DecisionCreditGRPOTrainer(base):  # type: ignore[misc, valid-type]
        """GRPOTrainer crediting only the decision between decision branches (module docstring)."""

        decision_tokens = tokens
        decision_likelihood = likelihood

        def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
            rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
            openings = branch_openings(self._tokenizer, self.decision_tools)
            names = list(self.reward_func_names)
            columns = [k for k in inputs[0] if k not in ("prompt", "completion", "completion_ids")]
            kwargs = {k: [row[k] for row in inputs] for k in columns}
            decided = gather_object(decisions_reached(completions, **kwargs))
            branches = gather_object([branch_of(ids, openings) for ids in completion_ids_list])
            group = self.num_generations if self.model.training else self.num_generations_eval
            column = names.index("decision_reward")
            credited = decision_credit(rewards, branches, decided, column, group, len(openings))
            if self.decision_tokens:
                weights = self.reward_weights.to(credited.device)
                shares = decision_share(
                    credited, weights, column, group, self.scale_rewards, branches
                )
                self._token_split = (shares, branches, openings)
            return credited

        def _generate_and_score_completions(self, inputs):
            out = super()._generate_and_score_completions(inputs)
            if not self.decision_tokens:
                return out
            shares, branches, openings = self._token_split
            rows = len(out["advantages"])
            local = slice(
                self.accelerator.process_index * rows, (self.accelerator.process_index + 1) * rows
            )
            out["advantages"] = decision_token_advantages(
                out["advantages"],
                shares[local].to(out["advantages"].device),
                out["completion_mask"],
                branches[local],
                openings,
            )
            if self.decision_likelihood:  # TRL shuffles and splits it with the other tensors
                out["decision_token"] = decision_token_mask(
                    out["completion_mask"], branches[local], openings
                )
            return out

        def _compute_loss(self, model, inputs):
            if not self.decision_likelihood or "decision_token" not in inputs:
                return super()._compute_loss(model, inputs)
            # TRL reads the advantages after the loss's forward pass; the weights need that pass's
            # probabilities, so its first log-probability call (whichever subclass provides it:
            # context_grad's does not call up) weighs a copy of the batch: TRL may use one batch
            # for several iterations, each weighted afresh.
            inputs = dict(inputs)
            scored = self._get_per_token_logps_and_entropies

            def weighed(*args, **kwargs):
                out = scored(*args, **kwargs)
                if self.__dict__.pop("_get_per_token_logps_and_entropies", None) is not None:
                    inputs["advantages"] = likelihood_weighted(
                        inputs["advantages"], out[0], inputs["decision_token"]
                    )
                return out

            self._get_per_token_logps_and_entropies = weighed
            try:
                return super()._compute_loss(model, inputs)
            finally:
                self.__dict__.pop("_get_per_token_logps_and_entropies", None)

    return DecisionCreditGRPOTrainer
