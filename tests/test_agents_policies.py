"""Model-backed policies: the conversation protocol, a saved checkpoint, an OpenAI-style server.

The protocol tests drive ``ModelPolicy`` with a scripted chat backend (fixed replies) through the
real support environment; the checkpoint tests load the tiny model (and a LoRA adapter on it) from a
tmp folder; the OpenAI test serves ``/v1/chat/completions`` from a local HTTP thread.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest
from transformers.utils import get_json_schema

import env
from env.rollout import play
from pipeline.data.prompts import render_observation, system_prompt
from pipeline.evaluation.backends import GenerationSettings
from pipeline.evaluation.model_policy import NO_CALL, ModelPolicy, make_model_policy
from pipeline.training.interactive import environment_factory, tool_methods

from conftest import tiny_model

TASK, SEED = "medium", 1_000_000_003


class ScriptedBackend:
    """Replies from a list, recording every conversation it was shown."""

    tool_messages_need_ids = False

    def __init__(self, replies: list[str]):
        self.replies = list(replies)
        self.seen: list[tuple[list[dict[str, Any]], Any]] = []

    def tool_schemas(self, env_name: str) -> list[dict[str, Any]]:
        return [s.openai_schema() for s in env.env_class(env_name).tool_specs()]

    def complete(self, messages, tools, seed):
        self.seen.append(([dict(m) for m in messages], tools))
        text = self.replies.pop(0) if self.replies else "I have nothing to add."
        return {"role": "assistant", "content": text}


def _tagged(actions) -> str:
    return "\n".join(
        f"<tool_call>\n{json.dumps({'name': a.tool, 'arguments': a.arguments})}\n</tool_call>"
        for a in actions
    )


@pytest.fixture(scope="module")
def oracle():
    return play(env.make("support"), env.policies("support")["oracle"](0), TASK, SEED)


def test_interactive_policy_feeds_each_turns_results_back(oracle):
    actions = oracle.actions
    backend = ScriptedBackend([_tagged(actions[:2]), *[_tagged([a]) for a in actions[2:]]])
    policy = ModelPolicy(backend, "support", "interactive", 0, GenerationSettings())
    episode = play(env.make("support"), policy, TASK, SEED)
    assert episode.report.model_dump() == oracle.report.model_dump()
    assert len(backend.seen) == len(actions) - 1  # the first reply held two calls
    first, tools = backend.seen[0]
    assert first[0]["content"] == system_prompt("support", "interactive")
    assert first[1]["content"].endswith(render_observation(oracle.observations[0]))
    assert [t["function"]["name"] for t in tools] == [
        s.name for s in env.env_class("support").tool_specs()
    ]
    second, _ = backend.seen[1]
    assert [m["role"] for m in second[2:]] == ["assistant", "tool", "tool"]
    assert second[3]["content"] == render_observation(oracle.observations[1])
    assert second[4]["content"] == render_observation(oracle.observations[2])


def test_plan_policy_writes_one_plan_and_replays_it(oracle):
    backend = ScriptedBackend(["<think>refund it</think>\n" + _tagged(oracle.actions)])
    policy = ModelPolicy(backend, "support", "plan", 0, GenerationSettings())
    episode = play(env.make("support"), policy, TASK, SEED)
    assert episode.report.grade.total == oracle.report.grade.total
    assert len(backend.seen) == 1
    messages, tools = backend.seen[0]
    assert tools is None and messages[0]["content"] == system_prompt("support", "plan")
    assert render_observation(oracle.observations[0]) in messages[1]["content"]


def test_a_model_without_calls_gets_told_and_the_step_limit_ends_the_episode():
    backend = ScriptedBackend(["Hello!", "Still thinking.", "Hmm."])
    settings = GenerationSettings(max_idle_turns=2)
    policy = ModelPolicy(backend, "support", "interactive", 0, settings)
    episode = play(env.make("support", max_steps=6), policy, TASK, SEED)
    assert episode.report.steps == 6 and not episode.report.decision_reached
    assert {a.tool for a in episode.actions} == {NO_CALL}
    assert "unknown tool" in episode.observations[1].error
    assert len(backend.seen) == 2  # then it stops generating
    told = backend.seen[1][0][-1]
    assert told["role"] == "user" and told["content"].startswith(
        "Your reply contained no tool call"
    )


def test_a_model_stuck_on_rejected_calls_stops_after_its_idle_turns():
    bad = '<tool_call>{"name": "fetch_user_data", "arguments": {"customer_id": {"type": "string"}}}</tool_call>'
    unknown = '<tool_call>{"name": "refund_everything", "arguments": {}}</tool_call>'
    backend = ScriptedBackend([bad, unknown, bad, unknown])
    settings = GenerationSettings(max_idle_turns=2)
    policy = ModelPolicy(backend, "support", "interactive", 0, settings)
    episode = play(env.make("support", max_steps=6), policy, TASK, SEED)
    assert episode.report.steps == 6 and not episode.report.decision_reached
    assert len(backend.seen) == 2  # two turns in a row ran nothing: it stops generating
    assert "invalid arguments" in episode.observations[1].error
    assert "unknown tool" in episode.observations[2].error


def test_a_turn_whose_call_ran_resets_the_idle_count(oracle):
    first = oracle.actions[0]
    good = _tagged([first])
    backend = ScriptedBackend(["Hello!", good, "Hmm.", good, "Still?", "No."])
    settings = GenerationSettings(max_idle_turns=2)
    policy = ModelPolicy(backend, "support", "interactive", 0, settings)
    play(env.make("support", max_steps=8), policy, TASK, SEED)
    assert len(backend.seen) == 6  # idle, ran, idle, ran, idle, idle: then it stops


# ----- checkpoints ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    from peft import LoraConfig, get_peft_model

    root = tmp_path_factory.mktemp("ckpt")
    base, tokenizer = tiny_model(seed=3, style="full")
    base.save_pretrained(root / "full")
    tokenizer.save_pretrained(root / "full")
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
    from transformers import AutoModelForCausalLM

    adapter = get_peft_model(AutoModelForCausalLM.from_pretrained(root / "full"), lora)
    adapter.save_pretrained(root / "adapter")
    return root


def _play_checkpoint(folder, mode="interactive", seed=0, **settings):
    policy = make_model_policy(f"checkpoint:{folder}", "support", mode, seed, **settings)
    return policy, play(env.make("support", max_steps=3), policy, TASK, SEED)


def test_checkpoint_policy_plays_a_full_episode_greedily(checkpoints):
    settings = {"max_new_tokens": 6, "max_idle_turns": 2}
    policy, episode = _play_checkpoint(checkpoints / "full", **settings)
    assert episode.report.steps == 3 and episode.report is not None
    replies = [m["content"] for m in policy.messages if m["role"] == "assistant"]
    assert len(replies) == 2 and all(isinstance(r, str) and r for r in replies)
    again, _ = _play_checkpoint(checkpoints / "full", seed=99, **settings)
    assert again.messages == policy.messages  # greedy ignores the seed
    # The tools in the prompt are exactly those TRL renders in interactive training.
    adapter = environment_factory("support", with_reward=False)()
    trl_schemas = [get_json_schema(method) for method in tool_methods(adapter)]
    assert policy.backend.tool_schemas("support") == trl_schemas


def test_checkpoint_sampling_is_seeded(checkpoints):
    settings = {"max_new_tokens": 8, "max_idle_turns": 1, "temperature": 1.0}
    a, _ = _play_checkpoint(checkpoints / "full", seed=1, **settings)
    b, _ = _play_checkpoint(checkpoints / "full", seed=1, **settings)
    c, _ = _play_checkpoint(checkpoints / "full", seed=2, **settings)
    assert a.messages == b.messages
    assert a.messages[2]["content"] != c.messages[2]["content"]


def test_peft_adapter_folder_loads_on_its_base_and_plans(checkpoints):
    policy, episode = _play_checkpoint(checkpoints / "adapter", mode="plan", plan_max_new_tokens=6)
    assert policy.messages[0]["content"] == system_prompt("support", "plan")
    assert len(policy.messages) == 3 and episode.report.steps == 3
    assert type(policy.backend.model).__name__.startswith("Peft")


def test_unknown_spec_and_missing_folder_fail_clearly(tmp_path):
    with pytest.raises(ValueError, match="checkpoint:PATH or openai:MODEL"):
        make_model_policy("hub:some/model", "support")
    with pytest.raises(FileNotFoundError):
        make_model_policy(f"checkpoint:{tmp_path / 'missing'}", "support")


# ----- OpenAI-compatible endpoint ------------------------------------------------------------


class _ChatServer(BaseHTTPRequestHandler):
    """Fails the first request (500), then answers with native tool calls from ``script``."""

    requests: list[dict[str, Any]] = []
    script: list[list[dict[str, Any]]] = []

    def do_POST(self):  # noqa: N802 - http.server's naming
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(body)
        if len(type(self).requests) == 1:
            self.send_response(500)
            self.end_headers()
            return
        calls = type(self).script.pop(0) if type(self).script else []
        message = {"role": "assistant", "content": None if calls else "done"}
        if calls:
            message["tool_calls"] = [
                {
                    "id": f"call_{len(type(self).requests)}_{i}",
                    "type": "function",
                    "function": {"name": c["tool"], "arguments": json.dumps(c["arguments"])},
                }
                for i, c in enumerate(calls)
            ]
        payload = {
            "id": "x",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        }
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def test_openai_policy_retries_and_answers_native_tool_calls(oracle, monkeypatch):
    _ChatServer.requests = []
    _ChatServer.script = [[a.model_dump(include={"tool", "arguments"})] for a in oracle.actions]
    server = HTTPServer(("127.0.0.1", 0), _ChatServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("API_BASE_URL", f"http://127.0.0.1:{server.server_port}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        policy = make_model_policy("openai:scripted-model", "support", "interactive", 5)
        episode = play(env.make("support"), policy, TASK, SEED)
    finally:
        server.shutdown()
    assert episode.report.grade.total == oracle.report.grade.total
    requests = _ChatServer.requests
    assert len(requests) == len(oracle.actions) + 1  # one retried failure
    assert requests[0] == requests[1] and requests[1]["seed"] == 5
    assert [t["function"]["name"] for t in requests[1]["tools"]][0] == oracle.actions[0].tool
    tool_message = requests[2]["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == "call_2_0"
    assert tool_message["content"] == render_observation(oracle.observations[1])


def test_openai_policy_needs_a_key(monkeypatch):
    for name in ("OPENAI_API_KEY", "HF_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ValueError, match="OPENAI_API_KEY or HF_TOKEN"):
        make_model_policy("openai:keyless-model", "support")


def test_checkpoint_replies_reuse_the_cache_of_the_conversation_so_far(checkpoints):
    from pipeline.evaluation.backends import CheckpointBackend, GenerationSettings

    settings = GenerationSettings(max_new_tokens=6, plan_max_new_tokens=6)
    warm, fresh = (CheckpointBackend(checkpoints / "full", settings) for _ in range(2))
    first = [
        {"role": "system", "content": "You triage tickets."},
        {"role": "user", "content": "Hi"},
    ]
    reply = warm.complete(first, None, 0)
    cached_after_first = len(warm._cached)
    second = [*first, reply, {"role": "user", "content": "Go on."}]
    assert warm.complete(second, None, 0) == fresh.complete(second, None, 0)
    text = warm.tokenizer.apply_chat_template(second, add_generation_prompt=True, tokenize=False)
    prompt = warm.tokenizer(text, add_special_tokens=False)["input_ids"]
    assert len(warm._cached) >= len(prompt) > cached_after_first  # one cache, grown, not rebuilt
