"""The shared contract (env.base) on a minimal environment defined here."""

from __future__ import annotations

import random
from typing import Literal

from env.base import EnvConfig, Grade, ToolEnvironment, ToolError, tool

from conftest import call


class CoinEnv(ToolEnvironment):
    """Guess a hidden coin after looking at it: the smallest world that uses the contract."""

    name = "coin"
    tasks = ("easy",)
    config_class = EnvConfig

    def _build(self, task: str, rng: random.Random) -> None:
        self.coin = rng.choice(["heads", "tails"])
        self.looked = False

    def _opening(self):
        return {"hint": "a coin lies on the table"}, "A coin."

    @tool(kind="investigation")
    def look(self, times: int = 1) -> dict:
        """Look at the coin.

        Args:
            times: How many times to look.
        """
        if times > 3:
            raise ToolError("you may look at most 3 times")
        self.looked = True
        return {"coin": self.coin}

    @tool(kind="terminal", terminal=True)
    def guess(self, side: Literal["heads", "tails"]) -> str:
        """Guess the side.

        Args:
            side: heads or tails.
        """
        self._finish(side)
        return "guessed"

    def _grade(self) -> Grade:
        right = float(self.decision == self.coin)
        return Grade(total=right, components={"decision": right}, decision=self.decision)

    def reveal(self) -> dict:
        return {"coin": self.coin}


def test_specs_come_from_signatures_and_docstrings():
    spec = CoinEnv.tool_specs_by_name()["look"]
    assert spec.description == "Look at the coin."
    assert spec.parameters["properties"]["times"]["type"] == "integer"
    assert spec.parameters["properties"]["times"]["description"] == "How many times to look."
    assert spec.signature() == "look(times: int = optional)"
    guess = CoinEnv.tool_specs_by_name()["guess"]
    assert guess.terminal and guess.parameters["required"] == ["side"]
    assert guess.openai_schema()["function"]["name"] == "guess"


def test_bad_agent_input_is_an_error_observation_with_a_penalty():
    env = CoinEnv()
    env.reset(seed=1)
    cases = [
        call("fly"),
        call("look", times="many"),
        call("look", speed=2),
        call("guess"),
        call("look", times=9),
        call("look", times=1, x="y" * 10_000),
        {"tool": 5},
    ]
    for action in cases:
        obs = env.step(action)
        assert obs.error, action
        assert obs.reward < env.config.action_cost
        assert not obs.done
    assert env.internal_errors == 0


def test_terminal_tool_ends_with_grade_and_repeat_is_penalised():
    env = CoinEnv()
    env.reset(seed=3)
    first = env.step(call("look"))
    again = env.step(call("look"))
    assert again.reward < first.reward
    coin = first.result["coin"]
    final = env.step(call("guess", side=coin))
    assert final.done and final.grade.total == 1.0 and final.grade.decision == coin
    assert env.step(call("look")).error
    report = env.report()
    assert report.decision_reached and report.n_repeats == 1 and len(report.step_rewards) == 3


def test_step_limit_ends_without_decision():
    env = CoinEnv(max_steps=2)
    env.reset(seed=0)
    env.step(call("look"))
    obs = env.step(call("look", times=2))
    assert obs.done and obs.grade.decision is None
    assert not env.report().decision_reached


def test_same_seed_same_world_and_state_hides_truth():
    a, b = CoinEnv(), CoinEnv()
    assert [a.reset(seed=s).model_dump_json() for s in range(5)] == [
        b.reset(seed=s).model_dump_json() for s in range(5)
    ]
    assert "coin" not in a.state.model_dump_json().replace('"env":"coin"', "")
