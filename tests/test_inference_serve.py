"""scripts/serve_openai.py speaks OpenAI's chat-completions protocol (tiny model, real client)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from serve_openai import _template_messages, create_app, split_tool_calls  # noqa: E402

from env.server import ServerThread  # noqa: E402


def test_tool_call_blocks_become_openai_tool_calls():
    text = 'thinking <tool_call>{"name": "look", "arguments": {"n": 2}}</tool_call> bye'
    content, calls = split_tool_calls(text)
    assert content == "thinking  bye"
    assert calls[0]["function"] == {"name": "look", "arguments": '{"n": 2}'}
    assert calls[0]["type"] == "function" and calls[0]["id"].startswith("call_0_")
    assert split_tool_calls("<tool_call>{broken</tool_call>") == (
        "<tool_call>{broken</tool_call>",
        [],
    )


def test_assistant_tool_calls_go_back_to_the_template_as_objects():
    messages = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "look", "arguments": '{"n": 1}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]
    out = _template_messages(messages)
    assert out[0]["content"] == ""
    assert out[0]["tool_calls"][0]["function"]["arguments"] == {"n": 1}


@pytest.fixture(scope="module")
def tiny_server():
    from transformers import AutoTokenizer

    from pipeline.model import apply_tool_chat_template, build_tiny_model, smollm2_path

    tokenizer = apply_tool_chat_template(AutoTokenizer.from_pretrained(smollm2_path()))
    model = build_tiny_model(tokenizer)
    app = create_app(model, tokenizer, "tiny")
    with ServerThread(app) as url:
        yield url, app


def test_openai_client_gets_a_well_formed_completion(tiny_server):
    from openai import OpenAI

    tiny_server, _ = tiny_server
    client = OpenAI(base_url=f"{tiny_server}/v1", api_key="x", max_retries=0)
    tools = [
        {
            "type": "function",
            "function": {
                "name": "look",
                "description": "Look.",
                "parameters": {"type": "object", "properties": {}},
            },
        }
    ]
    reply = client.chat.completions.create(
        model="tiny",
        messages=[{"role": "user", "content": "hi"}],
        tools=tools,
        max_tokens=5,
        temperature=0.7,
        seed=3,
    )
    assert reply.choices[0].message.role == "assistant"
    assert reply.choices[0].finish_reason in ("stop", "length", "tool_calls")
    assert 0 < reply.usage.completion_tokens <= 5
    again = client.chat.completions.create(
        model="tiny",
        messages=[{"role": "user", "content": "hi"}],
        tools=tools,
        max_tokens=5,
        temperature=0.7,
        seed=3,
    )
    assert again.choices[0].message.content == reply.choices[0].message.content
    assert [m.id for m in client.models.list().data] == ["tiny"]


def test_bad_requests_are_clear_errors(tiny_server):
    import httpx

    tiny_server, _ = tiny_server
    empty = httpx.post(f"{tiny_server}/v1/chat/completions", json={"messages": []})
    assert empty.status_code == 400 and "empty" in empty.json()["detail"]
    wrong = httpx.post(f"{tiny_server}/v1/chat/completions", json={"messages": "hi"})
    assert wrong.status_code == 422
    assert json.loads(httpx.get(f"{tiny_server}/health").text)["status"] == "healthy"


def test_a_client_that_times_out_stops_its_generation(tiny_server):
    import time

    import httpx

    url, app = tiny_server
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4096}
    started = time.monotonic()
    with pytest.raises(httpx.TimeoutException):
        httpx.post(f"{url}/v1/chat/completions", json=body, timeout=0.5)
    quick = httpx.post(f"{url}/v1/chat/completions", json={**body, "max_tokens": 2}, timeout=120)
    assert quick.status_code == 200
    assert app.state.cancelled == 1, (
        f"abandoned generation ran on ({time.monotonic() - started:.1f}s)"
    )
