"""The rate between two decisions, held apart from the adapter: an offset on their log-odds.

A reply decides where its call's name parts: after ``<tool_call>{"name": "`` the model writes
``close`` (``close_alert``) or ``file`` (``file_sar``). Call ``d`` the log-odds of the first over
the second there. How often a policy closes across all cases (its rate) and which cases it closes
(its reading of the evidence) are both moves of ``d``, and on a small model the cases' gradients
of ``d`` point almost the same way (``benchmarks/decision_gradients.py``): an update that should
separate cases mostly shifts every case together. ``rewards.decision_rate: held`` therefore
learns the rate as one scalar of its own, ``offset``, and the adapter's updates are kept off it
(pipeline/training/rate_hold.py). The policy's decision between the two is then ``d + offset``:
this module applies that rule wherever a reply is decoded, and saves it beside the adapter.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

RATE_FILE = "decision_rate.json"


@dataclass
class DecisionRate:
    """Where two decisions part and the learned offset on their log-odds (first over second)."""

    opening: list[int]
    """Tokens every decision's call starts with, up to the parting token."""
    first: int
    """The first decision's parting token (sorted tool order: ``close_alert``'s)."""
    second: int
    """The second decision's parting token (``file_sar``'s)."""
    offset: float = 0.0
    """Added to ``logit(first) - logit(second)`` wherever the policy decides."""
    tools: tuple[str, str] = ("", "")

    @classmethod
    def of(cls, tokenizer: Any, tools: Sequence[str], offset: float = 0.0) -> DecisionRate:
        """The parting point of two terminal tools' calls as ``tokenizer`` writes them."""
        from pipeline.decoding.trainer_sampling import branch_openings, shared_opening

        if len(set(tools)) != 2:
            raise ValueError(f"a decision rate parts exactly two decisions, got {sorted(tools)}")
        first, second = branch_openings(tokenizer, tools)
        k = shared_opening([first, second])
        if k == min(len(first), len(second)):
            raise ValueError(f"the calls of {sorted(tools)} do not part at a token")
        names = tuple(sorted(tools))
        return cls(list(first[:k]), first[k], second[k], offset, names)  # type: ignore[arg-type]

    def at_decision(self, reply: Sequence[int]) -> bool:
        """Whether the next token of ``reply`` is where a decision's call name parts."""
        n = len(self.opening)
        return len(reply) >= n and list(reply[len(reply) - n :]) == self.opening

    def log_odds(self, logits: Any) -> Any:
        """``d + offset`` from a position's logits (``[..., vocab]``)."""
        return logits[..., self.first] - logits[..., self.second] + self.offset

    def decide(self, reply: Sequence[int], token: int, logits: Any) -> int:
        """``token`` as decoded, unless it is one of the two decisions at their parting point:
        then the decision whose side ``d + offset`` falls on (the greedy rule)."""
        if token not in (self.first, self.second) or not self.at_decision(reply):
            return token
        return self.first if float(self.log_odds(logits)) > 0 else self.second

    def save(self, folder: str | Path) -> Path:
        path = Path(folder) / RATE_FILE
        data = asdict(self) | {"tools": list(self.tools)}
        path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        return path

    @classmethod
    def load(cls, folder: str | Path) -> DecisionRate | None:
        """The rate saved with a checkpoint, or None (a policy without a held rate)."""
        path = Path(folder) / RATE_FILE
        if not path.is_file():
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
        try:
            return cls(
                [int(t) for t in data["opening"]],
                int(data["first"]),
                int(data["second"]),
                float(data["offset"]),
                tuple(data.get("tools", ("", ""))),  # type: ignore[arg-type]
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{path}: not a saved decision rate ({exc})") from None


Decide = Callable[[Sequence[int], int, Any], int]
