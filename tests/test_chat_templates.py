"""The compact tool template: signature lines instead of JSON schemas, Qwen2.5 everywhere else."""

from __future__ import annotations

import re

import pytest

import env
from pipeline.data.dataset import build_dataset
from pipeline.training.chat_templates import apply_tool_chat_template, compact_template, ours
from pipeline.training.interactive import tool_schemas
from pipeline.training.warmup import heuristic_conversations

from conftest import smollm2_tokenizer


@pytest.fixture(scope="module")
def tokenizers():
    return smollm2_tokenizer("full"), smollm2_tokenizer("compact")


def _conversation() -> list[dict]:
    """An AML-easy training episode of the heuristic as the tool conversation TRL holds."""
    rows = build_dataset(["aml"], ["easy"], n=1, split="train", mode="interactive")
    return heuristic_conversations(rows)[0]["messages"]


def _tool_block(text: str) -> str:
    return re.search(r"<tools>\n(.*?)\n</tools>", text, re.S).group(1)


def test_compact_lists_each_tool_as_its_signature(tokenizers) -> None:
    _, compact = tokenizers
    text = compact.apply_chat_template(
        _conversation()[:2], tools=tool_schemas("aml"), tokenize=False
    )
    lines = _tool_block(text).splitlines()
    specs = sorted(env.env_class("aml").tool_specs(), key=lambda spec: spec.name)  # TRL's order
    assert len(lines) == len(specs) == 18
    # ToolSpec.signature, with enums as JSON strings (the form the call's arguments take)
    for line, spec in zip(lines, specs, strict=True):
        assert line == "- " + re.sub(r"'([^']*)'", r'"\1"', spec.signature())
    by_name = {line[2:].split("(")[0]: line for line in lines}
    assert by_name["review_alert"] == "- review_alert(alert_id: str)"
    assert "min_amount: float = optional" in by_name["query_transactions"]
    assert by_name["file_sar"].endswith("entities_involved: list[str])")
    assert '"type"' not in _tool_block(text)


def test_compact_is_qwen2_5_outside_the_tool_list_and_a_third_of_its_tokens(tokenizers) -> None:
    full, compact = tokenizers
    messages, tools = _conversation(), tool_schemas("aml")
    texts = [
        t.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)
        for t in (full, compact)
    ]
    outside = [re.sub(r"<tools>\n.*?\n</tools>", "<tools/>", t, flags=re.S) for t in texts]
    assert outside[0] == outside[1]
    calls = texts[1].count('<tool_call>\n{"name": "')
    assert calls == sum(m["role"] == "assistant" for m in messages) > 3
    lengths = [len(t(_tool_block(x))["input_ids"]) for t, x in zip(tokenizers, texts, strict=True)]
    assert lengths[1] < lengths[0] / 3  # AML: ~2.0k schema tokens -> ~0.5k
    without = [t.apply_chat_template(messages[:2], tokenize=False) for t in tokenizers]
    assert without[0] == without[1]  # no tools: plan prompts are untouched


def test_trl_accepts_compact_for_tools_and_parses_its_calls(tokenizers) -> None:
    from trl.chat_template_utils import (
        has_generation_markers,
        is_chat_template_prefix_preserving,
        supports_tool_calling,
    )

    _, compact = tokenizers
    assert supports_tool_calling(compact)
    assert is_chat_template_prefix_preserving(compact)
    assert has_generation_markers(compact.chat_template)  # SFT's assistant-only loss
    call = '<tool_call>\n{"name": "review_alert", "arguments": {"alert_id": "AL-7"}}\n</tool_call>'
    parsed = compact.parse_response(call + "<|im_end|>", prefix="")
    assert parsed["tool_calls"][0]["function"] == {
        "name": "review_alert",
        "arguments": {"alert_id": "AL-7"},
    }


def test_only_our_templates_are_replaced_and_styles_are_checked(tokenizers) -> None:
    full, compact = tokenizers
    assert ours(full.chat_template) and ours(compact.chat_template) and ours(None)
    assert not ours("{{ messages }} <tool_call> a model's own tool template")
    assert compact.chat_template == compact_template()
    with pytest.raises(ValueError, match="unknown tool style 'short'"):
        apply_tool_chat_template(full, "short")


def test_checkpoint_backend_renders_the_settings_style(tmp_path, tokenizers) -> None:
    from pipeline.evaluation.backends import CheckpointBackend, GenerationSettings
    from pipeline.training.model import build_tiny_model

    full, _ = tokenizers
    build_tiny_model(full).save_pretrained(tmp_path)
    full.save_pretrained(tmp_path)  # saved with the full template; the run's style wins
    messages, tools = _conversation()[:2], tool_schemas("aml")
    sizes = {}
    for style in ("full", "compact"):
        backend = CheckpointBackend(tmp_path, GenerationSettings(prompt_style=style))
        ids, _ = backend.encode(messages, tools)
        sizes[style] = len(ids)
        assert ("- review_alert(alert_id: str)" in backend.tokenizer.decode(ids)) == (
            style == "compact"
        )
    assert sizes["compact"] < sizes["full"] - 1000
