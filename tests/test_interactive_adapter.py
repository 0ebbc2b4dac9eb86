"""The TRL adapter of interactive mode, without a model: tools, schemas, reset, reward, errors."""

from __future__ import annotations

import inspect
import random
from typing import Literal

import pytest
from datasets import Dataset
from transformers.utils import get_json_schema

import env
from env.base import EnvConfig, Grade, ToolEnvironment, ToolError, tool
from env.rollout import play
from pipeline.data.prompts import render_observation
from pipeline.training.interactive import (
    EnvironmentAdapter,
    adapter_class,
    add_environment_column,
    environment_factory,
    tool_methods,
)


class LedgerEnv(ToolEnvironment):
    """Find the odd entry of a ledger: exercises every argument type a tool may take."""

    name = "ledger"
    tasks = ("easy", "hard")
    config_class = EnvConfig

    def _build(self, task: str, rng: random.Random) -> None:
        self.entries = {f"e{i}": rng.randint(1, 99) for i in range(5)}
        self.odd = rng.choice(sorted(self.entries))

    def _opening(self):
        return {"entries": sorted(self.entries)}, "A ledger with one odd entry."

    @tool(kind="investigation")
    def read(self, entry_ids: list[str], limit: int | None = None, verbose: bool = False) -> dict:
        """Read entries of the ledger.

        Args:
            entry_ids: Which entries to read.
            limit: Read at most this many.
            verbose: Add the odd flag (it is hidden, so this only says 'unknown').
        """
        unknown = [e for e in entry_ids if e not in self.entries]
        if unknown:
            raise ToolError(f"unknown entries: {', '.join(unknown)}")
        chosen = entry_ids[:limit] if limit else entry_ids
        return {e: self.entries[e] for e in chosen}

    @tool(kind="action")
    def weigh(self, amount: float, unit: Literal["usd", "eur"] = "usd") -> str:
        """Weigh an amount; useless but typed.

        Args:
            amount: An amount.
            unit: Its currency.
        """
        return f"{amount} {unit}"

    @tool(kind="terminal", terminal=True)
    def report_entry(self, entry_id: str) -> str:
        """Name the odd entry and end the case.

        Args:
            entry_id: The entry you think is odd.
        """
        self._finish(entry_id)
        return "reported"

    def _grade(self) -> Grade:
        right = float(self.decision == self.odd)
        partial = 0.2  # a non-decision part, so "no decision => 0 reward" is really tested
        total = partial + 0.8 * right if self.decision else partial
        return Grade(total=total, components={"decision": right}, decision=self.decision)

    def reveal(self) -> dict:
        return {"odd": self.odd}


def _normalise(schema: dict) -> dict:
    """The parts of a parameter schema a model reads, in one shape for pydantic and transformers
    (texts compared with whitespace collapsed: the generated docstrings are one line per argument)."""
    out = {}
    for name, prop in schema.get("properties", {}).items():
        prop = dict(prop)
        if "anyOf" in prop:  # pydantic's Optional[X]
            kinds = [p for p in prop.pop("anyOf") if p.get("type") != "null"]
            prop.update(kinds[0])
        out[name] = {
            "type": prop.get("type"),
            "items": prop.get("items", {}).get("type"),
            "enum": prop.get("enum"),
            "description": " ".join((prop.get("description") or "").split()),
        }
    return {"properties": out, "required": sorted(schema.get("required", []))}


ENV_CLASSES = [LedgerEnv, *[env.env_class(name) for name in env.names()]]


@pytest.mark.parametrize("env_cls", ENV_CLASSES, ids=lambda c: c.name)
def test_trl_schema_of_each_generated_method_matches_the_tool_spec(env_cls):
    adapter = adapter_class(env_cls)()
    specs = sorted(env_cls.tool_specs(), key=lambda spec: spec.name)  # TRL lists them by name
    for spec, method in zip(specs, tool_methods(adapter), strict=True):
        schema = get_json_schema(method)["function"]
        assert schema["name"] == spec.name
        assert schema["description"] == " ".join(spec.description.split())
        assert _normalise(schema["parameters"]) == _normalise(spec.parameters)


def test_trl_sees_exactly_reset_get_reward_and_the_tools():
    adapter = adapter_class(LedgerEnv)()
    public = {n for n, _ in inspect.getmembers(adapter, inspect.ismethod) if not n.startswith("_")}
    assert public == {"reset", "get_reward", "read", "weigh", "report_entry"}
    silent = adapter_class(LedgerEnv, with_reward=False)()
    public = {n for n, _ in inspect.getmembers(silent, inspect.ismethod) if not n.startswith("_")}
    assert public == {"reset", "read", "weigh", "report_entry"}


def test_reset_rebuilds_the_rows_episode_and_returns_its_opening():
    adapter = adapter_class(LedgerEnv)()
    row = {"prompt": [], "env": "ledger", "task": "hard", "seed": 7, "split": "train"}
    text = adapter.reset(**row)
    fresh = LedgerEnv()
    assert text == render_observation(fresh.reset(seed=7, task="hard"))
    assert (adapter.env.task, adapter.env.seed) == ("hard", 7)
    assert adapter.env.reveal() == fresh.reveal()
    adapter.read(entry_ids=["e1"])
    assert adapter.reset(**row) == text and adapter.env.step_count == 0


def test_reset_refuses_a_row_of_another_environment():
    adapter = adapter_class(LedgerEnv)()
    with pytest.raises(ValueError, match="environment"):
        adapter.reset(env="support", task="easy", seed=1)
    with pytest.raises(ValueError, match="seed"):
        adapter.reset(env="ledger", task="easy")


def test_tool_calls_step_the_environment_and_errors_come_back_as_text():
    adapter = adapter_class(LedgerEnv)()
    adapter.reset(env="ledger", task="easy", seed=3)
    entries = adapter.env.entries
    assert str(entries["e2"]) in adapter.read(entry_ids=["e2"], limit=None)
    answers = [
        adapter.read(entry_ids=["nope"]),  # ToolError from the tool
        adapter.read(entry_ids="e1"),  # wrong type
        adapter.weigh(amount=1.0, colour="red"),  # extra argument
        adapter.weigh(),  # missing argument
    ]
    for answer in answers:
        assert isinstance(answer, str) and "Error:" in answer
    report = adapter.env.report()
    assert report.steps == 5 and report.n_errors == 4 and adapter.env.internal_errors == 0


def test_reward_is_the_grade_after_a_decision_and_zero_without_one():
    adapter = adapter_class(LedgerEnv)()
    adapter.reset(env="ledger", task="easy", seed=11)
    adapter.read(entry_ids=["e0"])
    assert adapter.env.report().grade.total == pytest.approx(0.2)
    assert adapter.get_reward() == 0.0  # the partial grade earns nothing without a decision
    adapter.report_entry(entry_id=adapter.env.odd)
    assert adapter.get_reward() == pytest.approx(1.0)
    assert "Error:" in adapter.read(entry_ids=["e0"])  # the episode is over
    adapter.reset(env="ledger", task="easy", seed=11)
    wrong = next(e for e in adapter.env.entries if e != adapter.env.odd)
    adapter.report_entry(entry_id=wrong)
    assert adapter.get_reward() == pytest.approx(0.2)


def test_factory_for_one_env_is_a_callable_with_its_config():
    factory = environment_factory(["support"], env_configs={"support": {"max_steps": 3}})
    first, second = factory(), factory()
    assert isinstance(first, EnvironmentAdapter) and first is not second
    assert first.env.config.max_steps == 3 and first.env is not second.env
    assert type(first).__name__ == "SupportEnvironmentTools"


def test_factory_for_several_envs_is_trls_dict_form():
    factories = environment_factory(["support", "support"])
    assert callable(factories)  # duplicates collapse to one env
    pair = environment_factory(["support", "gang"])
    assert isinstance(pair, dict) and set(pair) == {"support", "gang"}
    assert pair["gang"]().env.name == "gang"
    with pytest.raises(KeyError):
        environment_factory(["no_such_env"])


def test_add_environment_column_routes_rows_by_env():
    rows = Dataset.from_list([{"env": "support", "seed": 1}, {"env": "gang", "seed": 2}])
    routed = add_environment_column(rows)
    assert routed["environment"] == ["support", "gang"]
    assert add_environment_column(routed) is routed


def test_oracle_calls_through_the_adapter_give_the_oracle_grade():
    support = env.make("support")
    episode = play(support, env.policies("support")["oracle"](0), "medium", 4)
    adapter = environment_factory("support")()
    adapter.reset(env="support", task="medium", seed=4)
    for action in episode.actions:
        getattr(adapter, action.tool)(**action.arguments)
    assert adapter.env.report().model_dump() == episode.report.model_dump()
    assert adapter.get_reward() == episode.report.grade.total > 0
